// Process output streams: the frame format, lossless spawns, backpressure,
// reconnects from offsets, several readers, errors (docs/api.md,
// "Streaming output").
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Daemon, Client, sleep, until, GVISOR } from "./lib/daemon.mjs";
import {
  FrameDecoder, ProcessStream, StreamProtocolError, Bytes, openStream, tryStream, readAll, startReader, sha256,
  START, STDOUT, STDERR, EXIT, ERROR, KEEPALIVE, MAX_PAYLOAD, CONTENT_TYPE, KiB, MiB,
} from "./lib/stream.mjs";

// Each test is bounded: a stream that hangs fails it rather than the run.
const T = { timeout: 120000 };
// How far the sandbox may have read past what a stalled reader has taken:
// its 256 KiB read-ahead (WINDOW) past what it has sent, plus what was sent
// and is still on the way (SLACK): in the agent's socket, in the daemon, in
// the daemon's TCP send buffer and in the client's receive buffer, which
// the kernel grows as the reader reads (about 1 MiB after the first MiB).
// Measured on a fresh connection: 1.1 to 2.4 MiB in all, both classes. A
// pooled connection that carried an earlier transfer can hold many MiB
// more, so a stalled reader reads on a connection of its own (startReader
// with stallAt does), slowly up to its stall.
const WINDOW = 256 * KiB;
const SLACK = 4 * MiB;

let d, c;
before(async () => {
  d = await new Daemon().start();
  c = new Client(d);
});
after(async () => d && (await d.destroy()));

// ---- the decoder, on bytes made here ----

function frame(type, payload = Buffer.alloc(0), offset = 0, head = {}) {
  const h = Buffer.alloc(16);
  h[0] = type;
  h[1] = head.b1 ?? 0;
  h[2] = head.b2 ?? 0;
  h[3] = head.b3 ?? 0;
  h.writeUInt32BE(head.length ?? payload.length, 4);
  h.writeBigUInt64BE(BigInt(offset), 8);
  return Buffer.concat([h, payload]);
}
const json = (o) => Buffer.from(JSON.stringify(o));
const startOf = (o = {}) => json({ processId: "p-1", command: ["x"], state: "running", startedAt: "2026-01-01T00:00:00.000Z",
  stdoutFrom: 0, stderrFrom: 0, stdoutDropped: 0, stderrDropped: 0, ...o });
const exitOf = (o = {}) => json({ processId: "p-1", command: ["x"], state: "exited", exitCode: 0, startedAt: "2026-01-01T00:00:00.000Z",
  exitedAt: "2026-01-01T00:00:01.000Z", stdoutNext: 0, stderrNext: 0, ...o });

function drain(dec) {
  const out = [];
  let f;
  while ((f = dec.next()) !== null) out.push(f);
  return out;
}

test("decoder: frames split anywhere and several to a read come out whole; unknown types are skipped", () => {
  const bytes = Buffer.concat([
    frame(START, startOf()),
    frame(STDOUT, Buffer.from("hello "), 0),
    frame(9, Buffer.from("a future frame type"), 77),
    frame(0, Buffer.alloc(0)),
    frame(KEEPALIVE),
    frame(STDERR, Buffer.from("oops"), 0),
    frame(STDOUT, Buffer.from("world"), 6),
    frame(STDOUT, Buffer.alloc(0), 11),
    frame(EXIT, exitOf({ stdoutNext: 11, stderrNext: 4 })),
  ]);
  const expect = (frames) => {
    assert.deepEqual(frames.map((f) => f.type), [START, STDOUT, KEEPALIVE, STDERR, STDOUT, STDOUT, EXIT]);
    assert.equal(frames[0].json.processId, "p-1");
    assert.equal(frames[1].data.toString(), "hello ");
    assert.equal(frames[3].data.toString(), "oops");
    assert.equal(frames[4].offset, 6);
    assert.equal(frames[6].json.stdoutNext, 11);
  };
  // All at once.
  let dec = new FrameDecoder();
  dec.push(bytes);
  expect(drain(dec));
  assert.equal(dec.skipped, 2);
  assert.equal(dec.pending, 0);
  // One byte at a time.
  dec = new FrameDecoder();
  const got = [];
  for (let i = 0; i < bytes.length; i++) {
    dec.push(bytes.subarray(i, i + 1));
    got.push(...drain(dec));
  }
  expect(got);
  // Random cuts.
  for (let round = 0; round < 50; round++) {
    dec = new FrameDecoder();
    const out = [];
    for (let i = 0; i < bytes.length; ) {
      const n = 1 + Math.floor(Math.random() * 40);
      dec.push(bytes.subarray(i, i + n));
      i += n;
      out.push(...drain(dec));
    }
    expect(out);
  }
  // A frame not yet whole stays pending.
  dec = new FrameDecoder();
  dec.push(frame(STDOUT, Buffer.from("abcdef"), 0).subarray(0, 20));
  assert.equal(dec.next(), null);
  assert.equal(dec.pending, 20);
});

