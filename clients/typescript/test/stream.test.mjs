// Process streams against a real sandboxd: run and execCombined without a
// cap, stream() under a slow consumer and with two readers, toReadable,
// run's timeout and abort.

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { pipeline } from "node:stream/promises";
import { after, before, describe, it } from "node:test";
import { ProcessStream, SandboxClient, SandboxRequestError } from "@sandboxd/client";
import { CLASS, skipReason, sleep, startDaemon, uniqueName } from "./harness.mjs";

const MiB = 1024 * 1024;
const sha256 = (bytes) => createHash("sha256").update(bytes).digest("hex");
/** The hash `sha256sum FILE` prints inside the sandbox. */
async function sandboxSha(sandboxes, name, path) {
  const r = await sandboxes.exec(name, { command: ["sha256sum", path] });
  assert.equal(r.exitCode, 0, r.stderr);
  return r.stdout.split(/\s+/)[0];
}
/**
 * Every chunk of a stream, its bytes joined per stream. For its first
 * `slowBytes` the consumer is slow: it waits `pauseMs` after each chunk, and
 * longer for a big one, reading at most about 4 MiB/s.
 */
async function drain(stream, { slowBytes = 0, pauseMs = 0 } = {}) {
  const parts = { stdout: [], stderr: [] };
  let seen = 0;
  let expected = { stdout: stream.stdoutNext, stderr: stream.stderrNext };
  for await (const chunk of stream) {
    // Offsets without gaps or overlaps, and the stream's next offset after each.
    assert.equal(chunk.offset, expected[chunk.stream], `${chunk.stream} offset`);
    expected[chunk.stream] = chunk.offset + chunk.data.length;
    assert.equal(stream[`${chunk.stream}Next`], expected[chunk.stream]);
    parts[chunk.stream].push(Buffer.from(chunk.data));
    seen += chunk.data.length;
    if (seen < slowBytes) await sleep(Math.max(pauseMs, chunk.data.length / (4 * 1024)));
  }
  return { stdout: Buffer.concat(parts.stdout), stderr: Buffer.concat(parts.stderr) };
}

