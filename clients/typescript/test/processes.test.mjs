// run, spawn/poll, signals and stdin.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { SandboxClient, SandboxRequestError } from "@sandboxd/client";
import { countingFetch, skipReason, startDaemon, uniqueName } from "./harness.mjs";

describe("processes", { skip: skipReason("tiny") }, () => {
  let daemon;
  let sandboxes;
  let counts;
  const name = uniqueName("procs");

  before(async () => {
    daemon = await startDaemon({ image: "tiny" });
    const counting = countingFetch();
    counts = counting.counts;
    sandboxes = new SandboxClient({ identityToken: await daemon.token(), fetchImpl: counting.fetch });
  });
  after(async () => {
    await sandboxes?.delete(name).catch(() => {});
    await daemon?.stop();
  });

  it("run streams output through onOutput and returns all of it", async () => {
    const chunks = [];
    const result = await sandboxes.run(
      name,
      { command: ["/bin/sh", "-c", "for i in 1 2 3 4; do echo out $i; echo err $i >&2; sleep 0.4; done; exit 7"] },
      { onOutput: (chunk) => chunks.push(chunk) },
    );
    assert.equal(result.state, "exited");
    assert.equal(result.exitCode, 7);
    assert.equal(result.killed, false);
    assert.equal(result.timedOut, false);
    assert.equal(result.stdout, "out 1\nout 2\nout 3\nout 4\n");
    assert.equal(result.stderr, "err 1\nerr 2\nerr 3\nerr 4\n");
    assert.equal(result.stdoutNext, 24);
    assert.equal(result.stderrNext, 24);
    assert.equal(result.stdoutDropped, 0);
    assert.ok(result.exitedAt);
    // Long polls hand output over as it is written: several chunks, each non-empty.
    assert.ok(chunks.length >= 2, `${chunks.length} chunks`);
    assert.ok(chunks.every((c) => c.stdout !== "" || c.stderr !== ""));
    assert.equal(chunks.map((c) => c.stdout).join(""), result.stdout);
    // run reaps its process.
    assert.ok(!(await sandboxes.processes(name)).some((p) => p.processId === result.processId));
  });

  it("run does not busy-poll a quiet process (long polls)", async () => {
    const before = counts.data;
    const result = await sandboxes.run(name, { command: ["sleep", "3"] }, { intervalMs: 100 });
    assert.equal(result.exitCode, 0);
    // spawn + a few polls + reap; a 100 ms poll loop would be ~30.
    assert.ok(counts.data - before <= 8, `${counts.data - before} requests`);
  });

  it("run has no output cap: 3 MB arrive whole, or are counted as dropped", async () => {
    const result = await sandboxes.run(name, {
      command: ["/bin/sh", "-c", "head -c 3000000 /dev/zero | tr '\\0' b"],
    });
    assert.equal(result.exitCode, 0);
    assert.equal(result.stdoutNext, 3_000_000);
    assert.equal(result.stdout.length + result.stdoutDropped, 3_000_000);
    assert.ok(/^b*$/.test(result.stdout));
  });

  it("run with timeoutMs kills the process and reports timedOut and killed", async () => {
    const started = Date.now();
    const result = await sandboxes.run(
      name,
      { command: ["/bin/sh", "-c", "echo started; sleep 30; echo never"] },
      { timeoutMs: 1_500, intervalMs: 200 },
    );
    const took = Date.now() - started;
    assert.equal(result.timedOut, true);
    assert.equal(result.killed, true);
    assert.equal(result.stdout, "started\n");
    assert.ok(took >= 1_400 && took < 10_000, `took ${took} ms`);
    assert.ok(!(await sandboxes.processes(name)).some((p) => p.processId === result.processId));
  });

  it("run with a signal aborted mid-run kills it: killed, not timedOut", async () => {
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 1_000);
    const started = Date.now();
    const result = await sandboxes.run(
      name,
      { command: ["/bin/sh", "-c", "echo started; sleep 30"] },
      { signal: controller.signal, timeoutMs: 60_000 },
    );
    const took = Date.now() - started;
    assert.equal(result.killed, true);
    assert.equal(result.timedOut, false);
    assert.equal(result.stdout, "started\n");
    assert.ok(took < 10_000, `took ${took} ms`);
    assert.ok(!(await sandboxes.processes(name)).some((p) => p.processId === result.processId));
  });

  it("run with an already aborted signal starts nothing and rejects", async () => {
    const before = (await sandboxes.processes(name)).length;
    const spawnsBefore = counts.data;
    await assert.rejects(
      sandboxes.run(name, { command: ["touch", "/workspace/should-not-exist"] }, { signal: AbortSignal.abort() }),
      (e) => e.name === "AbortError",
    );
    assert.equal(counts.data, spawnsBefore);
    assert.equal((await sandboxes.processes(name)).length, before);
  });

  it("spawn + poll with waitMs, and signal defaults to TERM on the group", async () => {
    const proc = await sandboxes.spawn(name, { command: ["/bin/sh", "-c", "sleep 100 & sleep 100; wait"] });
    assert.equal(proc.state, "running");
    assert.equal(proc.exitCode, undefined);
    const t0 = Date.now();
    const quiet = await sandboxes.poll(name, proc.processId, { waitMs: 600 });
    assert.ok(Date.now() - t0 >= 500, "waitMs should hold the poll");
    assert.equal(quiet.state, "running");
    await sandboxes.signal(name, proc.processId);
    let last;
    for (let i = 0; i < 20; i++) {
      last = await sandboxes.poll(name, proc.processId, { waitMs: 1_000 });
      if (last.state === "exited") break;
    }
    assert.equal(last.state, "exited");
    assert.equal(last.exitCode, 128 + 15);
    await sandboxes.kill(name, proc.processId);
    await assert.rejects(sandboxes.poll(name, proc.processId), (e) => e instanceof SandboxRequestError && e.status === 404);
  });

  it("stdin round trip through cat", async () => {
    const proc = await sandboxes.spawn(name, { command: ["cat"], stdin: true });
    await sandboxes.stdin(name, proc.processId, "hello\n");
    await sandboxes.stdin(name, proc.processId, new Uint8Array([0xc3, 0xa9, 0x0a]), { close: true });
    let out = "";
    let from = 0;
    let chunk;
    for (let i = 0; i < 20; i++) {
      chunk = await sandboxes.poll(name, proc.processId, { stdoutFrom: from, waitMs: 1_000 });
      out += chunk.stdout;
      from = chunk.stdoutNext;
      if (chunk.state === "exited") break;
    }
    assert.equal(chunk.state, "exited");
    assert.equal(chunk.exitCode, 0);
    assert.equal(out, "hello\né\n");
    await sandboxes.kill(name, proc.processId);

    const closed = await sandboxes.spawn(name, { command: ["sleep", "5"] });
    const err = await sandboxes.stdin(name, closed.processId, "x").catch((e) => e);
    assert.ok(err instanceof SandboxRequestError, String(err));
    assert.equal(err.status, 409);
    await sandboxes.kill(name, closed.processId);
  });

  it("a stdin write the process does not take in time: 408 with the bytes written", async () => {
    const proc = await sandboxes.spawn(name, { command: ["sleep", "60"], stdin: true });
    const data = new Uint8Array(1 << 20).fill(0x61);
    const err = await sandboxes.stdin(name, proc.processId, data).catch((e) => e);
    assert.ok(err instanceof SandboxRequestError, String(err));
    assert.equal(err.status, 408);
    assert.equal(err.code, "timeout");
    assert.ok(Number.isInteger(err.written) && err.written < data.length, `written ${err.written}`);
    await sandboxes.kill(name, proc.processId);
  });

  it("a command that cannot start is a result, not an exception", async () => {
    const r = await sandboxes.exec(name, { command: ["/no/such/binary"] });
    assert.notEqual(r.exitCode, 0);
    const run = await sandboxes.run(name, { command: ["/bin/sh", "-c", "exit 3"] });
    assert.equal(run.exitCode, 3);
  });
});