test("decoder: garbage is refused, never passed on", () => {
  const refuse = (bytes, re) => {
    const dec = new FrameDecoder();
    dec.push(bytes);
    assert.throws(() => drain(dec), (e) => e instanceof StreamProtocolError && re.test(e.message));
  };
  refuse(frame(STDOUT, Buffer.from("x"), 0, { b1: 1 }), /bytes 1-3/);
  refuse(frame(STDOUT, Buffer.from("x"), 0, { b2: 0x80 }), /bytes 1-3/);
  refuse(frame(9, Buffer.from("x"), 0, { b3: 1 }), /bytes 1-3/);
  // The cap is checked on the head: no need to wait for 8 MiB + 1 bytes.
  refuse(frame(STDOUT, Buffer.alloc(0), 0, { length: MAX_PAYLOAD + 1 }), /over the 8388608-byte cap/);
  refuse(frame(9, Buffer.alloc(0), 0, { length: 0xffffffff }), /cap/);
  refuse(frame(START, startOf(), 5), /offset 5, not 0/);
  refuse(frame(KEEPALIVE, Buffer.from("x")), /payload/);
  refuse(frame(EXIT, Buffer.from("{not json")), /not JSON/);
  refuse(frame(ERROR, Buffer.from("[1]")), /not a JSON object/);
  const h = Buffer.alloc(16);
  h[0] = STDOUT;
  h.writeBigUInt64BE(1n << 60n, 8);
  refuse(h, /beyond any stream/);
  // Exactly the cap is a frame.
  const dec = new FrameDecoder();
  dec.push(frame(STDOUT, Buffer.alloc(MAX_PAYLOAD, 7), 0));
  const [f] = drain(dec);
  assert.equal(f.length, MAX_PAYLOAD);
});

// A ProcessStream over bytes made here, delivered in `parts` pieces.
function localStream(bytes, opts = {}) {
  const pieces = [];
  for (let i = 0; i < bytes.length; i += 7) pieces.push(bytes.subarray(i, i + 7));
  const body = new ReadableStream({
    pull(ctl) {
      if (pieces.length) ctl.enqueue(new Uint8Array(pieces.shift()));
      else if (opts.error) ctl.error(new TypeError("terminated"));
      else ctl.close();
    },
  });
  const res = new Response(body, { headers: { "content-type": CONTENT_TYPE } });
  const ctl = new AbortController();
  return new ProcessStream(res, ctl, ctl.signal, opts);
}

async function collect(s) {
  const out = [];
  for await (const f of s) out.push(f);
  return out;
}

