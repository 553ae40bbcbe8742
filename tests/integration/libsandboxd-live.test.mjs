// libsandboxd in C against the real daemon: tests/libsandboxd/
// test-libsandboxd-live.c (built next to sandboxd) runs every public call
// of include/sandboxd.h as cmocka tests and speaks TAP; this starts the
// daemon (credentials of 3 s, so one expires during the run), gives the
// program a token and checks that every test ran and passed.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { join, dirname } from "node:path";
import { Daemon, Client, BIN, CLASS } from "./lib/daemon.mjs";

const LIVE = join(dirname(BIN), "tests", "test-libsandboxd-live");
const TESTS = ["big_files", "control_plane", "exec_calls", "processes", "signals_and_streams",
  "terminal", "files", "snapshots_and_images", "forks", "errors", "credentials"];

let d, token;
before(async () => {
  d = await new Daemon({ args: ["--credential-ttl", "3s"] }).start();
  token = new Client(d).tok;
});
after(async () => {
  if (d) await d.destroy();
});

function run(file, env) {
  return new Promise((resolve, reject) => {
    const base = { ...process.env };
    delete base.ASTRO_AUTHZ_TOKEN;
    delete base.SANDBOXD_URL;
    const p = spawn(file, [], { env: { ...base, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    const out = [];
    const err = [];
    p.stdout.on("data", (b) => out.push(b));
    p.stderr.on("data", (b) => err.push(b));
    p.on("error", reject);
    p.on("close", (code, signal) => resolve({ code, signal, stdout: Buffer.concat(out).toString(), stderr: Buffer.concat(err).toString() }));
  });
}

test("every call of libsandboxd works against the daemon, and fails as documented", { timeout: 600000 }, async () => {
  assert.ok(existsSync(LIVE), `${LIVE} is not built`);
  const prefix = `lv${randomBytes(3).toString("hex")}`;
  const r = await run(LIVE, { SANDBOXD_TOKEN: token, SBX_LIVE_PREFIX: prefix, SBX_LIVE_CLASS: CLASS, CMOCKA_MESSAGE_OUTPUT: "TAP" });
  const detail = `${r.stdout}\n${r.stderr}`;
  assert.equal(r.signal, null, detail);
  assert.equal(r.code, 0, detail);
  const lines = r.stdout.split("\n");
  assert.ok(lines.includes(`1..${TESTS.length}`), detail);
  assert.equal(lines.filter((l) => l.startsWith("not ok")).length, 0, detail);
  const passed = lines.filter((l) => l.startsWith("ok ")).map((l) => l.replace(/^ok \d+ - /, ""));
  assert.deepEqual(passed, TESTS, detail);
  // The figures of the 100 MiB copies, and the bound they were held to.
  const rss = r.stdout.match(/^# 100 MiB each way: peak RSS (\d+) KiB/m);
  assert.ok(rss, detail);
  assert.ok(Number(rss[1]) < 64 * 1024, detail);
  if (process.env.SANDBOXD_TEST_LOG) process.stderr.write(r.stdout);
});
