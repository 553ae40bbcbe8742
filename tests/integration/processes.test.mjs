// Background processes: spawn, poll, list, signal, kill, stdin, restart.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { Daemon, Client, sleep } from "./lib/daemon.mjs";

let d, c;
before(async () => {
  d = await new Daemon().start();
  c = new Client(d);
});
after(async () => d && (await d.destroy()));


test("the doc's poll loop reads a process to its end", async () => {
  const proc = await c.spawn("loop", ["/bin/sh", "-c", "for i in 1 2 3; do echo line $i; sleep 0.1; done; echo done >&2; exit 7"]);
  assert.equal(proc.state, "running");
  assert.deepEqual(proc.command, ["/bin/sh", "-c", "for i in 1 2 3; do echo line $i; sleep 0.1; done; echo done >&2; exit 7"]);
  assert.ok(Date.parse(proc.startedAt));
  assert.equal(proc.exitCode, undefined);
  let stdoutFrom = 0, stderrFrom = 0, out = "", err = "";
  for (;;) {
    const chunk = await c.poll("loop", proc.processId, { stdoutFrom, stderrFrom });
    stdoutFrom = chunk.stdoutNext;
    stderrFrom = chunk.stderrNext;
    assert.equal(chunk.stdoutDropped, 0);
    out += chunk.stdout;
    err += chunk.stderr;
    if (chunk.state === "exited") {
      assert.equal(chunk.exitCode, 7);
      assert.ok(Date.parse(chunk.exitedAt));
      break;
    }
    await sleep(50);
  }
  assert.equal(out, "line 1\nline 2\nline 3\n");
  assert.equal(err, "done\n");
});

test("5 MiB of numbered lines polled continuously: every line once, in order", async () => {
  // 800000 lines of "line NNNNNN\n": 9.6 MB, written in 80 bursts of
  // 120 kB. A reader that polls continuously keeps up; one that stopped
  // would be told what it lost (the next test).
  const n = 200000;
  const proc = await c.spawn("bulk", ["/bin/sh", "-c",
    `for b in $(seq 0 79); do awk -v s=$((b * 10000)) 'BEGIN { for (i = s; i < s + 10000; i++) printf "line %06d\\n", i }'; sleep 0.01; done`]);
  let from = 0, text = "", dropped = 0;
  for (;;) {
    const ch = await c.poll("bulk", proc.processId, { stdoutFrom: from, waitMs: 1000 });
    dropped += ch.stdoutDropped;
    text += ch.stdout;
    from = ch.stdoutNext;
    if (ch.state === "exited" && ch.stdout === "") break;
  }
  assert.equal(dropped, 0);
  assert.ok(text.length > 5 * 1024 * 1024, `read ${text.length} bytes`);
  const expected = Array.from({ length: n * 4 }, (_, i) => `line ${String(i).padStart(6, "0")}\n`).join("");
  const h = (s) => createHash("sha256").update(s).digest("hex");
  assert.equal(h(text), h(expected));
});

test("3 MiB written before the first poll reports exactly 2 MiB dropped", async () => {
  const proc = await c.spawn("drop", ["/bin/sh", "-c", "head -c 3145728 /dev/zero | tr '\\0' x"]);
  let ch;
  do {
    await sleep(100);
    ch = await c.poll("drop", proc.processId, { stdoutFrom: 0, stdoutFrom: 0 });
  } while (ch.state !== "exited");
  ch = await c.poll("drop", proc.processId, { stdoutFrom: 0 });
  assert.equal(ch.stdoutDropped, 2 * 1024 * 1024);
  assert.equal(ch.stdout.length, 1024 * 1024);
  assert.equal(ch.stdoutNext, 3 * 1024 * 1024);
});

test("waitMs returns promptly on output and on exit", async () => {
  const proc = await c.spawn("wait", ["/bin/sh", "-c", "sleep 0.5; echo hi; sleep 0.5"]);
  let t0 = Date.now();
  let ch = await c.poll("wait", proc.processId, { waitMs: 10000 });
  let dt = Date.now() - t0;
  assert.equal(ch.stdout, "hi\n");
  assert.ok(dt >= 300 && dt < 2000, `output after ${dt} ms`);
  t0 = Date.now();
  ch = await c.poll("wait", proc.processId, { stdoutFrom: ch.stdoutNext, waitMs: 10000 });
  dt = Date.now() - t0;
  assert.equal(ch.state, "exited");
  assert.ok(dt < 2000, `exit after ${dt} ms`);
  assert.equal((await c.data("wait", "GET", `/processes/${proc.processId}?waitMs=30001`)).status, 400);
});

test("TERM to a shell's group leaves no process behind; exit code is 128+15", async () => {
  const proc = await c.spawn("term", ["/bin/sh", "-c", "sleep 100 & sleep 100 & wait"]);
  await sleep(200);
  let r = await c.data("term", "POST", `/processes/${proc.processId}/signal`, { signal: "TERM" });
  assert.equal(r.status, 204);
  let ch;
  for (let i = 0; i < 50; i++) {
    ch = await c.poll("term", proc.processId, { waitMs: 200 });
    if (ch.state === "exited") break;
  }
  assert.equal(ch.state, "exited");
  assert.equal(ch.exitCode, 143);
  await sleep(100);
  const ps = await c.sh("term", "ps -o args | grep -c '^sleep 100' || true");
  assert.equal(ps.stdout.trim(), "0");
});

