// attach with `image`: a new sandbox starts from the image named, the handle
// and the record say which, an unknown image is a typed 404, another image
// than an existing sandbox's a 409, and a re-attach after the sandbox went
// away asks for the same image again.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { SandboxClient, SandboxRequestError } from "@sandboxd/client";
import { execFileSync } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { IMAGES, countingFetch, skipReason, startDaemon, uniqueName } from "./harness.mjs";

describe("attach with an image", { skip: skipReason("tiny") ?? skipReason("debian") }, () => {
  let daemon;
  let token;

  let images;
  before(async () => {
    // An images dir of its own (snapshots are written there): the shared
    // images, hard-linked (they are never written to).
    images = await mkdtemp(join(tmpdir(), "sandboxd-ts-images-"));
    for (const n of ["tiny", "debian"]) execFileSync("cp", ["-al", join(IMAGES, n), join(images, n)]);
    daemon = await startDaemon({ image: "tiny", args: ["--pool-size", "0", "--images", images] });
    token = await daemon.token();
  });
  after(async () => {
    await daemon?.stop();
    if (images) await rm(images, { recursive: true, force: true });
  });

  it("starts a new sandbox from the image named, and keeps it across a re-attach", async () => {
    const { fetch, counts } = countingFetch();
    const live = new SandboxClient({ identityToken: token, fetchImpl: fetch });
    const other = new SandboxClient({ identityToken: token });
    const name = uniqueName("img");
    const h = await live.attach(name, undefined, { image: "debian" });
    assert.equal(h.image, "debian");
    const r = await live.exec(name, { command: ["cat", "/etc/debian_version"] });
    assert.match(r.stdout, /^\d+\.\d+\n$/);
    assert.equal((await other.get(name)).image, "debian");
    assert.ok((await other.list()).some((s) => s.name === name && s.image === "debian"));
    await assert.rejects(live.attach(name, undefined, { image: "tiny" }), (e) => {
      assert.ok(e instanceof SandboxRequestError);
      assert.equal(e.status, 409);
      assert.equal(e.code, "invalid_state");
      return true;
    });
    // Deleted under a live client: it comes back from the same image.
    await other.delete(name);
    const again = await live.exec(name, { command: ["cat", "/etc/debian_version"] });
    assert.equal(again.exitCode, 0);
    assert.ok(counts.attach >= 2, "the client attached again");
    assert.equal((await other.get(name)).image, "debian");
    await live.delete(name);
  });

  it("images() lists what the server has", async () => {
    const client = new SandboxClient({ identityToken: token });
    const all = await client.images();
    const tiny = all.find((i) => i.name === "tiny");
    assert.ok(tiny, JSON.stringify(all));
    assert.equal(tiny.source, "built");
    assert.equal(tiny.layers, 1);
    assert.ok(tiny.sizeBytes > 0 && Date.parse(tiny.builtAt) > 0);
    assert.ok(all.some((i) => i.name === "debian"));
  });

  it("snapshot() makes an image new sandboxes start from", async () => {
    const client = new SandboxClient({ identityToken: token });
    const src = uniqueName("snap-src");
    const image = uniqueName("snap").toLowerCase().replace(/[^a-z0-9_-]/g, "-").slice(0, 60);
    await client.exec(src, { command: ["/bin/sh", "-c", "echo kept > /workspace/kept.txt"] });
    const s = await client.snapshot(src, image);
    assert.equal(s.image, image);
    assert.ok(s.sizeBytes > 0 && s.durationMs >= 0 && Date.parse(s.createdAt));
    assert.ok((await client.images()).some((i) => i.name === image && i.source === "snapshot"));
    const dst = uniqueName("snap-dst");
    await client.attach(dst, undefined, { image });
    assert.equal((await client.exec(dst, { command: ["cat", "/workspace/kept.txt"] })).stdout, "kept\n");
    await assert.rejects(client.snapshot(src, image), (e) => e instanceof SandboxRequestError && e.status === 409 && e.code === "already_exists");
    await assert.rejects(client.snapshot(src, "Bad Name"), (e) => e instanceof SandboxRequestError && e.status === 400);
    await client.delete(dst);
    await client.delete(src);
  });

  it("an image the server does not have is a 404 image_not_found", async () => {
    const client = new SandboxClient({ identityToken: token });
    const name = uniqueName("img");
    await assert.rejects(client.attach(name, undefined, { image: "no-such-image" }), (e) => {
      assert.ok(e instanceof SandboxRequestError);
      assert.equal(e.status, 404);
      assert.equal(e.code, "image_not_found");
      return true;
    });
    await assert.rejects(client.get(name), (e) => e instanceof SandboxRequestError && e.status === 404);
  });
});
