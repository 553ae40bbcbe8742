// id, isRunning, initialize, close, create, a shared client, the alias, and
// a sandbox that goes away behind the adapter's back.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { SandboxClient, SandboxRequestError } from "@sandboxd/client";
import { SandboxError, isSandboxBackend } from "deepagents";
import { AstroSandbox, SandboxdSandbox } from "../dist/index.js";
import { countingFetch, skipReason, sleep, startDaemon, uniqueName } from "../../typescript/test/harness.mjs";

const exists = async (client, name) => (await client.list()).some((s) => s.name === name);

describe("lifecycle", { skip: skipReason("tiny"), timeout: 120_000 }, () => {
  let daemon;
  let token;
  let control;

  before(async () => {
    daemon = await startDaemon({ image: "tiny" });
    token = await daemon.token();
    control = new SandboxClient({ identityToken: token });
  });
  after(async () => {
    await daemon?.stop();
  });

  it("is a deepagents sandbox backend named by its sandbox; AstroSandbox is the same class", () => {
    const sb = new SandboxdSandbox({ name: "thread-42", identityToken: token });
    assert.equal(sb.id, "thread-42");
    assert.equal(isSandboxBackend(sb), true);
    assert.equal(AstroSandbox, SandboxdSandbox);
    assert.ok(new AstroSandbox({ name: "x", identityToken: token }) instanceof SandboxdSandbox);
    assert.match(new SandboxdSandbox({ identityToken: token }).id, /^deepagents-[0-9a-f]{16}$/);
    assert.throws(() => new SandboxdSandbox({ name: "bad name", identityToken: token }), (e) => SandboxError.isInstance(e) && e.code === "INVALID_NAME");
    assert.throws(() => new SandboxdSandbox({ name: "x", client: control, timeoutSeconds: 0 }), RangeError);
  });

  it("attaches on initialize() or on first use; a second initialize() is refused", async () => {
    const name = uniqueName("init");
    const sb = new SandboxdSandbox({ name, identityToken: token });
    assert.equal(sb.isRunning, false);
    assert.equal(await exists(control, name), false, "constructing attaches nothing");
    await sb.initialize();
    assert.equal(sb.isRunning, true);
    assert.equal(await exists(control, name), true);
    await assert.rejects(sb.initialize(), (e) => SandboxError.isInstance(e) && e.code === "ALREADY_INITIALIZED");

    const lazy = new SandboxdSandbox({ name: uniqueName("lazy"), identityToken: token });
    assert.equal((await lazy.execute("echo hi")).output, "hi\n");
    assert.equal(lazy.isRunning, true);
    await sb.close();
    await lazy.close();
  });

  it("close() deletes the sandbox; later calls are refused until initialize() attaches a new one", async () => {
    const name = uniqueName("close");
    const sb = new SandboxdSandbox({ name, identityToken: token });
    await sb.write("/workspace/keep.txt", "x");
    await sb.close();
    assert.equal(sb.isRunning, false);
    await assert.rejects(control.get(name), (e) => e instanceof SandboxRequestError && e.status === 404);
    await assert.rejects(sb.execute("true"), (e) => SandboxError.isInstance(e) && e.code === "NOT_INITIALIZED");
    await assert.rejects(sb.read("/workspace/keep.txt"), (e) => SandboxError.isInstance(e) && e.code === "NOT_INITIALIZED");
    await sb.close(); // twice is fine
    await sb.initialize();
    assert.equal((await sb.execute("ls -A /workspace")).output, "", "a new, empty sandbox");
    await sb.close();
    // A sandbox already gone (deleted elsewhere) closes without error.
    const gone = new SandboxdSandbox({ name: uniqueName("gone"), identityToken: token });
    await gone.initialize();
    await control.delete(gone.id);
    await gone.close();
  });

  it("create() attaches and writes initialFiles (text and bytes), or says which could not be written", async () => {
    const sb = await SandboxdSandbox.create({
      name: uniqueName("create"),
      identityToken: token,
      initialFiles: { "/workspace/a/b.txt": "text\n", "c.bin": new Uint8Array([0, 1, 2]) },
    });
    assert.equal(sb.isRunning, true);
    assert.equal(await control.readFile(sb.id, "/workspace/a/b.txt"), "text\n");
    assert.deepEqual(await control.readFileBytes(sb.id, "/workspace/c.bin"), new Uint8Array([0, 1, 2]));
    await sb.close();

    const before = (await control.list()).length;
    await assert.rejects(
      SandboxdSandbox.create({ identityToken: token, initialFiles: { "/proc/nope": "x", "/workspace/fine": "y" } }),
      (e) => SandboxError.isInstance(e) && e.code === "FILE_OPERATION_FAILED" && /\/proc\/nope \(permission_denied\)/.test(e.message),
    );
    assert.equal((await control.list()).length, before, "a sandbox of a generated name is not left behind");
  });

  it("shares one client between sandboxes (one attach each, no client of their own)", async () => {
    const { fetch, counts } = countingFetch();
    const client = new SandboxClient({ identityToken: token, fetchImpl: fetch });
    const a = new SandboxdSandbox({ name: uniqueName("share-a"), client, fetchImpl: fetch });
    const b = new SandboxdSandbox({ name: uniqueName("share-b"), client, fetchImpl: fetch });
    assert.equal(a.client, client);
    await a.write("/workspace/who", "a");
    await b.write("/workspace/who", "b");
    assert.deepEqual((await a.read("/workspace/who")).content, "a");
    assert.deepEqual((await b.read("/workspace/who")).content, "b");
    assert.equal(counts.attach, 2);
    await a.close();
    await b.close();
  });

  it("reaches a new sandbox after one was deleted out of band, for every kind of call", async () => {
    const { fetch, counts } = countingFetch();
    const name = uniqueName("stale");
    const sb = new SandboxdSandbox({ name, identityToken: token, fetchImpl: fetch });
    const calls = {
      execute: async () => (await sb.execute("ls -A /workspace")).output,
      read: async () => (await sb.read("/workspace/mark")).error,
      ls: async () => (await sb.ls("/workspace")).files.length,
      upload: async () => (await sb.uploadFiles([["/workspace/new", new Uint8Array([1])]]))[0].error,
      download: async () => (await sb.downloadFiles(["/workspace/mark"]))[0].error,
      grep: async () => (await sb.grep("old", "/workspace")).matches.length,
      glob: async () => (await sb.glob("*", "/workspace")).files.length,
    };
    const want = {
      execute: "",
      read: "File '/workspace/mark' not found",
      ls: 0,
      upload: null,
      download: "file_not_found",
      grep: 0,
      glob: 0,
    };
    for (const [kind, call] of Object.entries(calls)) {
      await sb.write("/workspace/mark", "old");
      await sb.read("/workspace/mark"); // the streamed reads hold a credential too
      const unauthorized = counts.unauthorized;
      await control.delete(name);
      assert.deepEqual(await call(), want[kind], kind);
      assert.ok(counts.unauthorized > unauthorized, `${kind}: the stale credential was refused, then replaced`);
    }
    assert.equal(sb.isRunning, true);
    await sb.close();
  });

  it("reaches a new sandbox after the server reclaimed it (suspended TTL)", async () => {
    const short = await startDaemon({ image: "tiny", args: ["--pool-size", "0", "--idle-timeout", "1s", "--suspended-ttl", "2s"] });
    try {
      const t = await short.token();
      const other = new SandboxClient({ identityToken: t });
      const name = uniqueName("ttl");
      const sb = new SandboxdSandbox({ name, identityToken: t });
      await sb.write("/workspace/mark", "old");
      const t0 = Date.now();
      while ((await other.list()).some((s) => s.name === name)) {
        assert.ok(Date.now() - t0 < 30_000, "reclaimed in time");
        await sleep(250);
      }
      assert.deepEqual(await sb.read("/workspace/mark"), { error: "File '/workspace/mark' not found" });
      assert.equal((await sb.execute("ls -A /workspace")).output, "");
      await sb.close();
    } finally {
      await short.stop();
    }
  });
});