test("stream rules: start first, offsets without gaps, exit offsets where the data ended, nothing after the end", async () => {
  const ok = Buffer.concat([
    frame(START, startOf({ stdoutFrom: 10, stdoutDropped: 4 })),
    frame(STDOUT, Buffer.from("abc"), 10),
    frame(STDOUT, Buffer.from("de"), 13),
    frame(EXIT, exitOf({ stdoutNext: 15, stderrNext: 0 })),
  ]);
  const s = localStream(ok, { stdoutFrom: 6 });
  const frames = await collect(s);
  assert.equal(frames.length, 4);
  assert.equal(s.end, "exit");
  assert.deepEqual(s.next, { stdout: 15, stderr: 0 });

  const bad = async (bytes, re, opts = {}) => {
    await assert.rejects(collect(localStream(bytes, opts)), (e) => e instanceof StreamProtocolError && re.test(e.message));
  };
  await bad(frame(STDOUT, Buffer.from("x"), 0), /first frame is stdout/);
  await bad(Buffer.concat([frame(START, startOf()), frame(STDOUT, Buffer.from("x"), 1)]), /a gap/);
  await bad(Buffer.concat([frame(START, startOf()), frame(STDOUT, Buffer.from("xy"), 0), frame(STDOUT, Buffer.from("x"), 1)]), /an overlap/);
  await bad(Buffer.concat([frame(START, startOf()), frame(STDERR, Buffer.from("x"), 3)]), /stderr frame at offset 3/);
  await bad(Buffer.concat([frame(START, startOf()), frame(START, startOf())]), /second start/);
  await bad(Buffer.concat([frame(START, startOf()), frame(STDOUT, Buffer.from("x"), 0), frame(EXIT, exitOf({ stdoutNext: 2 }))]), /exit frame says stdoutNext 2/);
  await bad(Buffer.concat([frame(START, startOf()), frame(EXIT, exitOf()), frame(KEEPALIVE)]), /bytes follow the exit frame/);
  await bad(Buffer.concat([frame(START, startOf()), frame(ERROR, json({ error: { code: "x", message: "y" } })), Buffer.from([1])]), /follow the error frame/);
  await bad(Buffer.concat([frame(START, startOf()), frame(ERROR, json({ oops: 1 }))]), /error frame without/);
  await bad(frame(START, startOf({ stdoutFrom: 10, stdoutDropped: 3 })), /reports 3 dropped/, { stdoutFrom: 6 });
  await bad(frame(START, startOf({ stderrDropped: undefined })), /no stderrDropped/);

  // A body that ends without an exit or error frame was cut, inside a
  // frame or between two; so was one whose connection broke.
  const cut = localStream(Buffer.concat([frame(START, startOf()), frame(STDOUT, Buffer.from("abc"), 0), frame(STDOUT, Buffer.from("def"), 3).subarray(0, 18)]));
  await collect(cut);
  assert.equal(cut.end, "cut");
  assert.deepEqual(cut.next, { stdout: 3, stderr: 0 });
  const broke = localStream(frame(START, startOf()), { error: true });
  await collect(broke);
  assert.equal(broke.end, "cut");
  assert.ok(broke.cutError);
});

// ---- against the daemon ----

// A file of random bytes in the sandbox; its sha256 as the sandbox sees it.
async function blob(cl, name, path, bytes) {
  const r = await cl.sh(name, `head -c ${bytes} /dev/urandom > ${path} && sha256sum ${path}`, { timeoutMs: 60000 });
  assert.equal(r.exitCode, 0, r.stderr);
  const sum = r.stdout.split(/\s+/)[0];
  assert.match(sum, /^[0-9a-f]{64}$/);
  return sum;
}

async function waitExit(cl, name, id, ms = 60000) {
  let ch;
  await until(async () => {
    ch = await cl.poll(name, id, { waitMs: 2000 });
    return ch.state === "exited";
  }, ms);
  return ch;
}

// Polls (which are not readers) a process that is not lossless until its
// stdoutNext stops moving or it exits; the last answer.
async function settled(cl, name, id) {
  let from = 0, last = -1, same = 0, ch;
  await until(async () => {
    ch = await cl.poll(name, id, { stdoutFrom: from });
    from = ch.stdoutNext;
    same = ch.stdoutNext === last ? same + 1 : 0;
    last = ch.stdoutNext;
    if (ch.state !== "running") return true;
    await sleep(200);
    return same >= 3;
  }, 30000);
  return ch;
}