describe(`process streams (${CLASS})`, { skip: skipReason("tiny") }, () => {
  let daemon;
  let sandboxes;
  const name = uniqueName("stream");
  const gone = async (id) => !(await sandboxes.processes(name)).some((p) => p.processId === id);

  before(async () => {
    daemon = await startDaemon({ image: "tiny" });
    sandboxes = new SandboxClient({ identityToken: await daemon.token() });
    await sandboxes.exec(name, { command: ["true"] });
  });
  after(async () => {
    await sandboxes?.delete(name).catch(() => {});
    await daemon?.stop();
  });

  it("run: 50 MiB written at once arrive whole, nothing dropped", { timeout: 120_000 }, async () => {
    // base64 text (UTF-8 round trips it exactly); the hash on stderr after it.
    const result = await sandboxes.run(name, {
      command: [
        "/bin/sh",
        "-c",
        "head -c 37500000 /dev/urandom | base64 > /tmp/big && cat /tmp/big && sha256sum /tmp/big >&2 && rm /tmp/big",
      ],
    });
    assert.equal(result.exitCode, 0, result.stderr);
    assert.equal(result.state, "exited");
    assert.equal(result.killed, false);
    assert.equal(result.lossless, true, "run spawns lossless");
    const bytes = Buffer.from(result.stdout, "utf8");
    assert.ok(bytes.length > 50_000_000, `${bytes.length} bytes`);
    assert.equal(result.stdoutNext, bytes.length);
    assert.equal(result.stdoutDropped, 0);
    assert.equal(result.stderrDropped, 0);
    assert.equal(sha256(bytes), result.stderr.split(/\s+/)[0]);
    assert.ok(await gone(result.processId), "run reaps its process");
  });

  it("stream: a slow consumer gets every byte exactly, then a fast one", { timeout: 60_000 }, async () => {
    const proc = await sandboxes.spawn(name, {
      command: ["/bin/sh", "-c", "head -c 8000000 /dev/urandom > /tmp/slow && cat /tmp/slow && echo done >&2"],
      lossless: true,
    });
    assert.equal(proc.lossless, true);
    const stream = sandboxes.stream(name, proc.processId);
    assert.ok(stream instanceof ProcessStream);
    // A few ms between chunks for the first 3 MiB: the process waits (backpressure), nothing is lost.
    const got = await drain(stream, { slowBytes: 3 * MiB, pauseMs: 4 });
    const exit = await stream.exit;
    assert.equal(exit.state, "exited");
    assert.equal(exit.exitCode, 0);
    assert.equal(exit.stdoutNext, 8_000_000);
    assert.equal(exit.stderrNext, 5);
    assert.equal(got.stderr.toString(), "done\n");
    assert.equal(stream.start.stdoutDropped, 0);
    assert.equal(stream.start.stdoutFrom, 0);
    const file = await sandboxes.readFileBytes(name, "/tmp/slow");
    assert.equal(got.stdout.length, file.length);
    assert.ok(got.stdout.equals(Buffer.from(file)), "the streamed bytes are the file's");
    await sandboxes.kill(name, proc.processId);
  });

  it("stream: two readers of one lossless process get identical bytes", { timeout: 60_000 }, async () => {
    const proc = await sandboxes.spawn(name, {
      command: ["/bin/sh", "-c", "head -c 6000000 /dev/urandom | tee /tmp/two"],
      lossless: true,
    });
    const [a, b] = await Promise.all([
      drain(sandboxes.stream(name, proc.processId)),
      drain(sandboxes.stream(name, proc.processId), { slowBytes: MiB, pauseMs: 3 }),
    ]);
    assert.equal(a.stdout.length, 6_000_000);
    assert.ok(a.stdout.equals(b.stdout), "both readers got the same bytes");
    assert.equal(sha256(a.stdout), await sandboxSha(sandboxes, name, "/tmp/two"));
    await sandboxes.kill(name, proc.processId);
  });

  it("stream: a lossless process read late loses nothing (it waited for its reader)", { timeout: 30_000 }, async () => {
    const proc = await sandboxes.spawn(name, {
      command: ["/bin/sh", "-c", "head -c 3000000 /dev/urandom | tee /tmp/late"],
      lossless: true,
    });
    await sleep(1_500);
    // 3 MB cannot fit in what a lossless process may get ahead: it is still writing.
    assert.equal((await sandboxes.processes(name)).find((p) => p.processId === proc.processId)?.state, "running");
    const stream = sandboxes.stream(name, proc.processId);
    const got = await drain(stream);
    assert.equal(stream.start.stdoutDropped, 0);
    assert.equal(got.stdout.length, 3_000_000);
    assert.equal(sha256(got.stdout), await sandboxSha(sandboxes, name, "/tmp/late"));
    await sandboxes.kill(name, proc.processId);
  });

  it("stream: a process killed under its reader ends it with 404 process_not_found", { timeout: 30_000 }, async () => {
    const proc = await sandboxes.spawn(name, { command: ["/bin/sh", "-c", "echo a; sleep 30"] });
    const stream = sandboxes.stream(name, proc.processId);
    const seen = [];
    const e = await (async () => {
      for await (const c of stream) {
        seen.push(Buffer.from(c.data).toString());
        await sandboxes.kill(name, proc.processId);
      }
    })().catch((x) => x);
    assert.deepEqual(seen, ["a\n"]);
    assert.ok(e instanceof SandboxRequestError, String(e));
    assert.equal(e.status, 404);
    assert.equal(e.code, "process_not_found");
    await assert.rejects(stream.exit, (x) => x === e);
  });

  it("toReadable and readable() pipe a stream's bytes into a hash", { timeout: 60_000 }, async () => {
    const proc = await sandboxes.spawn(name, {
      command: ["/bin/sh", "-c", "head -c 5000000 /dev/urandom | tee /tmp/rd; echo noise >&2"],
      lossless: true,
    });
    const hash = createHash("sha256");
    const stream = sandboxes.stream(name, proc.processId);
    await pipeline(stream.toReadable(), hash);
    const want = await sandboxSha(sandboxes, name, "/tmp/rd");
    assert.equal(hash.digest("hex"), want);
    assert.equal((await stream.exit).stdoutNext, 5_000_000);
    // The exited process is read again from an offset (inside what it
    // still holds), through readable().
    const rest = createHash("sha256");
    await pipeline(sandboxes.readable(name, proc.processId, { from: 4_000_000 }), rest);
    const tail = await sandboxes.exec(name, { command: ["/bin/sh", "-c", "tail -c +4000001 /tmp/rd | sha256sum"] });
    assert.equal(rest.digest("hex"), tail.stdout.split(/\s+/)[0]);
    const err = [];
    await pipeline(sandboxes.readable(name, proc.processId, { stream: "stderr" }), async function* (src) {
      for await (const c of src) err.push(c);
    });
    assert.equal(Buffer.concat(err).toString(), "noise\n");
    await sandboxes.kill(name, proc.processId);
  });

  it("stream of an exited process from an offset; past the end is 400, unknown id 404", { timeout: 30_000 }, async () => {
    const proc = await sandboxes.spawn(name, { command: ["/bin/sh", "-c", "printf 0123456789; printf ab >&2"] });
    const first = sandboxes.stream(name, proc.processId);
    await drain(first);
    await first.exit;
    const got = await drain(sandboxes.stream(name, proc.processId, { stdoutFrom: 4, stderrFrom: 1 }));
    assert.equal(got.stdout.toString(), "456789");
    assert.equal(got.stderr.toString(), "b");
    const past = await drain(sandboxes.stream(name, proc.processId, { stdoutFrom: 11 })).catch((e) => e);
    assert.ok(past instanceof SandboxRequestError, String(past));
    assert.equal(past.status, 400);
    await sandboxes.kill(name, proc.processId);
    const unknown = await drain(sandboxes.stream(name, proc.processId)).catch((e) => e);
    assert.ok(unknown instanceof SandboxRequestError, String(unknown));
    assert.equal(unknown.status, 404);
    assert.equal(unknown.code, "process_not_found");
  });

  it("execCombined: more than 1 MiB, stdout and stderr interleaved, all of it", { timeout: 60_000 }, async () => {
    const N = 4000;
    const r = await sandboxes.execCombined(
      name,
      `pad=$(head -c 300 /dev/zero | tr '\\0' x); i=0; while [ $i -lt ${N} ]; do echo "out $i $pad"; echo "err $i" >&2; i=$((i+1)); done`,
    );
    assert.equal(r.exitCode, 0);
    assert.equal(r.truncated, false);
    assert.ok(r.output.length > 1.1 * MiB, `${r.output.length} chars`);
    const pad = "x".repeat(300);
    const want = [];
    for (let i = 0; i < N; i++) want.push(`out ${i} ${pad}`, `err ${i}`);
    assert.equal(r.output, `${want.join("\n")}\n`);
  });

  it("run with timeoutMs kills a sleep: killed and timedOut, output kept, reaped", { timeout: 30_000 }, async () => {
    const t0 = Date.now();
    const chunks = [];
    const r = await sandboxes.run(
      name,
      { command: ["/bin/sh", "-c", "echo started; sleep 30; echo never"] },
      { timeoutMs: 1_500, onOutput: (c) => chunks.push(c) },
    );
    const took = Date.now() - t0;
    assert.equal(r.timedOut, true);
    assert.equal(r.killed, true);
    assert.equal(r.stdout, "started\n");
    assert.equal(r.state, "exited");
    assert.equal(r.exitCode, 128 + 9, "killed by KILL");
    assert.ok(took >= 1_400 && took < 10_000, `took ${took} ms`);
    assert.deepEqual(chunks.map((c) => [c.stdout, c.stdoutNext, c.stdoutDropped]), [["started\n", 8, 0]]);
    assert.ok(await gone(r.processId));
  });

  it("run aborted by its signal: killed, not timedOut; an aborted signal starts nothing", { timeout: 30_000 }, async () => {
    const ac = new AbortController();
    const t0 = Date.now();
    const r = await sandboxes.run(
      name,
      { command: ["/bin/sh", "-c", "echo started; sleep 30"] },
      {
        signal: ac.signal,
        timeoutMs: 60_000,
        onOutput: () => setTimeout(() => ac.abort(), 300),
      },
    );
    assert.equal(r.killed, true);
    assert.equal(r.timedOut, false);
    assert.equal(r.stdout, "started\n");
    assert.ok(Date.now() - t0 < 10_000);
    assert.ok(await gone(r.processId));

    const before = (await sandboxes.processes(name)).length;
    await assert.rejects(
      sandboxes.run(name, { command: ["touch", "/workspace/never"] }, { signal: AbortSignal.abort() }),
      (e) => e.name === "AbortError",
    );
    assert.equal((await sandboxes.processes(name)).length, before);
  });

  it("stream: an aborted signal ends the iterator with its reason", { timeout: 30_000 }, async () => {
    const proc = await sandboxes.spawn(name, { command: ["/bin/sh", "-c", "echo hi; sleep 30"] });
    const ac = new AbortController();
    const why = new Error("caller gave up");
    const stream = sandboxes.stream(name, proc.processId, { signal: ac.signal });
    const seen = [];
    const t0 = Date.now();
    const e = await (async () => {
      for await (const c of stream) {
        seen.push(Buffer.from(c.data).toString());
        setTimeout(() => ac.abort(why), 100);
      }
    })().catch((x) => x);
    assert.equal(e, why);
    assert.deepEqual(seen, ["hi\n"]);
    assert.ok(Date.now() - t0 < 5_000);
    await assert.rejects(stream.exit, (x) => x === why);
    await sandboxes.kill(name, proc.processId);
  });
});
