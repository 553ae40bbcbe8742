// A stream reconnects to the same process after sandboxd restarts, at its
// next offsets, every byte exactly once (docs/api.md, "Reconnecting").
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Daemon, Client } from "./lib/daemon.mjs";
import { Bytes, readAll, startReader, MiB } from "./lib/stream.mjs";

const T = { timeout: 150000 };

let d, c;
before(async () => {
  d = await new Daemon().start();
  c = new Client(d);
});
after(async () => d && (await d.destroy()));

async function blob(name, path, bytes) {
  const r = await c.sh(name, `head -c ${bytes} /dev/urandom > ${path} && sha256sum ${path}`, { timeoutMs: 60000 });
  assert.equal(r.exitCode, 0, r.stderr);
  return r.stdout.split(/\s+/)[0];
}

// A restart that does not come back in time fails the test, and does not
// leave a daemon behind that the next one would wait for.
async function restart(signal) {
  let timer;
  const late = new Promise((_, rej) => {
    timer = setTimeout(() => rej(new Error(`the daemon did not restart within 60 s of ${signal}:\n${d.log.slice(-3000)}`)), 60000);
  });
  try {
    await Promise.race([d.restart(signal), late]);
  } catch (e) {
    if (d.proc.exitCode === null && !d.proc.signalCode) d.proc.kill("SIGKILL");
    throw e;
  } finally {
    clearTimeout(timer);
  }
}

// A reader attached (and stalled) while the daemon goes away: its body is
// cut, or ends with an error frame; a reconnect from where it got to
// reads the rest.
async function attachedAcross(signal, name) {
  const size = 16 * MiB;
  const sum = await blob(name, "/tmp/blob", size);
  const p = await c.spawn(name, ["cat", "/tmp/blob"], { lossless: true });
  const into = { stdout: new Bytes(0), stderr: new Bytes(0) };
  const rd = startReader(c, name, p.processId, { into, stallAt: 5 * MiB });
  let first;
  try {
    await rd.stalled;
    await restart(signal);
    rd.resume();
    first = await rd.done;
  } finally {
    rd.abort();
  }
  assert.ok(first.end === "cut" || first.end === "error", `the stream across the restart ended: ${first.end}`);
  assert.ok(first.next.stdout > 0 && first.next.stdout < size, `read ${first.next.stdout}`);
  assert.equal(into.stdout.length, first.next.stdout);

  const r = await readAll(c, name, p.processId, { stdoutFrom: first.next.stdout, stderrFrom: first.next.stderr, into });
  assert.equal(r.end, "exit");
  assert.equal(r.start.processId, p.processId);
  assert.equal(r.start.startedAt, p.startedAt);
  assert.equal(r.start.stdoutDropped, 0, `after ${signal} and a restart, a reconnect of a lossless process at ${first.next.stdout} starts at ${r.start.stdoutFrom}`);
  assert.equal(r.start.stdoutFrom, first.next.stdout);
  assert.equal(into.stdout.length, size);
  assert.equal(into.stdout.sha256, sum);
  assert.equal(r.exit.exitCode, 0);
  assert.equal(r.exit.stdoutNext, size);
  assert.equal((await c.control("DELETE", `/v1/sandboxes/${name}`)).status, 204);
  c.handles.delete(name);
}

test("a stream attached when the daemon is SIGKILLed reconnects after its restart: every byte once", T, async () => {
  await attachedAcross("SIGKILL", "kill9");
});

test("a stream attached when the daemon is stopped with SIGTERM reconnects after its restart: every byte once", T, async () => {
  await attachedAcross("SIGTERM", "term");
});

test("reads between two restarts (SIGKILL, then SIGTERM) continue at their offsets", T, async () => {
  const size = 16 * MiB;
  const name = "between";
  const sum = await blob(name, "/tmp/blob", size);
  const p = await c.spawn(name, ["cat", "/tmp/blob"], { lossless: true });
  const into = { stdout: new Bytes(0), stderr: new Bytes(0) };
  let from = 0;
  for (const [n, signal] of [[3 * MiB + 17, "SIGKILL"], [4 * MiB - 5, "SIGTERM"]]) {
    const r = await readAll(c, name, p.processId, { stdoutFrom: from, stopAfter: n, into });
    assert.equal(r.end, "stopped");
    assert.equal(r.start.stdoutDropped, 0, `a reconnect of a lossless process at ${from} starts at ${r.start.stdoutFrom}`);
    from = r.next.stdout;
    await restart(signal);
    const poll = await c.poll(name, p.processId, { stdoutFrom: from });
    assert.equal(poll.state, "running", "the lossless writer ran to its end without a reader");
    assert.equal(poll.stdoutDropped, 0, `after ${signal} and a restart, a poll of a lossless process at ${from}, where its reader left it, was told ${poll.stdoutDropped} bytes were dropped`);
  }
  const r = await readAll(c, name, p.processId, { stdoutFrom: from, into });
  assert.equal(r.end, "exit");
  assert.equal(r.start.stdoutFrom, from);
  assert.equal(r.start.stdoutDropped, 0);
  assert.equal(into.stdout.length, size);
  assert.equal(into.stdout.sha256, sum);
});
