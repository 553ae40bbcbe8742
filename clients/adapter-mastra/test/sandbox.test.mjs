// SandboxdSandbox's lifecycle, identity, info and instructions, against a
// real daemon.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { MastraSandbox, SandboxProcessManager, Workspace } from "@mastra/core/workspace";
import { SandboxClient } from "@sandboxd/client";
import * as adapter from "@sandboxd/adapter-mastra";
import { SandboxdFilesystem, SandboxdProcessManager, SandboxdSandbox } from "@sandboxd/adapter-mastra";
import { countingFetch, skipReason, startDaemon, uniqueName } from "./helpers.mjs";

describe("exports", () => {
  it("has the sandboxd names and the documented aliases", () => {
    assert.equal(adapter.AstroSandbox, SandboxdSandbox);
    assert.equal(adapter.AstroProcessManager, SandboxdProcessManager);
    assert.equal(typeof adapter.SandboxdProcessHandle, "function");
    assert.equal(typeof adapter.SandboxdFilesystem, "function");
  });

  it("is a MastraSandbox with a SandboxProcessManager on sandbox.processes, before any I/O", () => {
    const sandbox = new SandboxdSandbox({ name: "thread-42", identityToken: "x.e30.x", serverUrl: "http://127.0.0.1:9" });
    assert.ok(sandbox instanceof MastraSandbox);
    assert.ok(sandbox.processes instanceof SandboxProcessManager);
    assert.ok(sandbox.processes instanceof SandboxdProcessManager);
    assert.equal(sandbox.processes.sandbox, sandbox);
    assert.equal(sandbox.provider, "sandboxd");
    assert.equal(sandbox.name, "thread-42");
    assert.equal(sandbox.id, "thread-42");
    assert.equal(sandbox.status, "pending");
    assert.equal(sandbox.workingDirectory, "/workspace");
    assert.equal(typeof sandbox.executeCommand, "function");
    // The two-line example constructs.
    const ws = new Workspace({ sandbox: new adapter.AstroSandbox({ name: "thread-42", identityToken: "x.e30.x", serverUrl: "http://127.0.0.1:9" }) });
    assert.equal(ws.sandbox.provider, "sandboxd");
  });

  it("refuses a name the server would refuse", () => {
    assert.throws(() => new SandboxdSandbox({ name: "../etc" }), TypeError);
    assert.throws(() => new SandboxdSandbox({}), TypeError);
    assert.throws(() => new SandboxdFilesystem({}), TypeError);
  });
});

