// Processes at their edges: an exec whose daemon died, finished processes
// and the 64-process cap, a stdin write nobody reads, malformed ids and
// signal names.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Daemon, Client, sleep, until } from "./lib/daemon.mjs";

let d, c;
before(async () => {
  d = await new Daemon().start();
  c = new Client(d);
});
after(async () => d && (await d.destroy()));

async function waitExit(name, id) {
  let ch;
  do ch = await c.poll(name, id, { waitMs: 5000 });
  while (ch.state !== "exited");
  return ch;
}

test("an exec running when the daemon is SIGKILLed is kept: listed with its exit code, output pollable", async () => {
  const command = ["/bin/sh", "-c", "echo started; sleep 3; echo out; echo err >&2; exit 3"];
  await c.attach("orphan");
  // The answer never comes: the daemon dies under it.
  const lost = c.data("orphan", "POST", "/exec", { command }).then(
    (r) => ({ answered: r.status }),
    (e) => ({ failed: e }),
  );
  await sleep(1000);
  await d.restart("SIGKILL");
  const first = await lost;
  assert.ok(first.failed, `the exec was answered: ${JSON.stringify(first)}`);

  const rec = await until(async () => {
    const r = await c.data("orphan", "GET", "/processes");
    assert.equal(r.status, 200);
    return r.body.processes.find((p) => JSON.stringify(p.command) === JSON.stringify(command) && p.state === "exited");
  }, 30000);
  assert.equal(rec.exec, true);
  assert.equal(rec.exitCode, 3);
  assert.equal(rec.timedOut, false);
  assert.equal(rec.truncated, false);
  assert.ok(Date.parse(rec.startedAt) && Date.parse(rec.exitedAt));
  const out = await c.poll("orphan", rec.processId);
  assert.equal(out.stdout, "started\nout\n");
  assert.equal(out.stderr, "err\n");
  assert.equal(out.stdoutDropped, 0);
  assert.equal(out.exitCode, 3);
  assert.equal((await c.data("orphan", "DELETE", `/processes/${rec.processId}`)).status, 204);
  assert.equal((await c.data("orphan", "GET", `/processes/${rec.processId}`)).status, 404);
  // An exec whose answer was delivered is not listed.
  await c.exec("orphan", ["true"]);
  assert.equal((await c.data("orphan", "GET", "/processes")).body.processes.length, 0);
});

test("exited processes do not hold slots: 100 never-killed spawns succeed, the oldest exited are forgotten", async () => {
  const ids = [];
  for (let i = 0; i < 100; i++) {
    const p = await c.spawn("slots", ["/bin/sh", "-c", `echo ${i}`]);
    ids.push(p.processId);
    const ch = await waitExit("slots", p.processId);
    assert.equal(ch.exitCode, 0);
  }
  // 64 exited records are kept, the newest ones.
  const list = (await c.data("slots", "GET", "/processes")).body.processes;
  assert.deepEqual(list.map((p) => p.processId), ids.slice(36));
  assert.equal((await c.data("slots", "GET", `/processes/${ids[0]}`)).status, 404);
  assert.equal((await c.data("slots", "GET", `/processes/${ids[35]}`)).status, 404);
  const newest = await c.poll("slots", ids[99]);
  assert.equal(newest.state, "exited");
  assert.equal(newest.stdout, "99\n");
  assert.equal((await c.poll("slots", ids[36])).stdout, "36\n");

  // Running processes still count: 64 run, the 65th is refused.
  const running = [];
  for (let i = 0; i < 64; i++) running.push((await c.spawn("slots", ["/bin/sleep", "60"])).processId);
  const r = await c.data("slots", "POST", "/processes", { command: ["/bin/sleep", "60"] });
  assert.equal(r.status, 402);
  assert.equal(r.body.error.code, "cap_reached");
  // Running exec count too.
  const e = await c.data("slots", "POST", "/exec", { command: ["true"] });
  assert.equal(e.status, 402);
  for (const id of running) assert.equal((await c.data("slots", "DELETE", `/processes/${id}`)).status, 204);
  assert.equal((await c.spawn("slots", ["true"])).state, "running");
});

test("a stdin write nobody reads: 408 timeout with the bytes written, the rest discarded; a second write meanwhile gets 409", async () => {
  // Reads nothing until /tmp/go exists, then counts what its stdin holds.
  const proc = await c.spawn("stdin", ["/bin/sh", "-c", "while [ ! -e /tmp/go ]; do sleep 0.1; done; exec wc -c"], { stdin: true });
  const big = Buffer.alloc(1 << 20, 0x61);
  const first = c.data("stdin", "POST", `/processes/${proc.processId}/stdin`, big, true);
  await sleep(1000);
  const second = await c.data("stdin", "POST", `/processes/${proc.processId}/stdin`, "x", true);
  assert.equal(second.status, 409, JSON.stringify(second.body));
  assert.equal(second.body.error.code, "invalid_state");
  const r = await first;
  assert.equal(r.status, 408, JSON.stringify(r.body));
  assert.equal(r.body.error.code, "timeout");
  const written = r.body.error.written;
  assert.ok(Number.isInteger(written) && written >= 0 && written < big.length, `written ${written}`);

  // Nothing of the rest reaches the process later: it reads exactly `written`.
  await c.sh("stdin", "touch /tmp/go");
  const close = await c.data("stdin", "POST", `/processes/${proc.processId}/stdin?close=true`, "", true);
  assert.equal(close.status, 204, JSON.stringify(close.body));
  const ch = await waitExit("stdin", proc.processId);
  assert.equal(ch.exitCode, 0);
  assert.equal(Number(ch.stdout.trim()), written);
});

test("a process id with a NUL or a slash never lists processes", async () => {
  const proc = await c.spawn("ids", ["/bin/sleep", "30"]);
  for (const path of ["/processes/%00", "/processes%00", "/processes/%2F", "/processes/", `/processes/${proc.processId}%00`]) {
    const r = await c.data("ids", "GET", path);
    assert.ok(r.status === 400 || r.status === 404, `${path}: ${r.status} ${JSON.stringify(r.body)}`);
    assert.equal(r.body?.processes, undefined, path);
    assert.ok(r.body?.error?.code, path);
  }
  const del = await c.data("ids", "DELETE", "/processes/%00");
  assert.ok(del.status === 400 || del.status === 404, `DELETE %00: ${del.status}`);
  assert.equal((await c.poll("ids", proc.processId)).state, "running");
  assert.equal((await c.data("ids", "DELETE", `/processes/${proc.processId}`)).status, 204);
});

test("signal names are upper case, with or without SIG", async () => {
  const proc = await c.spawn("sig", ["/bin/sleep", "30"]);
  for (const signal of ["term", "Term", "sigterm", "SIGterm", "SIG", ""]) {
    const r = await c.data("sig", "POST", `/processes/${proc.processId}/signal`, { signal });
    assert.equal(r.status, 400, `${signal}: ${r.status}`);
    assert.equal(r.body.error.code, "invalid_argument");
  }
  assert.equal((await c.poll("sig", proc.processId)).state, "running");
  assert.equal((await c.data("sig", "POST", `/processes/${proc.processId}/signal`, { signal: "SIGTERM" })).status, 204);
  const ch = await waitExit("sig", proc.processId);
  assert.equal(ch.exitCode, 143);
  await c.data("sig", "DELETE", `/processes/${proc.processId}`);
});
