// Starts a real sandboxd for the tests and mints identity tokens with it.
//
//   SANDBOXD_BIN     the daemon binary (default: <repo>/build/sandboxd)
//   SANDBOXD_IMAGES  the images directory (default: /var/lib/sandboxd/images)
//   SANDBOXD_TEST_CLASS  the class the daemons make `default` (ns, gvisor)
//
// Tests skip, saying why, when the binary or the image they need is absent.
//
// Every answer a daemon started here gives to fetch (the SDK's and the
// tests' own) is checked against the wire contract, docs/openapi.yaml: a
// violation is thrown from fetch. The validator's dependencies live in
// tests/ (npm install there).

import { spawn, execFile } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { contract, installFetchValidator } from "../../../tests/contract/openapi.mjs";

installFetchValidator();

const here = dirname(fileURLToPath(import.meta.url));
export const REPO = resolve(here, "../../..");
export const BIN = process.env.SANDBOXD_BIN || join(REPO, "build/sandboxd");
export const IMAGES = process.env.SANDBOXD_IMAGES || "/var/lib/sandboxd/images";
/** The sandbox class the daemons started here make `default` (SANDBOXD_TEST_CLASS). */
export const CLASS = process.env.SANDBOXD_TEST_CLASS || "ns";

let counter = 0;

/** Why tests needing `image` cannot run here, or undefined when they can. */
export function skipReason(image = "tiny") {
  if (!existsSync(BIN)) return `no sandboxd binary at ${BIN} (build it, or set SANDBOXD_BIN)`;
  if (!existsSync(join(IMAGES, image, "image.json"))) {
    return `no '${image}' image at ${join(IMAGES, image)} (set SANDBOXD_IMAGES)`;
  }
  return undefined;
}

/** A free loopback TCP port (free when asked; the daemon binds it right after). */
export function freePort() {
  return new Promise((resolvePort, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolvePort(port));
    });
  });
}

function run(bin, args, timeoutMs = 20_000) {
  return new Promise((resolveRun, reject) => {
    execFile(bin, args, { timeout: timeoutMs, maxBuffer: 1 << 20 }, (err, stdout, stderr) => {
      if (err) {
        err.message += `\n${stderr}`;
        reject(err);
      } else resolveRun({ stdout, stderr });
    });
  });
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * Starts `sandboxd serve` on a free loopback port with a fresh state dir.
 * Returns { url, stateDir, deployment, token(opts), disableAccount(a), stop() }.
 */
export async function startDaemon({ image = "tiny", args = [] } = {}) {
  const stateDir = await mkdtemp(join(tmpdir(), "sandboxd-ts-"));
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  contract.addServer(url);
  const child = spawn(
    BIN,
    ["serve", "--listen", `127.0.0.1:${port}`, "--state", stateDir, "--images", IMAGES, "--default-image", image,
      ...(CLASS !== "ns" ? ["--default-class", CLASS] : []), ...args],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  let log = "";
  const keep = (b) => {
    log = (log + b.toString()).slice(-16_384);
  };
  child.stdout.on("data", keep);
  child.stderr.on("data", keep);
  let exited = null;
  const exit = new Promise((r) => child.once("exit", (code, sig) => r((exited = { code, sig }))));

  const deadline = Date.now() + 30_000;
  for (;;) {
    if (exited) throw new Error(`sandboxd exited early (${JSON.stringify(exited)}):\n${log}`);
    try {
      const res = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(1000) });
      await res.arrayBuffer();
      if (res.status === 200) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`sandboxd did not become healthy within 30 s:\n${log}`);
    }
    await sleep(100);
  }

  // A deployment of its own per daemon, so daemons of several test files
  // never share a sandbox.
  const deployment = `ts-${process.pid}-${++counter}`;
  const minted = new Map();

  return {
    url,
    stateDir,
    deployment,
    log: () => log,
    /** Mints an identity token (deployment defaults to this daemon's own). */
    async token({ deployment: dep = deployment, account = "acct-ts" } = {}) {
      minted.set(dep, account);
      const { stdout } = await run(BIN, ["token", "--deployment", dep, "--account", account, "--state", stateDir, "--url", url]);
      const token = stdout.trim().split("\n").pop()?.trim();
      if (!token) throw new Error("sandboxd token printed nothing");
      return token;
    },
    async disableAccount(account) {
      await run(BIN, ["account", "disable", account, "--state", stateDir]);
    },
    async stop() {
      if (!exited) {
        // Sandboxes outlive their daemon: delete every one the tests made
        // (of every deployment a token was minted for) before stopping it.
        for (const [dep, account] of minted) {
          try {
            const { stdout } = await run(BIN, ["token", "--deployment", dep, "--account", account, "--state", stateDir, "--url", url]);
            const headers = { authorization: `Bearer ${stdout.trim().split("\n").pop()}` };
            const res = await fetch(`${url}/v1/sandboxes`, { headers });
            if (res.status !== 200) continue;
            for (const sb of (await res.json()).sandboxes)
              await (await fetch(`${url}/v1/sandboxes/${encodeURIComponent(sb.name)}`, { method: "DELETE", headers })).arrayBuffer();
          } catch {
            // best effort: the daemon may be gone already
          }
        }
        child.kill("SIGTERM");
        const timer = setTimeout(() => child.kill("SIGKILL"), 15_000);
        await exit;
        clearTimeout(timer);
      }
      await removeState(stateDir);
    },
  };
}

/** Removes a state dir unless something is still mounted under it. */
async function removeState(dir) {
  let mounts = "";
  try {
    mounts = readFileSync("/proc/self/mountinfo", "utf8");
  } catch {
    // no mountinfo: be careful and keep the directory
    return;
  }
  const busy = mounts.split("\n").some((line) => {
    const mountPoint = line.split(" ")[4] ?? "";
    return mountPoint === dir || mountPoint.startsWith(`${dir}/`);
  });
  if (busy) {
    process.stderr.write(`# keeping ${dir}: something is still mounted under it\n`);
    return;
  }
  await rm(dir, { recursive: true, force: true });
}

/** A fetch that counts requests by kind and may rewrite answers. */
export function countingFetch({ onAttach, onData } = {}) {
  const counts = { attach: 0, data: 0, control: 0, unauthorized: 0 };
  const impl = async (input, init) => {
    const url = String(input);
    const isAttach = /\/v1\/sandboxes\/[^/]+\/attach$/.test(url);
    const isData = /\/v1\/sandboxes\/[^/]+\/(exec|processes|files)/.test(url);
    if (isAttach) counts.attach++;
    else if (isData) counts.data++;
    else counts.control++;
    let res = await fetch(input, init);
    if (res.status === 401) counts.unauthorized++;
    if (isAttach && res.ok && onAttach) {
      const body = await res.json();
      const headers = new Headers(res.headers);
      headers.delete("content-length");
      res = new Response(JSON.stringify(onAttach(body)), { status: res.status, headers });
    }
    if (isData && onData) onData(url, res);
    return res;
  };
  return { fetch: impl, counts };
}

/** A fresh sandbox name per test. */
export function uniqueName(prefix = "t") {
  return `${prefix}-${process.pid}-${Date.now().toString(36)}-${(++counter).toString(36)}`;
}