async function drop(cl, name) {
  const r = await cl.control("DELETE", `/v1/sandboxes/${name}`);
  assert.equal(r.status, 204);
  cl.handles.delete(name);
}

// A writer that starts only once /tmp/go exists, so that a reader can
// attach first: a process that is not lossless then has a reader from byte 0.
const gated = (cmd) => ["/bin/sh", "-c", `while [ ! -e /tmp/go ]; do sleep 0.05; done; exec ${cmd}`];
const go = (cl, name) => cl.sh(name, "touch /tmp/go");

test("a lossless writer of 50 MiB arrives whole, read at full speed and read slowly", T, async () => {
  const size = 50 * MiB;
  const sum = await blob(c, "big", "/tmp/blob", size);
  for (const slow of [undefined, { bytes: 4 * MiB, pauseMs: 10 }]) {
    const p = await c.spawn("big", ["cat", "/tmp/blob"], { lossless: true });
    assert.equal(p.lossless, true);
    assert.equal(p.pty, undefined);
    const r = await readAll(c, "big", p.processId, { slow, keep: 0 });
    const how = slow ? "slow" : "fast";
    assert.equal(r.end, "exit", how);
    assert.equal(r.start.processId, p.processId);
    assert.equal(r.start.stdoutFrom, 0);
    assert.equal(r.start.stdoutDropped, 0);
    assert.equal(r.start.stderrDropped, 0);
    assert.equal(r.stdout.length, size, how);
    assert.equal(r.stdout.sha256, sum, how);
    assert.equal(r.stderr.length, 0);
    assert.equal(r.exit.exitCode, 0);
    assert.equal(r.exit.stdoutNext, size);
    assert.equal(r.exit.stderrNext, 0);
    assert.equal(r.exit.processId, p.processId);
    assert.ok(r.frames.every((f) => f.length <= MAX_PAYLOAD));
    assert.equal(r.skipped, 0);
  }
  await drop(c, "big");
});

test("backpressure: a stalled reader holds a writer back, nothing is dropped, it finishes once the reader goes on", T, async () => {
  const size = 32 * MiB;
  const sum = await blob(c, "bp", "/tmp/blob", size);
  const p = await c.spawn("bp", gated("cat /tmp/blob"));
  assert.equal(p.lossless, undefined);
  const rd = startReader(c, "bp", p.processId, { slow: { bytes: 512 * KiB, pauseMs: 5 }, stallAt: 512 * KiB, keep: 0 });
  try {
    const start = await rd.started;
    assert.equal(start.stdoutFrom, 0);
    await go(c, "bp");
    const read = await rd.stalled;
    const ch = await settled(c, "bp", p.processId);
    assert.equal(ch.state, "running", "the writer ran to its end past a stalled reader");
    assert.ok(ch.stdoutNext <= read + WINDOW + SLACK, `the sandbox read ${ch.stdoutNext} bytes; the reader had ${read}`);
    // Still held a while later.
    await sleep(1000);
    const later = await c.poll("bp", p.processId, { stdoutFrom: ch.stdoutNext });
    assert.equal(later.state, "running");
    assert.ok(later.stdoutNext <= read + WINDOW + SLACK, `the sandbox read ${later.stdoutNext} bytes; the reader had ${read}`);
    rd.resume();
    const r = await rd.done;
    assert.equal(r.end, "exit");
    assert.equal(r.start.stdoutDropped, 0);
    assert.equal(r.stdout.length, size);
    assert.equal(r.stdout.sha256, sum);
    assert.equal(r.exit.exitCode, 0);
  } finally {
    rd.abort();
  }
  await drop(c, "bp");
});

