// executeCommand: cwd, env and the sandbox's env overlay, timeout, abort,
// output streamed as it is written, quoting of args.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { SandboxClient } from "@sandboxd/client";
import { SandboxdSandbox } from "@sandboxd/adapter-mastra";
import { countingFetch, skipReason, startDaemon, uniqueName } from "./helpers.mjs";

describe("executeCommand", { skip: skipReason("tiny"), timeout: 120_000 }, () => {
  let daemon;
  let token;
  let sandbox;
  let counts;
  let other;

  before(async () => {
    daemon = await startDaemon({ image: "tiny" });
    token = await daemon.token();
    const counting = countingFetch();
    counts = counting.counts;
    sandbox = new SandboxdSandbox({
      name: uniqueName("cmd"),
      identityToken: token,
      fetchImpl: counting.fetch,
      env: { OVERLAY: "sandbox", SHARED: "from-sandbox" },
    });
    other = new SandboxClient({ identityToken: token });
    await sandbox.start();
  });
  after(async () => {
    await sandbox?.destroy().catch(() => {});
    await daemon?.stop();
  });

  it("runs a shell line in /workspace and reports stdout, stderr and the exit code", async () => {
    const r = await sandbox.executeCommand("pwd; echo to-err >&2; exit 5");
    assert.equal(r.exitCode, 5);
    assert.equal(r.success, false);
    assert.equal(r.stdout, "/workspace\n");
    assert.equal(r.stderr, "to-err\n");
    assert.equal(r.timedOut, false);
    assert.equal(r.killed, false);
    assert.equal(r.command, "pwd; echo to-err >&2; exit 5");
    assert.ok(r.executionTimeMs >= 0);
  });

  it("quotes args as the shell would", async () => {
    const r = await sandbox.executeCommand("printf", ["[%s]", "a b", "it's", "$HOME", "*"]);
    assert.equal(r.stdout, "[a b][it's][$HOME][*]");
    assert.equal(r.exitCode, 0);
  });

  it("honours cwd, absolute or relative to the working directory", async () => {
    await other.writeFile(sandbox.name, "/workspace/sub/dir/x", "");
    assert.equal((await sandbox.executeCommand("pwd", [], { cwd: "/tmp" })).stdout, "/tmp\n");
    assert.equal((await sandbox.executeCommand("pwd", [], { cwd: "sub/dir" })).stdout, "/workspace/sub/dir\n");
    const wd = new SandboxdSandbox({ name: sandbox.name, client: sandbox.client, workingDirectory: "/workspace/sub" });
    assert.equal((await wd.executeCommand("pwd")).stdout, "/workspace/sub\n");
    assert.equal((await wd.executeCommand("pwd", [], { cwd: "dir" })).stdout, "/workspace/sub/dir\n");
  });

  it("applies the sandbox's env overlay to every command, the command's env over it", async () => {
    const r = await sandbox.executeCommand('echo "$OVERLAY $SHARED $OWN"', [], { env: { SHARED: "from-command", OWN: "own" } });
    assert.equal(r.stdout, "sandbox from-command own\n");
    sandbox.setEnv((env) => ({ ...env, LATER: "set later", OVERLAY: undefined }));
    const r2 = await sandbox.executeCommand('echo "[$OVERLAY] $LATER"');
    assert.equal(r2.stdout, "[] set later\n");
    // Background processes get it too.
    const h = await sandbox.processes.spawn('echo "$LATER"');
    assert.equal((await h.wait()).stdout, "set later\n");
    sandbox.setEnv((env) => ({ ...env, OVERLAY: "sandbox", LATER: undefined }));
  });

  it("streams stdout and stderr to the callbacks as the output is written", async () => {
    const t0 = Date.now();
    const events = [];
    const r = await sandbox.executeCommand("echo first; sleep 1.5; echo second >&2; sleep 1; echo third", [], {
      onStdout: (d) => events.push({ at: Date.now() - t0, out: d }),
      onStderr: (d) => events.push({ at: Date.now() - t0, err: d }),
    });
    const total = Date.now() - t0;
    assert.equal(r.stdout, "first\nthird\n");
    assert.equal(r.stderr, "second\n");
    assert.ok(total >= 2500, `took ${total} ms`);
    const first = events.find((e) => e.out === "first\n");
    const second = events.find((e) => e.err === "second\n");
    assert.ok(first && first.at < 1000, `first arrived at ${first?.at} ms, before the command went on`);
    assert.ok(second && second.at >= 1400 && second.at < 2400, `second arrived at ${second?.at} ms`);
    assert.equal(events.map((e) => e.out ?? "").join(""), r.stdout);
  });

  it("does not busy-poll a quiet command (long polls)", async () => {
    const before = counts.data;
    const r = await sandbox.executeCommand("sleep 3");
    assert.equal(r.exitCode, 0);
    // spawn, one or two long polls, the closing poll, the reap; a 100 ms loop would be ~30.
    assert.ok(counts.data - before <= 7, `${counts.data - before} requests`);
  });

  it("kills the command at its timeout", async () => {
    const t0 = Date.now();
    const r = await sandbox.executeCommand("echo begun; sleep 30; echo never", [], { timeout: 700 });
    const took = Date.now() - t0;
    assert.ok(took < 5000, `took ${took} ms`);
    assert.equal(r.timedOut, true);
    assert.equal(r.killed, true);
    assert.equal(r.exitCode, 124);
    assert.equal(r.success, false);
    assert.equal(r.stdout, "begun\n");
    assert.match(r.stderr, /timed out after 700ms/);
    // The whole group was killed: nothing of it runs on.
    const ps = await sandbox.executeCommand("ps");
    assert.doesNotMatch(ps.stdout, /sleep 30/);
  });

  it("is killed when its abort signal fires", async () => {
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 500);
    const t0 = Date.now();
    const r = await sandbox.executeCommand("echo begun; sleep 30", [], { abortSignal: controller.signal });
    assert.ok(Date.now() - t0 < 5000);
    assert.equal(r.killed, true);
    assert.equal(r.timedOut, false);
    assert.equal(r.exitCode, 137);
    assert.equal(r.stdout, "begun\n");
    // An already aborted signal starts nothing.
    await assert.rejects(sandbox.executeCommand("touch /workspace/should-not", [], { abortSignal: AbortSignal.abort() }));
    assert.equal((await sandbox.executeCommand("ls /workspace/should-not")).exitCode, 1);
  });

  it("reaps finished commands from the sandbox's process table", async () => {
    for (let i = 0; i < 3; i++) await sandbox.executeCommand("true");
    await new Promise((r) => setTimeout(r, 100)); // the reap is not awaited
    const rows = await other.processes(sandbox.name);
    assert.ok(!rows.some((p) => p.command[2] === "true"), JSON.stringify(rows));
  });

  it("has no output cap: 3 MB arrive whole, or what the sandbox dropped is counted", async () => {
    const r = await sandbox.executeCommand("head -c 3000000 /dev/zero | tr '\\0' b");
    assert.equal(r.exitCode, 0);
    assert.match(r.stdout, /^b*$/);
    assert.equal(r.stdout.length + r.stdoutDroppedBytes, 3_000_000);
    assert.equal(r.stdoutTruncated, r.stdoutDroppedBytes > 0);
    // A producer that the polls keep up with loses nothing.
    const slow = await sandbox.executeCommand("for i in 1 2 3 4 5; do head -c 500000 /dev/zero | tr '\\0' c; sleep 0.3; done");
    assert.equal(slow.stdout.length, 2_500_000);
    assert.equal(slow.stdoutDroppedBytes, 0);
  });
});
