// Test harness: start the real sandboxd on a free port with its own state
// directory (images shared, built once), mint tokens, talk to it with fetch.
// Every answer a daemon started here gives to fetch is checked against the
// wire contract, docs/openapi.yaml: a violation is thrown from fetch.
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, existsSync, readFileSync, readdirSync, rmdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import net from "node:net";
import { contract, installFetchValidator } from "../../contract/openapi.mjs";

installFetchValidator();

const here = dirname(fileURLToPath(import.meta.url));
export const ROOT = resolve(here, "../../..");
export const BIN = process.env.SANDBOXD_BIN || join(ROOT, "build/sandboxd");
export const IMAGES = process.env.SANDBOXD_IMAGES || "/var/lib/sandboxd/images";
export const HAVE_DEBIAN = existsSync(join(IMAGES, "debian/image.json"));
// The sandbox class the suite runs against: the daemons started here make
// it the `default` class (scripts/test.sh runs the suite once per class).
export const CLASS = process.env.SANDBOXD_TEST_CLASS || "ns";
export const GVISOR = CLASS === "gvisor";

export function freePort() {
  return new Promise((res, rej) => {
    const s = net.createServer();
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => res(port));
    });
    s.on("error", rej);
  });
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Poll fn (sync or async) until it returns something truthy; throw after ms.
export async function until(fn, ms = 15000) {
  const t0 = Date.now();
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() - t0 > ms) throw new Error("timed out waiting");
    await sleep(100);
  }
}

export class Daemon {
  constructor(opts = {}) {
    this.opts = opts;
    this.state = opts.state || mkdtempSync(join(tmpdir(), "sandboxd-test-"));
    this.log = "";
    this.minted = new Map();
  }

  // opts.addr: the address it listens on (default loopback); opts.wrap: a
  // command it is started under (e.g. nsenter into a network namespace).
  get url() {
    return `http://${this.opts.addr || "127.0.0.1"}:${this.port}`;
  }

  async start() {
    if (!this.port) this.port = await freePort();
    contract.addServer(this.url);
    const args = [
      "serve",
      "--listen", `${this.opts.addr || "127.0.0.1"}:${this.port}`,
      "--state", this.state,
      "--images", this.opts.images || IMAGES,
      "--default-image", this.opts.image || "tiny",
      ...(CLASS !== "ns" ? ["--default-class", CLASS] : []),
      ...(this.opts.args || []),
    ];
    const wrap = this.opts.wrap || [];
    this.proc = spawn(wrap[0] || BIN, [...wrap.slice(1), ...(wrap.length ? [BIN] : []), ...args], {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, ...(this.opts.env || {}) },
    });
    const grab = (d) => {
      this.log += d.toString();
      if (process.env.SANDBOXD_TEST_LOG) process.stderr.write(d);
    };
    this.proc.stdout.on("data", grab);
    this.proc.stderr.on("data", grab);
    this.exited = new Promise((r) => this.proc.on("exit", (code, sig) => r({ code, sig })));
    const deadline = Date.now() + 15000;
    for (;;) {
      if (this.proc.exitCode !== null) throw new Error(`sandboxd exited:\n${this.log}`);
      try {
        const r = await fetch(`${this.url}/healthz`);
        if (r.status === 200) break;
      } catch {}
      if (Date.now() > deadline) throw new Error(`sandboxd did not come up:\n${this.log}`);
      await sleep(30);
    }
    return this;
  }

  token(deployment = "dep-a", account = "acct-a", extra = []) {
    this.minted.set(deployment, account);
    return execFileSync(BIN, ["token", "--state", this.state, "--url", this.url,
      "--deployment", deployment, "--account", account, ...extra]).toString().trim();
  }

  cli(...args) {
    return execFileSync(BIN, [...args, "--state", this.state]).toString();
  }

  async stop(signal = "SIGTERM") {
    if (!this.proc || this.proc.exitCode !== null || this.proc.signalCode) return;
    this.proc.kill(signal);
    const r = await this.exited;
    // A sanitizer report makes the daemon exit non-zero: fail loudly.
    if (signal === "SIGTERM" && r.code !== 0) throw new Error(`sandboxd exit ${r.code}:\n${this.log}`);
  }

  async restart(signal = "SIGTERM") {
    await this.stop(signal);
    return this.start();
  }

  // Delete every sandbox of every deployment a token was minted for (their
  // processes, cgroups and files), stop the daemon, remove the state dir.
  async destroy() {
    if (this.proc && this.proc.exitCode === null && !this.proc.signalCode) {
      for (const [dep, acct] of this.minted) {
        try {
          const tok = this.token(dep, acct);
          const h = { authorization: `Bearer ${tok}` };
          const r = await fetch(`${this.url}/v1/sandboxes`, { headers: h });
          if (r.status !== 200) continue;
          for (const sb of (await r.json()).sandboxes)
            await fetch(`${this.url}/v1/sandboxes/${sb.name}`, { method: "DELETE", headers: h });
        } catch {}
      }
    }
    await this.stop();
    removeCgroups(this.state);
    rmSync(this.state, { recursive: true, force: true });
  }
}