test("a reader that reads part, leaves and reconnects at its offsets gets every byte once, three times over", T, async () => {
  const size = 20 * MiB;
  const sum = await blob(c, "recon", "/tmp/blob", size);
  const p = await c.spawn("recon", ["cat", "/tmp/blob"], { lossless: true });
  const into = { stdout: new Bytes(0), stderr: new Bytes(0) };
  let from = 0;
  // Cut off inside a frame, at odd places.
  for (const n of [5 * MiB + 12345, 3 * MiB + 1, 7 * MiB - 77]) {
    const r = await readAll(c, "recon", p.processId, { stdoutFrom: from, stopAfter: n, into });
    assert.equal(r.end, "stopped");
    assert.equal(r.start.stdoutDropped, 0, `a reconnect of a lossless process at ${from} starts at ${r.start.stdoutFrom}`);
    assert.equal(r.start.stdoutFrom, from);
    assert.equal(r.next.stdout, from + n);
    from = r.next.stdout;
    assert.equal(into.stdout.length, from);
  }
  const r = await readAll(c, "recon", p.processId, { stdoutFrom: from, into });
  assert.equal(r.end, "exit");
  assert.equal(r.start.stdoutDropped, 0, `a reconnect of a lossless process at ${from} starts at ${r.start.stdoutFrom}`);
  assert.equal(r.start.stdoutFrom, from);
  assert.equal(into.stdout.length, size);
  assert.equal(into.stdout.sha256, sum);
  assert.equal(r.exit.stdoutNext, size);
  await drop(c, "recon");
});

test("a lossless process holds its output for its first reader: nothing is lost", T, async () => {
  const size = 8 * MiB;
  const sum = await blob(c, "held", "/tmp/blob", size);
  const p = await c.spawn("held", ["cat", "/tmp/blob"], { lossless: true });
  // A poll from 0 counts as having read nothing: it does not move the hold.
  await until(async () => (await c.poll("held", p.processId, { stdoutFrom: 0 })).stdoutNext > 0, 30000);
  await sleep(1000);
  const ch = await c.poll("held", p.processId, { stdoutFrom: 0 });
  assert.equal(ch.state, "running", "the writer ran to its end without a reader");
  assert.equal(ch.lossless, true);
  assert.equal(ch.stdoutDropped, 0);
  assert.ok(ch.stdoutNext <= WINDOW, `the sandbox read ${ch.stdoutNext} bytes before any reader`);
  const r = await readAll(c, "held", p.processId, { keep: 0 });
  assert.equal(r.end, "exit");
  assert.equal(r.start.stdoutDropped, 0);
  assert.equal(r.stdout.length, size);
  assert.equal(r.stdout.sha256, sum);
  await drop(c, "held");
});

test("two readers of one process get the same bytes; the slower one holds the writer", T, async () => {
  const size = 16 * MiB;
  const sum = await blob(c, "two", "/tmp/blob", size);
  const p = await c.spawn("two", gated("cat /tmp/blob"));
  const fast = startReader(c, "two", p.processId, { keep: 0 });
  const slow = startReader(c, "two", p.processId, { keep: 0, slow: { bytes: 6 * MiB, pauseMs: 10 } });
  try {
    await Promise.all([fast.started, slow.started]);
    await go(c, "two");
    const [a, b] = await Promise.all([fast.done, slow.done]);
    for (const [r, which] of [[a, "fast"], [b, "slow"]]) {
      assert.equal(r.end, "exit", which);
      assert.equal(r.start.stdoutDropped, 0, which);
      assert.equal(r.stdout.length, size, which);
      assert.equal(r.stdout.sha256, sum, which);
      assert.equal(r.exit.exitCode, 0, which);
    }
  } finally {
    fast.abort();
    slow.abort();
  }
  // A lossless process read by two, one of them throttled all along. Both
  // are attached before it writes: a reader that comes once another has
  // taken more than the retained window is told what it missed.
  await c.sh("two", "rm /tmp/go");
  const q = await c.spawn("two", gated("cat /tmp/blob"), { lossless: true });
  const one = startReader(c, "two", q.processId, { keep: 0 });
  const other = startReader(c, "two", q.processId, { keep: 0, slow: { bytes: size, pauseMs: 2 } });
  try {
    await Promise.all([one.started, other.started]);
    await go(c, "two");
    for (const r of await Promise.all([one.done, other.done])) {
      assert.equal(r.end, "exit");
      assert.equal(r.start.stdoutDropped, 0);
      assert.equal(r.stdout.length, size);
      assert.equal(r.stdout.sha256, sum);
    }
  } finally {
    one.abort();
    other.abort();
  }
  await drop(c, "two");
});

