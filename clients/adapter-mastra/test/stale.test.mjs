// A sandbox that goes away behind a live adapter (deleted by another
// client, or reclaimed by the server): the adapter's next call reaches a
// new, empty sandbox instead of failing. The SDK re-attaches on the stale
// credential; these tests hold the adapter to it.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Workspace } from "@mastra/core/workspace";
import { SandboxClient } from "@sandboxd/client";
import { SandboxdFilesystem, SandboxdSandbox } from "@sandboxd/adapter-mastra";
import { countingFetch, skipReason, startDaemon, uniqueName, until } from "./helpers.mjs";

describe("a sandbox gone behind the adapter's back", { skip: skipReason("tiny"), timeout: 120_000 }, () => {
  let daemon;
  let token;
  let other;

  before(async () => {
    daemon = await startDaemon({
      image: "tiny",
      args: ["--pool-size", "0", "--idle-timeout", "1s", "--suspended-ttl", "2s"],
    });
    token = await daemon.token();
    other = new SandboxClient({ identityToken: token });
  });
  after(async () => {
    await daemon?.stop();
  });

  function live(name) {
    const { fetch, counts } = countingFetch();
    const sandbox = new SandboxdSandbox({ name, identityToken: token, fetchImpl: fetch });
    const filesystem = new SandboxdFilesystem({ sandbox });
    return { sandbox, filesystem, workspace: new Workspace({ sandbox, filesystem }), counts };
  }

  async function check(how) {
    const name = uniqueName(how);
    const { sandbox, filesystem, workspace, counts } = live(name);
    await workspace.init();
    await filesystem.writeFile("mark", "old");
    assert.equal((await sandbox.executeCommand("cat mark")).stdout, "old");
    const createdBefore = (await other.get(name)).createdAt;
    if (how === "deleted") await other.delete(name);
    else {
      await until(async () => (await other.list()).find((s) => s.name === name)?.state === "suspended", 20_000, "suspended");
      await until(async () => !(await other.list()).some((s) => s.name === name), 20_000, "reclaimed");
    }
    const attaches = counts.attach;

    // The next command works, in a new and empty sandbox.
    const r = await sandbox.executeCommand("ls -A /workspace; echo end");
    assert.equal(r.exitCode, 0);
    assert.equal(r.stdout, "end\n");
    assert.equal(counts.unauthorized, 1, "the stale credential was refused once");
    assert.equal(counts.attach, attaches + 1, "and the client attached again once");
    assert.notEqual((await other.get(name)).createdAt, createdBefore);
    // Files, listings and processes work there too.
    await assert.rejects(filesystem.readFile("mark"), (err) => err.code === "ENOENT");
    await filesystem.writeFile("mark", "new");
    assert.deepEqual(await filesystem.readdir("."), [{ name: "mark", type: "file" }]);
    const h = await sandbox.processes.spawn("cat mark");
    assert.equal((await h.wait()).stdout, "new");
    assert.equal(sandbox.status, "running");
    await workspace.destroy();
  }

  it("deleted by another client", () => check("deleted"));
  it("reclaimed after its suspended TTL", () => check("ttl"));

  it("a file operation first after the delete works too", async () => {
    const name = uniqueName("fs-first");
    const { filesystem, workspace } = live(name);
    await filesystem.writeFile("a", "1");
    await other.delete(name);
    await filesystem.writeFile("b", "2");
    assert.deepEqual(await filesystem.readdir("."), [{ name: "b", type: "file" }]);
    assert.equal((await filesystem.stat("b")).size, 1);
    await workspace.destroy();
  });
});
