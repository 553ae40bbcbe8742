// checkpoint and fork through the SDK (the gvisor class; ns answers 409).

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { SandboxClient, SandboxRequestError } from "@sandboxd/client";
import { CLASS, skipReason, startDaemon, uniqueName } from "./harness.mjs";

describe("checkpoint and fork", { skip: skipReason("tiny") }, () => {
  let daemon;
  let sandboxes;
  const name = uniqueName("ckpt");
  const child = uniqueName("fork");

  before(async () => {
    daemon = await startDaemon({ image: "tiny" });
    sandboxes = new SandboxClient({ identityToken: await daemon.token() });
  });
  after(async () => {
    for (const n of [name, child]) await sandboxes?.delete(n).catch(() => {});
    await daemon?.stop();
  });

  it("ns: checkpoint is 409 unsupported_class", { skip: CLASS === "gvisor" && "ns only" }, async () => {
    await assert.rejects(sandboxes.checkpoint(name), (err) => err instanceof SandboxRequestError && err.status === 409 && err.code === "unsupported_class");
  });

  it("gvisor: a fork continues the saved process and has its own name", { skip: CLASS !== "gvisor" && "gvisor only" }, async () => {
    const loop = "i=0; while :; do i=$((i+1)); echo $i > /tmp/n; sleep 0.05; done";
    await sandboxes.spawn(name, { command: ["/bin/sh", "-c", loop] });
    await sandboxes.exec(name, { command: ["/bin/sh", "-c", "echo saved > /workspace/w; sleep 0.3"] });
    await assert.rejects(sandboxes.checkpoint(name, { keepRunning: "no" }), TypeError);
    const info = await sandboxes.checkpoint(name);
    assert.equal(info.running, true);
    assert.ok(info.sizeBytes > 0);
    const handle = await sandboxes.fork(name, child);
    assert.equal(handle.name, child);
    assert.equal(handle.class, "default");
    const r = await sandboxes.exec(child, { command: ["/bin/sh", "-c", "hostname; cat /workspace/w; cat /tmp/n"] });
    const [host, w, n] = r.stdout.split("\n");
    assert.equal(host, child);
    assert.equal(w, "saved");
    assert.ok(Number(n) > 2, `the counter went on in the fork: ${n}`);
    await assert.rejects(sandboxes.fork(name, child), (err) => err instanceof SandboxRequestError && err.code === "already_exists");
  });
});