test("a reader that goes away releases the writer it held", T, async () => {
  const size = 16 * MiB;
  await blob(c, "release", "/tmp/blob", size);
  const p = await c.spawn("release", gated("cat /tmp/blob"));
  const rd = startReader(c, "release", p.processId, { slow: { bytes: 128 * KiB, pauseMs: 5 }, stallAt: 128 * KiB, keep: 0 });
  try {
    await rd.started;
    await go(c, "release");
    const read = await rd.stalled;
    const ch = await settled(c, "release", p.processId);
    assert.equal(ch.state, "running", "the writer ran past a stalled reader");
    assert.ok(ch.stdoutNext <= read + WINDOW + SLACK, `the sandbox read ${ch.stdoutNext}; the reader had ${read}`);
    rd.abort();
    const r = await rd.done;
    assert.equal(r.end, "aborted");
    const done = await waitExit(c, "release", p.processId, 30000);
    assert.equal(done.exitCode, 0);
  } finally {
    rd.abort();
  }
  await drop(c, "release");
});

test("a stalled reader in one sandbox does not slow another deployment's stream", T, async () => {
  const other = new Client(d, "dep-b", "acct-b");
  const size = 20 * MiB;
  await blob(c, "iso-a", "/tmp/blob", 32 * MiB);
  const sumB = await blob(other, "iso-b", "/tmp/blob", size);
  const p = await c.spawn("iso-a", gated("cat /tmp/blob"));
  const rd = startReader(c, "iso-a", p.processId, { slow: { bytes: 256 * KiB, pauseMs: 5 }, stallAt: 256 * KiB, keep: 0 });
  try {
    await rd.started;
    await go(c, "iso-a");
    const read = await rd.stalled;
    const held = await settled(c, "iso-a", p.processId);
    assert.equal(held.state, "running");

    const q = await other.spawn("iso-b", ["cat", "/tmp/blob"], { lossless: true });
    const r = await readAll(other, "iso-b", q.processId, { keep: 0 });
    assert.equal(r.end, "exit");
    assert.equal(r.stdout.length, size);
    assert.equal(r.stdout.sha256, sumB);

    // B's stream finished while A's writer was (and is) still held.
    const still = await c.poll("iso-a", p.processId, { stdoutFrom: held.stdoutNext });
    assert.equal(still.state, "running");
    assert.ok(still.stdoutNext <= read + WINDOW + SLACK);
  } finally {
    rd.abort();
  }
  assert.equal((await c.data("iso-a", "DELETE", `/processes/${p.processId}`)).status, 204);
  await drop(c, "iso-a");
  await drop(other, "iso-b");
});

test("stdout and stderr frames both come, each stream in order from its own offsets", T, async () => {
  const lines = 3000;
  const out = Array.from({ length: lines }, (_, i) => `out ${i}\n`).join("");
  const err = Array.from({ length: lines }, (_, i) => `err ${i} ${"e".repeat(i % 7)}\n`).join("");
  const script = `i=0; while [ $i -lt ${lines} ]; do echo "out $i"; printf 'err %d %.*s\\n' $i $((i % 7)) eeeeeee >&2;` +
    ` [ $((i % 500)) -eq 0 ] && sleep 0.05; i=$((i + 1)); done; exit 5`;
  const p = await c.spawn("both", ["/bin/sh", "-c", script], { lossless: true });
  const r = await readAll(c, "both", p.processId);
  assert.equal(r.end, "exit");
  assert.equal(r.stdout.text(), out);
  assert.equal(r.stderr.text(), err);
  assert.equal(r.exit.exitCode, 5);
  assert.equal(r.exit.stdoutNext, Buffer.byteLength(out));
  assert.equal(r.exit.stderrNext, Buffer.byteLength(err));
  const so = r.frames.filter((f) => f.type === STDOUT);
  const se = r.frames.filter((f) => f.type === STDERR);
  assert.ok(so.length > 0 && se.length > 0);
  assert.equal(so[0].offset, 0);
  assert.equal(se[0].offset, 0);
  // From the middle of both, once it has exited.
  const from = { stdout: 1000, stderr: 2345 };
  const m = await readAll(c, "both", p.processId, { stdoutFrom: from.stdout, stderrFrom: from.stderr });
  assert.equal(m.end, "exit");
  assert.equal(m.start.state, "exited");
  assert.equal(m.start.stdoutFrom, from.stdout);
  assert.equal(m.start.stderrFrom, from.stderr);
  assert.equal(m.frames.find((f) => f.type === STDOUT).offset, from.stdout);
  assert.equal(m.frames.find((f) => f.type === STDERR).offset, from.stderr);
  assert.equal(m.stdout.text(), out.slice(from.stdout));
  assert.equal(m.stderr.text(), err.slice(from.stderr));
  await drop(c, "both");
});