// A daemon names its cgroup subtree sandboxd/<instance-id>; once its
// sandboxes are gone the (empty) directories can go too.
export function removeCgroups(state) {
  let inst;
  try {
    inst = readFileSync(join(state, "instance-id"), "utf8").trim();
  } catch {
    return;
  }
  for (const h of readdirSync("/sys/fs/cgroup")) {
    const dir = join("/sys/fs/cgroup", h, "sandboxd", inst);
    if (!existsSync(dir)) continue;
    for (const e of readdirSync(dir, { withFileTypes: true }))
      if (e.isDirectory()) try { rmdirSync(join(dir, e.name)); } catch {}
    try { rmdirSync(dir); } catch {}
  }
}

export class Client {
  constructor(daemon, deployment = "dep-a", account = "acct-a") {
    this.d = daemon;
    this.tok = daemon.token(deployment, account);
    this.handles = new Map();
  }

  async control(method, path, body) {
    const r = await fetch(`${this.d.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${this.tok}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await r.text();
    return { status: r.status, body: text ? JSON.parse(text) : null, headers: r.headers };
  }

  async attach(name) {
    const r = await this.control("POST", `/v1/sandboxes/${name}/attach`, {});
    if (r.status !== 200) throw new Error(`attach ${name}: ${r.status} ${JSON.stringify(r.body)}`);
    this.handles.set(name, r.body);
    return r.body;
  }

  async data(name, method, path, body, raw = false) {
    const h = this.handles.get(name) || (await this.attach(name));
    const r = await fetch(`${h.endpoint}${path}`, {
      method,
      headers: { ...h.headers, ...(raw ? {} : { "content-type": "application/json" }) },
      body: body === undefined ? undefined : raw ? body : JSON.stringify(body),
    });
    const text = await r.text();
    let parsed = null;
    try { parsed = text ? JSON.parse(text) : null; } catch { parsed = text; }
    return { status: r.status, body: parsed, headers: r.headers };
  }

  async exec(name, command, extra = {}) {
    const r = await this.data(name, "POST", "/exec", { command, ...extra });
    if (r.status !== 200) throw new Error(`exec: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body;
  }

  async sh(name, line, extra = {}) {
    return this.exec(name, ["/bin/sh", "-c", line], extra);
  }

  async spawn(name, command, extra = {}) {
    const r = await this.data(name, "POST", "/processes", { command, ...extra });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return r.body;
  }

  async poll(name, id, q = {}) {
    const qs = new URLSearchParams(Object.entries(q).map(([k, v]) => [k, String(v)]));
    const r = await this.data(name, "GET", `/processes/${id}?${qs}`);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return r.body;
  }
}
