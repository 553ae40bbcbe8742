// Credential expiry: the client re-attaches on its own, exactly once.
// The daemon mints 2-second data-plane credentials here.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { SandboxClient, SandboxRequestError } from "@sandboxd/client";
import { countingFetch, skipReason, sleep, startDaemon, uniqueName } from "./harness.mjs";

describe("credential expiry (--credential-ttl 2s)", { skip: skipReason("tiny") }, () => {
  let daemon;
  let token;

  before(async () => {
    daemon = await startDaemon({ image: "tiny", args: ["--credential-ttl", "2s"] });
    token = await daemon.token();
  });
  after(async () => {
    await daemon?.stop();
  });

  it("attaches once on first use and reuses the handle", async () => {
    const { fetch, counts } = countingFetch();
    const sandboxes = new SandboxClient({ identityToken: token, fetchImpl: fetch });
    const name = uniqueName();
    await sandboxes.exec(name, { command: ["true"] });
    await sandboxes.exec(name, { command: ["true"] });
    await sandboxes.listDir(name);
    assert.equal(counts.attach, 1);
    assert.equal(counts.data, 3);
    await sandboxes.delete(name);
  });

  it("concurrent first calls share one attach", async () => {
    const { fetch, counts } = countingFetch();
    const sandboxes = new SandboxClient({ identityToken: token, fetchImpl: fetch });
    const name = uniqueName();
    const results = await Promise.all(
      Array.from({ length: 5 }, (_, i) => sandboxes.exec(name, { command: ["echo", String(i)] })),
    );
    assert.deepEqual(results.map((r) => r.stdout), ["0\n", "1\n", "2\n", "3\n", "4\n"]);
    assert.equal(counts.attach, 1);
    await sandboxes.delete(name);
  });

  it("refreshes a handle that is about to expire: one more attach", async () => {
    const { fetch, counts } = countingFetch();
    const sandboxes = new SandboxClient({ identityToken: token, fetchImpl: fetch });
    const name = uniqueName();
    const first = await sandboxes.exec(name, { command: ["true"] });
    assert.equal(first.exitCode, 0);
    assert.equal(counts.attach, 1);
    await sleep(3_000);
    const r = await sandboxes.exec(name, { command: ["echo", "again"] });
    assert.equal(r.stdout, "again\n");
    assert.equal(counts.attach, 2);
    assert.equal(counts.unauthorized, 0);
    await sandboxes.delete(name);
  });

  it("a 401 from the data plane re-attaches once and retries once", async () => {
    // Claim the credential lasts an hour, so only the sandbox's 401 can tell.
    const { fetch, counts } = countingFetch({
      onAttach: (h) => ({ ...h, expiresAt: new Date(Date.now() + 3_600_000).toISOString() }),
    });
    const sandboxes = new SandboxClient({ identityToken: token, fetchImpl: fetch });
    const name = uniqueName();
    await sandboxes.writeFile(name, "/workspace/f.txt", "kept\n");
    assert.equal(counts.attach, 1);
    await sleep(3_000);
    assert.equal(await sandboxes.readFile(name, "/workspace/f.txt"), "kept\n");
    assert.equal(counts.unauthorized, 1);
    assert.equal(counts.attach, 2);
    // The fresh credential is then reused.
    assert.equal(await sandboxes.readFile(name, "f.txt"), "kept\n");
    assert.equal(counts.attach, 2);
    await sandboxes.delete(name);
  });

  it("a credential that keeps failing is not retried in a loop", async () => {
    const { fetch, counts } = countingFetch({
      onAttach: (h) => ({
        ...h,
        expiresAt: new Date(Date.now() + 3_600_000).toISOString(),
        headers: Object.fromEntries(Object.keys(h.headers).map((k) => [k, "Bearer forged"])),
      }),
    });
    const sandboxes = new SandboxClient({ identityToken: token, fetchImpl: fetch });
    const name = uniqueName();
    const err = await sandboxes.exec(name, { command: ["true"] }).catch((e) => e);
    assert.ok(err instanceof SandboxRequestError, String(err));
    assert.equal(err.status, 401);
    assert.equal(counts.attach, 2);
    assert.equal(counts.data, 2);
    await sandboxes.delete(name);
  });
});