test("start and exit frames carry the process's status and the offsets", T, async () => {
  const p = await c.spawn("meta", ["/bin/sh", "-c", "read x; printf abc; printf de >&2; exit 3"], { stdin: true });
  const rd = startReader(c, "meta", p.processId);
  const start = await rd.started;
  assert.equal(start.processId, p.processId);
  assert.deepEqual(start.command, p.command);
  assert.equal(start.state, "running");
  assert.equal(start.startedAt, p.startedAt);
  assert.equal(start.exitCode, undefined);
  assert.deepEqual([start.stdoutFrom, start.stderrFrom, start.stdoutDropped, start.stderrDropped], [0, 0, 0, 0]);
  assert.equal((await c.data("meta", "POST", `/processes/${p.processId}/stdin?close=true`, "go\n", true)).status, 204);
  const r = await rd.done;
  assert.equal(r.end, "exit");
  assert.equal(r.stdout.text(), "abc");
  assert.equal(r.stderr.text(), "de");
  const x = r.exit;
  assert.equal(x.processId, p.processId);
  assert.equal(x.state, "exited");
  assert.equal(x.exitCode, 3);
  assert.ok(Date.parse(x.exitedAt) >= Date.parse(x.startedAt));
  assert.equal(x.stdoutNext, 3);
  assert.equal(x.stderrNext, 2);
  const polled = await c.poll("meta", p.processId);
  assert.equal(polled.exitedAt, x.exitedAt);
  // The end of both streams is a stream of no data; one past it is a 400.
  const e = await readAll(c, "meta", p.processId, { stdoutFrom: 3, stderrFrom: 2 });
  assert.equal(e.end, "exit");
  assert.equal(e.start.state, "exited");
  assert.equal(e.start.exitCode, 3);
  assert.equal(e.frames.filter((f) => f.type === STDOUT || f.type === STDERR).length, 0);
  for (const q of [{ stdoutFrom: 4 }, { stderrFrom: 3 }, { stdoutFrom: 1000000, stderrFrom: 0 }]) {
    const t = await tryStream(c, "meta", p.processId, q);
    assert.equal(t.status, 400, JSON.stringify(q));
    assert.equal(t.body.error.code, "invalid_argument");
  }
});

test("a reconnect from before the retained window reports exactly the gap as dropped", T, async () => {
  // 3 MiB with no reader and not lossless: the newest 1 MiB is kept.
  const p = await c.spawn("gap", ["/bin/sh", "-c", "head -c 3145728 /dev/zero | tr '\\0' x"]);
  await waitExit(c, "gap", p.processId);
  for (const [from, dropped] of [[0, 2 * MiB], [1536 * KiB, 512 * KiB], [2 * MiB, 0], [2560 * KiB, 0]]) {
    const r = await readAll(c, "gap", p.processId, { stdoutFrom: from });
    assert.equal(r.end, "exit");
    assert.equal(r.start.stdoutDropped, dropped, `from ${from}`);
    assert.equal(r.start.stdoutFrom, from + dropped);
    assert.equal(r.stdout.length, 3 * MiB - from - dropped);
    assert.ok(r.stdout.data.every((b) => b === 0x78));
    assert.equal(r.exit.stdoutNext, 3 * MiB);
  }
});