describe("SandboxdSandbox lifecycle", { skip: skipReason("tiny"), timeout: 120_000 }, () => {
  let daemon;
  let token;
  let other;

  before(async () => {
    daemon = await startDaemon({ image: "tiny" });
    token = await daemon.token();
    other = new SandboxClient({ identityToken: token });
  });
  after(async () => {
    await daemon?.stop();
  });

  it("start attaches and reports created, then connected for another instance on the name", async () => {
    const name = uniqueName("life");
    const outcomes = [];
    const first = new SandboxdSandbox({ name, identityToken: token, onStart: ({ outcome }) => outcomes.push(outcome) });
    assert.deepEqual(await first.start(), { outcome: "created" });
    assert.equal(first.status, "running");
    assert.equal((await other.get(name)).state, "running");
    // Starting a running one again does nothing more.
    assert.deepEqual(await first.start(), { outcome: "connected" });

    const second = new SandboxdSandbox({ name, identityToken: token, onStart: ({ outcome }) => outcomes.push(outcome) });
    assert.deepEqual(await second.start(), { outcome: "connected" });
    assert.deepEqual(outcomes, ["created", "connected"]);

    // After a delete, the name starts out fresh.
    await other.delete(name);
    const third = new SandboxdSandbox({ name, identityToken: token });
    assert.deepEqual(await third.start(), { outcome: "created" });
    await third.destroy();
  });

  it("a command starts it lazily", async () => {
    const name = uniqueName("lazy");
    const sandbox = new SandboxdSandbox({ name, identityToken: token });
    const r = await sandbox.executeCommand("pwd");
    assert.equal(r.stdout, "/workspace\n");
    assert.equal(sandbox.status, "running");
    await sandbox.destroy();
  });

  it("stop suspends (files and memory kept), the next command resumes, destroy deletes", async () => {
    const name = uniqueName("stop");
    const sandbox = new SandboxdSandbox({ name, identityToken: token });
    const ws = new Workspace({ sandbox, filesystem: new SandboxdFilesystem({ sandbox }) });
    await ws.init();
    await ws.filesystem.writeFile("kept.txt", "still here\n");
    const bg = await sandbox.processes.spawn("sleep 300");

    await ws.stop();
    assert.equal(sandbox.status, "stopped");
    assert.equal((await other.get(name)).state, "suspended");

    const r = await sandbox.executeCommand("cat kept.txt");
    assert.equal(r.stdout, "still here\n");
    assert.equal(sandbox.status, "running");
    assert.equal((await other.get(name)).state, "running");
    const again = await sandbox.processes.get(bg.pid);
    assert.equal(again.exitCode, undefined, "a process survives the suspension");

    await ws.destroy();
    assert.equal(sandbox.status, "destroyed");
    await assert.rejects(other.get(name), (err) => err.status === 404);
    // Destroying again, or a sandbox already gone, is fine.
    await sandbox.destroy();
  });

  it("stop ends a wait in progress instead of resuming the sandbox with its polls", async () => {
    const name = uniqueName("stopwait");
    const sandbox = new SandboxdSandbox({ name, identityToken: token, pollWaitMs: 2000 });
    const h = await sandbox.processes.spawn("sleep 300");
    const waiting = assert.rejects(h.wait(), /not ready/i);
    await new Promise((r) => setTimeout(r, 200));
    const t0 = Date.now();
    await sandbox._stop();
    await waiting;
    // Before its 2 s poll would have answered: the stop ended it.
    assert.ok(Date.now() - t0 < 1900, "the wait ended with the stop, not with its poll");
    await new Promise((r) => setTimeout(r, 2500));
    assert.equal((await other.get(name)).state, "suspended", "no poll woke it up");
    await sandbox.destroy();
  });

  it("getInfo reads the server's record", async () => {
    const name = uniqueName("info");
    const sandbox = new SandboxdSandbox({ name, identityToken: token });
    const idle = await sandbox.getInfo();
    assert.equal(idle.metadata.state, "absent");
    await sandbox.start();
    const info = await sandbox.getInfo();
    const rec = await other.get(name);
    assert.equal(info.id, name);
    assert.equal(info.name, name);
    assert.equal(info.provider, "sandboxd");
    assert.equal(info.status, "running");
    assert.equal(info.createdAt.toISOString(), rec.createdAt);
    assert.ok(info.lastUsedAt instanceof Date);
    assert.equal(info.timeoutAt.toISOString(), rec.ceilingAt);
    assert.equal(info.metadata.state, "running");
    assert.equal(info.metadata.network, "nat");
    assert.equal(info.metadata.workingDirectory, "/workspace");
    assert.equal(info.metadata.image, "a minimal BusyBox userland");
    await sandbox.destroy();
  });

  it("getInstructions tells the working directory, the image and the network", async () => {
    const open = new SandboxdSandbox({ name: uniqueName("nat"), identityToken: token });
    await open.start();
    const text = open.getInstructions();
    assert.match(text, /Working directory: \/workspace/);
    assert.match(text, /image: a minimal BusyBox userland/);
    assert.match(text, /Network: outbound internet through NAT/);
    await open.destroy();

    const closed = new SandboxdSandbox({ name: uniqueName("none"), identityToken: token, network: "none", workingDirectory: "/workspace/app" });
    await closed.start();
    assert.equal(closed.network, "none");
    assert.equal((await other.get(closed.name)).network, "none");
    const closedText = closed.getInstructions();
    assert.match(closedText, /Network: none \(loopback only\)/);
    assert.match(closedText, /Working directory: \/workspace\/app/);
    assert.equal(new SandboxdSandbox({ name: "x", identityToken: token, instructions: "custom" }).getInstructions(), "custom");
    const extended = new SandboxdSandbox({ name: "x", identityToken: token, instructions: ({ defaultInstructions }) => `${defaultInstructions} More.` });
    assert.match(extended.getInstructions(), /Working directory: \/workspace\. .* More\.$|More\.$/);
    await closed.destroy();
  });

  it("a workspace's instructions include the sandbox's and the filesystem's", async () => {
    const sandbox = new SandboxdSandbox({ name: uniqueName("wsi"), identityToken: token });
    const ws = new Workspace({ sandbox, filesystem: new SandboxdFilesystem({ sandbox }) });
    await ws.init();
    const text = ws.getInstructions();
    assert.match(text, /sandboxd sandbox/);
    assert.match(text, /Files live in the sandboxd sandbox/);
    await ws.destroy();
  });

  it("shares one client when given one, and its options otherwise", async () => {
    const { fetch, counts } = countingFetch();
    const client = new SandboxClient({ identityToken: token, fetchImpl: fetch });
    const name = uniqueName("shared");
    const a = new SandboxdSandbox({ name, client });
    const fs = new SandboxdFilesystem({ name, client });
    assert.equal(a.client, client);
    assert.equal(fs.client, client);
    await a.executeCommand("true");
    await fs.writeFile("x", "1");
    assert.equal(counts.attach, 1, "one attach for the shared client");

    const own = new SandboxdSandbox({ name, identityToken: token, fetchImpl: fetch, timeoutSeconds: 5 });
    assert.notEqual(own.client, client);
    await own.executeCommand("true");
    assert.equal(counts.attach, 2, "the client built from the options used the given fetch");
    await a.destroy();
  });

  it("writeFiles writes through the file endpoint and applies a mode", async () => {
    const name = uniqueName("wf");
    const sandbox = new SandboxdSandbox({ name, identityToken: token });
    await sandbox.writeFiles([
      { path: "bin/run.sh", content: "#!/bin/sh\necho ran\n", mode: 0o755 },
      { path: "/workspace/data.bin", content: Buffer.from([0, 1, 2, 255]) },
    ]);
    assert.equal((await sandbox.executeCommand("./bin/run.sh")).stdout, "ran\n");
    assert.deepEqual([...(await other.readFileBytes(name, "data.bin"))], [0, 1, 2, 255]);
    await assert.rejects(sandbox.writeFiles([{ path: "y", content: "", mode: 0o4755 }]));
    const aborted = AbortSignal.abort();
    await assert.rejects(sandbox.writeFiles([{ path: "z", content: "" }], { abortSignal: aborted }), /aborted/i);
    await sandbox.destroy();
  });

  it("clone makes a sibling with the same client", async () => {
    const sandbox = new SandboxdSandbox({ name: uniqueName("tpl"), identityToken: token, env: { A: "1" } });
    const sibling = sandbox.clone({ sandboxId: uniqueName("sib") });
    assert.equal(sibling.client, sandbox.client);
    assert.notEqual(sibling.name, sandbox.name);
    assert.equal((await sibling.executeCommand("echo $A")).stdout, "1\n");
    await sibling.destroy();
  });
});
