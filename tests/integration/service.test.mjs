// The systemd unit (dist/systemd/sandboxd.service, as meson configures it
// next to the binary): systemd's own checker takes it, and its ExecStart
// and ExecReload, run as systemd would run them, serve, reload the keys,
// and stop leaving the sandboxes running (KillMode=process).
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync, execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { BIN, IMAGES, Daemon, Client, freePort, until } from "./lib/daemon.mjs";

const UNIT = join(dirname(BIN), "sandboxd.service");
const keys = (text) => {
  const m = {};
  for (const line of text.split("\n")) {
    const kv = line.match(/^([A-Za-z]+)=(.*)$/);
    if (kv) m[kv[1]] = kv[2];
  }
  return m;
};

test("systemd's checker takes the unit; it keeps sandboxes across a stop", { skip: !existsSync(UNIT) && "no unit in the build dir" }, () => {
  const text = readFileSync(UNIT, "utf8");
  const k = keys(text);
  assert.match(k.ExecStart, /^\/\S+\/sandboxd serve --state \/var\/lib\/sandboxd --log-format logfmt$/);
  assert.equal(k.KillMode, "process");
  assert.equal(k.Delegate, "yes");
  assert.equal(k.NoNewPrivileges, "yes");
  assert.equal(k.Restart, "on-failure");
  assert.equal(k.ExecReload, "/bin/kill -HUP $MAINPID");
  assert.equal(k.WantedBy, "multi-user.target");
  // The checker wants the binary where the unit says: the one under test.
  const dir = mkdtempSync(join(tmpdir(), "sandboxd-unit-"));
  try {
    const copy = join(dir, "sandboxd.service");
    writeFileSync(copy, text.replace(/^ExecStart=\S+/m, `ExecStart=${BIN}`));
    const r = spawnSync("systemd-analyze", ["verify", copy], { encoding: "utf8" });
    if (r.error) return; // no systemd-analyze on this host: nothing to check it with
    assert.equal(r.status, 0, `${r.stdout}${r.stderr}`);
    // It says what it ignores (a bad value) but exits 0 all the same.
    assert.doesNotMatch(`${r.stdout}${r.stderr}`, /sandboxd\.service/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

const alive = (marker) => readdirSync("/proc").some((p) => {
  try {
    return /^\d+$/.test(p) && readFileSync(`/proc/${p}/cmdline`, "utf8").includes(marker);
  } catch {
    return false;
  }
});

test("the unit's ExecStart serves; ExecReload's SIGHUP keeps it serving; a stop leaves the sandboxes running", { skip: !existsSync(UNIT) && "no unit in the build dir" }, async () => {
  const k = keys(readFileSync(UNIT, "utf8"));
  const state = mkdtempSync(join(tmpdir(), "sandboxd-unit-state-"));
  const port = await freePort();
  // The unit's command line, with this test's binary, state dir and port.
  const argv = k.ExecStart.split(/\s+/).slice(1).map((a) => (a === "/var/lib/sandboxd" ? state : a));
  const args = [...argv, "--listen", `127.0.0.1:${port}`, "--images", IMAGES, "--default-image", "tiny",
    "--pool-size", "0"];
  const d = new Daemon({ state });
  d.port = port;
  // NoNewPrivileges=yes, as the unit sets it (setpriv, from util-linux).
  const nnp = k.NoNewPrivileges === "yes";
  const start = async () => {
    d.log = "";
    d.proc = nnp ? spawn("setpriv", ["--no-new-privs", BIN, ...args], { stdio: ["ignore", "pipe", "pipe"] })
      : spawn(BIN, args, { stdio: ["ignore", "pipe", "pipe"] });
    d.proc.stderr.on("data", (b) => { d.log += b; });
    d.proc.stdout.on("data", (b) => { d.log += b; });
    d.exited = new Promise((r) => d.proc.on("exit", (code, sig) => r({ code, sig })));
    await until(async () => (await fetch(`${d.url}/healthz`).catch(() => null))?.status === 200);
  };
  try {
    await start();
    assert.equal(readFileSync(`/proc/${d.proc.pid}/status`, "utf8").match(/^NoNewPrivs:\s+(\d)/m)[1],
      nnp ? "1" : "0");
    // logfmt, as the unit asks.
    for (const line of d.log.split("\n").filter(Boolean)) assert.match(line, /^ts=\S+ level=\w+ msg="/, line);
    const c = new Client(d);
    assert.equal((await c.sh("svc", "echo up")).stdout, "up\n");
    // ExecReload: SIGHUP loads the keys again, and the daemon serves on.
    execFileSync("/bin/kill", ["-HUP", String(d.proc.pid)]);
    assert.equal((await c.sh("svc", "echo still")).stdout, "still\n");
    // A stop is SIGTERM to the main process only (KillMode=process): the
    // daemon exits 0 and the sandbox's processes run on.
    const marker = `unit-${process.pid}-${Date.now()}`;
    await c.spawn("svc", ["/bin/sh", "-c", `sleep 1000; echo ${marker}`]);
    await until(() => alive(marker));
    d.proc.kill("SIGTERM");
    assert.equal((await d.exited).code, 0, d.log);
    assert.ok(alive(marker), "the sandbox's process ended with the daemon");
    // The next start adopts the sandbox.
    await start();
    assert.equal((await c.sh("svc", "echo back")).stdout, "back\n");
    assert.ok(alive(marker));
  } finally {
    await d.destroy();
  }
});