test("stream errors: an unknown process is a 404, offsets past the end or malformed a 400", T, async () => {
  await c.attach("err");
  let t = await tryStream(c, "err", "p-nope");
  assert.equal(t.status, 404);
  assert.equal(t.body.error.code, "process_not_found");
  const p = await c.spawn("err", ["/bin/sh", "-c", "echo hello"]);
  await waitExit(c, "err", p.processId);
  for (const query of ["stdoutFrom=7", "stderrFrom=1", "stdoutFrom=-1", "stdoutFrom=abc", "stderrFrom=1e3"]) {
    t = await tryStream(c, "err", p.processId, { query });
    assert.equal(t.status, 400, query);
    assert.equal(t.body.error.code, "invalid_argument", query);
  }
  t = await tryStream(c, "err", p.processId, { query: "stdoutFrom=6" });
  assert.equal(t.status, 200);
  assert.equal(t.stream.headers.get("content-type").split(";")[0].trim(), CONTENT_TYPE);
  // A process killed and forgotten is gone for a stream too.
  assert.equal((await c.data("err", "DELETE", `/processes/${p.processId}`)).status, 204);
  t = await tryStream(c, "err", p.processId);
  assert.equal(t.status, 404);
  assert.equal(t.body.error.code, "process_not_found");
});

test("a process killed while a reader is attached ends the stream with an error or exit frame", T, async () => {
  const p = await c.spawn("kill", ["/bin/sh", "-c", "echo hi; exec sleep 100"]);
  const rd = startReader(c, "kill", p.processId, { deadlineMs: 30000 });
  try {
    await until(() => rd.stdout.length >= 3, 30000);
    assert.equal(rd.stdout.text(), "hi\n");
    assert.equal((await c.data("kill", "DELETE", `/processes/${p.processId}`)).status, 204);
    const r = await rd.done;
    assert.ok(r.end === "error" || r.end === "exit", `the stream ended: ${r.end}`);
    if (r.end === "exit") assert.equal(r.exit.stdoutNext, 3);
  } finally {
    rd.abort();
  }
});

test("a sandbox deleted while a reader is attached ends the stream, it never hangs", T, async () => {
  const p = await c.spawn("gone", ["/bin/sh", "-c", "echo hi; exec sleep 100"]);
  const rd = startReader(c, "gone", p.processId, { deadlineMs: 30000 });
  try {
    await until(() => rd.stdout.length >= 3, 30000);
    await drop(c, "gone");
    const r = await rd.done;
    // Said, not cut: a reconnect would only find no sandbox.
    assert.equal(r.end, "error", `the stream ended: ${r.end}`);
    assert.equal(r.error.error.code, "sandbox_not_found");
  } finally {
    rd.abort();
  }
});

test("an open stream keeps its sandbox from being suspended for idleness", T, async () => {
  const dd = await new Daemon({ args: ["--idle-timeout", "1s"] }).start();
  try {
    const cc = new Client(dd);
    const p = await cc.spawn("idle", ["/bin/sh", "-c", `sleep ${GVISOR ? 6 : 4}; echo late`]);
    const rd = startReader(cc, "idle", p.processId, { deadlineMs: 60000 });
    const state = async () => (await cc.control("GET", "/v1/sandboxes/idle")).body.state;
    try {
      await rd.started;
      await sleep(3000);
      assert.equal(await state(), "running");
      const r = await rd.done;
      assert.equal(r.end, "exit");
      assert.equal(r.stdout.text(), "late\n");
    } finally {
      rd.abort();
    }
    // Without one it is suspended (so the check above could fail).
    await until(async () => (await state()) === "suspended", 30000);
  } finally {
    await dd.destroy();
  }
});