test("bad signal names get 400, unknown ids 404", async () => {
  const proc = await c.spawn("bad", ["/bin/sleep", "30"]);
  const r = await c.data("bad", "POST", `/processes/${proc.processId}/signal`, { signal: "SEGV" });
  assert.equal(r.status, 400);
  assert.equal((await c.data("bad", "POST", `/processes/${proc.processId}/signal`, {})).status, 204);
  assert.equal((await c.data("bad", "GET", "/processes/p-nope")).status, 404);
  assert.equal((await c.data("bad", "DELETE", "/processes/p-nope")).status, 404);
  assert.equal((await c.data("bad", "POST", "/processes/p-nope/signal", { signal: "TERM" })).status, 404);
  assert.equal((await c.data("bad", "GET", `/processes/${proc.processId}?stdoutFrom=-1`)).status, 400);
  assert.equal((await c.data("bad", "GET", `/processes/${proc.processId}?stdoutFrom=abc`)).status, 400);
  assert.equal((await c.data("bad", "POST", "/processes", { command: [] })).status, 400);
  assert.equal((await c.data("bad", "DELETE", `/processes/${proc.processId}`)).status, 204);
  assert.equal((await c.data("bad", "GET", `/processes/${proc.processId}`)).status, 404);
});

test("64 processes per sandbox: the 65th is refused, a kill frees a place", async () => {
  const ids = [];
  for (let i = 0; i < 64; i++) ids.push((await c.spawn("cap", ["/bin/sleep", "60"])).processId);
  const r = await c.data("cap", "POST", "/processes", { command: ["/bin/sleep", "60"] });
  assert.equal(r.status, 402);
  assert.equal(r.body.error.code, "cap_reached");
  const list = await c.data("cap", "GET", "/processes");
  assert.equal(list.body.processes.length, 64);
  assert.equal((await c.data("cap", "DELETE", `/processes/${ids[0]}`)).status, 204);
  ids.shift();
  ids.push((await c.spawn("cap", ["/bin/sleep", "60"])).processId);
  for (const id of ids) await c.data("cap", "DELETE", `/processes/${id}`);
  // Finished execs do not count.
  for (let i = 0; i < 3; i++) await c.exec("cap", ["true"]);
  assert.equal((await c.data("cap", "GET", "/processes")).body.processes.length, 0);
});

test("stdin round trip through cat", async () => {
  const proc = await c.spawn("stdin", ["/bin/cat"], { stdin: true });
  let r = await c.data("stdin", "POST", `/processes/${proc.processId}/stdin`, "hello ", true);
  assert.equal(r.status, 204);
  r = await c.data("stdin", "POST", `/processes/${proc.processId}/stdin?close=true`, "world\n", true);
  assert.equal(r.status, 204);
  let out = "", from = 0, ch;
  do {
    ch = await c.poll("stdin", proc.processId, { stdoutFrom: from, waitMs: 2000 });
    out += ch.stdout;
    from = ch.stdoutNext;
  } while (ch.state !== "exited");
  assert.equal(out, "hello world\n");
  assert.equal(ch.exitCode, 0);
  const other = await c.spawn("stdin", ["/bin/cat"]);
  r = await c.data("stdin", "POST", `/processes/${other.processId}/stdin`, "x", true);
  assert.equal(r.status, 409);
  assert.equal(r.body.error.code, "invalid_state");
});

test("a process outlives a SIGKILLed daemon: listed, polled, killed after restart", async () => {
  const proc = await c.spawn("survive", ["/bin/sh", "-c", "echo first; sleep 1; echo second; sleep 100"]);
  const ch = await c.poll("survive", proc.processId, { waitMs: 5000 });
  assert.equal(ch.stdout, "first\n");
  await d.restart("SIGKILL");
  const list = await c.data("survive", "GET", "/processes");
  assert.ok(list.body.processes.some((p) => p.processId === proc.processId && p.state === "running"));
  let ch2;
  do {
    ch2 = await c.poll("survive", proc.processId, { stdoutFrom: ch.stdoutNext, waitMs: 5000 });
  } while (ch2.stdout === "");
  assert.equal(ch2.stdout, "second\n");
  assert.equal((await c.data("survive", "DELETE", `/processes/${proc.processId}`)).status, 204);
  assert.equal((await c.data("survive", "GET", `/processes/${proc.processId}`)).status, 404);
});

test("a chunk never ends inside a UTF-8 sequence", async () => {
  // "é" is 2 bytes: write the first byte, wait, then the second.
  const proc = await c.spawn("utf8", ["/bin/sh", "-c", "printf 'a\\303'; sleep 0.5; printf '\\251b'"]);
  await sleep(200);
  let ch = await c.poll("utf8", proc.processId, {});
  assert.equal(ch.stdout, "a");
  assert.equal(ch.stdoutNext, 1);
  ch = await c.poll("utf8", proc.processId, { stdoutFrom: 1, waitMs: 3000 });
  let out = ch.stdout, from = ch.stdoutNext;
  while (ch.state !== "exited" || ch.stdout) {
    ch = await c.poll("utf8", proc.processId, { stdoutFrom: from, waitMs: 1000 });
    out += ch.stdout;
    from = ch.stdoutNext;
  }
  assert.equal(out, "éb");
  assert.equal(from, 4);
});
