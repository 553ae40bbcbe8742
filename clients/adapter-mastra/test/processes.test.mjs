// Background processes through sandbox.processes: wait, kill, stdin,
// list, and get(pid) from another adapter instance (a reconnect).

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { UnsupportedStdinCloseError } from "@mastra/core/workspace";
import { SandboxClient } from "@sandboxd/client";
import { SandboxdProcessHandle, SandboxdSandbox } from "@sandboxd/adapter-mastra";
import { skipReason, sleep, startDaemon, uniqueName, until } from "./helpers.mjs";

describe("background processes", { skip: skipReason("tiny"), timeout: 120_000 }, () => {
  let daemon;
  let token;
  let sandbox;
  let other;

  before(async () => {
    daemon = await startDaemon({ image: "tiny" });
    token = await daemon.token();
    sandbox = new SandboxdSandbox({ name: uniqueName("procs"), identityToken: token });
    other = new SandboxClient({ identityToken: token });
    await sandbox.start();
  });
  after(async () => {
    await sandbox?.destroy().catch(() => {});
    await daemon?.stop();
  });

  it("spawn returns at once; wait returns the whole result", async () => {
    const h = await sandbox.processes.spawn("echo out; sleep 1; echo err >&2; exit 4");
    assert.ok(h instanceof SandboxdProcessHandle);
    assert.match(h.pid, /^[A-Za-z0-9-]+$/);
    assert.equal(h.command, "echo out; sleep 1; echo err >&2; exit 4");
    // Not exited yet: spawn did not wait for the process.
    assert.equal(h.exitCode, undefined);
    const r = await h.wait();
    assert.equal(r.exitCode, 4);
    assert.equal(r.success, false);
    assert.equal(r.stdout, "out\n");
    assert.equal(r.stderr, "err\n");
    assert.ok(r.executionTimeMs >= 900, `${r.executionTimeMs} ms`);
    assert.equal(h.exitCode, 4);
    assert.equal(h.stdout, "out\n");
    // Waiting again answers from what was read.
    assert.deepEqual((await h.wait()).exitCode, 4);
  });

  it("streams to spawn-time callbacks without anyone waiting", async () => {
    const seen = [];
    const h = await sandbox.processes.spawn("for i in 1 2 3; do echo line $i; sleep 0.3; done", {
      onStdout: (d) => seen.push(d),
    });
    await until(() => seen.join("").includes("line 3"), 10_000, "all lines");
    assert.equal(seen.join(""), "line 1\nline 2\nline 3\n");
    assert.ok(seen.length >= 2, "in several chunks, as written");
    await until(() => h.exitCode === 0, 5000, "the exit");
  });

  it("kill is true for a running process, then false once it has exited", async () => {
    const h = await sandbox.processes.spawn("echo up; sleep 60");
    await until(async () => (await sandbox.processes.get(h.pid)).stdout === "up\n", 5000, "output");
    assert.equal(await h.kill(), true);
    const r = await h.wait();
    assert.equal(r.killed, true);
    assert.equal(r.exitCode, 137);
    assert.equal(r.stdout, "up\n");
    assert.equal(await h.kill(), false);

    const done = await sandbox.processes.spawn("true");
    await done.wait();
    assert.equal(await done.kill(), false);

    // Through the manager too: it kills, waits and forgets.
    const m = await sandbox.processes.spawn("sleep 60");
    assert.equal(await sandbox.processes.kill(m.pid), true);
    assert.equal(await sandbox.processes.kill(m.pid), false);
    assert.equal(await sandbox.processes.get(m.pid), undefined);
    await until(async () => !(await other.processes(sandbox.name)).some((p) => p.processId === m.pid), 5000, "the reap");
  });

  it("sendStdin writes the process's stdin; closeStdin ends it", async () => {
    const h = await sandbox.processes.spawn("while read line; do echo got:$line; done; echo eof");
    await h.sendStdin("one\n");
    await h.sendStdin("two\nthree\n");
    await until(async () => (await sandbox.processes.get(h.pid)).stdout.includes("got:three"), 5000, "echoes");
    await h.closeStdin();
    const r = await h.wait();
    assert.equal(r.stdout, "got:one\ngot:two\ngot:three\neof\n");
    assert.equal(r.exitCode, 0);
    await assert.rejects(h.sendStdin("late\n"), /already exited/);
  });

  it("stdin as a Node stream (the base class's writer) and many writes in order", async () => {
    const h = await sandbox.processes.spawn("cat");
    const writes = [];
    for (let i = 0; i < 20; i++) writes.push(h.sendStdin(`${i}\n`));
    await Promise.all(writes);
    await new Promise((resolve, reject) => h.writer.end("end\n", (err) => (err ? reject(err) : resolve())));
    const r = await h.wait();
    assert.equal(r.stdout, `${Array.from({ length: 20 }, (_, i) => `${i}\n`).join("")}end\n`);
  });

  it("a process spawned with stdinMode 'ignore' has no stdin", async () => {
    const h = await sandbox.processes.spawn("cat; echo done", { stdinMode: "ignore" });
    await assert.rejects(h.sendStdin("x"), /no stdin/);
    await assert.rejects(h.closeStdin(), /no stdin/);
    assert.equal((await h.wait()).stdout, "done\n");
    assert.ok(!(UnsupportedStdinCloseError.prototype instanceof SandboxdProcessHandle));
  });

  it("list shows the sandbox's processes, running or exited", async () => {
    const running = await sandbox.processes.spawn("sleep 60");
    const exited = await sandbox.processes.spawn("exit 2");
    await exited.wait();
    const rows = await sandbox.processes.list();
    const r = rows.find((p) => p.pid === running.pid);
    const e = rows.find((p) => p.pid === exited.pid);
    assert.deepEqual(r, { pid: running.pid, command: "sleep 60", running: true });
    assert.deepEqual(e, { pid: exited.pid, command: "exit 2", running: false, exitCode: 2 });
    await running.kill();
  });

  it("get(pid) on another adapter instance finds a process after a reconnect", async () => {
    const h = await sandbox.processes.spawn("echo before; read x; echo after:$x; exit 9");
    await until(async () => (await sandbox.processes.get(h.pid)).stdout === "before\n", 5000, "output");

    // A new adapter on the same name (the agent process restarted, say).
    const again = new SandboxdSandbox({ name: sandbox.name, identityToken: token });
    const rows = await again.processes.list();
    assert.ok(rows.some((p) => p.pid === h.pid && p.running && p.command === "echo before; read x; echo after:$x; exit 9"));
    const found = await again.processes.get(h.pid);
    assert.ok(found instanceof SandboxdProcessHandle);
    assert.equal(found.pid, h.pid);
    assert.equal(found.exitCode, undefined);
    assert.equal(found.stdout, "before\n", "the output so far, read from the start");
    assert.equal(found.command, "echo before; read x; echo after:$x; exit 9");
    await found.sendStdin("hello\n");
    const r = await found.wait();
    assert.equal(r.exitCode, 9);
    assert.equal(r.stdout, "before\nafter:hello\n");
    // Read once after its exit, then Mastra's manager dismisses it.
    assert.equal((await again.processes.get(h.pid)).exitCode, 9);
    assert.equal(await again.processes.get(h.pid), undefined);

    // An exited process found on a reconnect, and an unknown pid.
    const fresh = new SandboxdSandbox({ name: sandbox.name, identityToken: token });
    const ended = await fresh.processes.get(h.pid);
    assert.equal(ended.exitCode, 9);
    assert.equal(ended.stdout, "before\nafter:hello\n");
    assert.equal(await fresh.processes.get("p999-0000000000000000"), undefined);
    assert.equal(await fresh.processes.get("../x"), undefined);
  });

  it("a kill from a reconnected instance stops the process", async () => {
    const h = await sandbox.processes.spawn("sleep 60");
    const again = new SandboxdSandbox({ name: sandbox.name, identityToken: token });
    assert.equal(await again.processes.kill(h.pid), true);
    const r = await h.wait();
    assert.equal(r.exitCode, 137, "the spawner still reads the exit: an adopted process is not reaped");
    // The spawner's own kill + release reaps it.
    assert.equal(await sandbox.processes.kill(h.pid), false);
    sandbox.processes.release(h.pid);
    await until(async () => !(await other.processes(sandbox.name)).some((p) => p.processId === h.pid), 5000, "the reap");
  });

  it("a timeout kills a background process", async () => {
    const h = await sandbox.processes.spawn("sleep 60", { timeout: 500 });
    const r = await h.wait();
    assert.equal(r.timedOut, true);
    assert.equal(r.exitCode, 124);
  });

  it("wait's abort signal kills the process", async () => {
    const h = await sandbox.processes.spawn("sleep 60");
    const r = await h.wait({ abortSignal: AbortSignal.timeout(300) });
    assert.equal(r.killed, true);
    assert.equal(r.exitCode, 137);
  });

  it("a process whose sandbox was deleted ends as lost instead of hanging", async () => {
    const name = uniqueName("lost");
    const sb = new SandboxdSandbox({ name, identityToken: token });
    const h = await sb.processes.spawn("sleep 60");
    const waiting = h.wait();
    await sleep(200);
    await other.delete(name);
    const r = await waiting;
    assert.equal(r.exitCode, -1);
    assert.equal(h.lost, true);
    assert.match(r.stderr, /is gone/);
    assert.equal(await h.kill(), false);
    await sb.destroy();
  });
});
