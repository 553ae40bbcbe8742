// Egress policies through the client: on attach, network.get/set/log, a
// hostile policy refused, and a re-attach that keeps the policy in force.
// Nothing is resolved or reached from the sandbox here (the daemon's
// forwarder points at a closed port on loopback): tests/integration's
// egress tests check the enforcement itself.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { SandboxClient, SandboxRequestError } from "@sandboxd/client";
import { skipReason, startDaemon, uniqueName } from "./harness.mjs";

describe("egress", { skip: skipReason("tiny") }, () => {
  let daemon;
  let sandboxes;
  const name = uniqueName("egress");

  before(async () => {
    daemon = await startDaemon({ image: "tiny", args: ["--network", "nat", "--dns-upstream", "127.0.0.1:9"] });
    sandboxes = new SandboxClient({ identityToken: await daemon.token() });
  });
  after(async () => {
    await sandboxes?.delete(name).catch(() => {});
    await daemon?.stop();
  });

  it("attach with a policy; get answers it canonicalized", async () => {
    await sandboxes.attach(name, undefined, { network: "nat", egress: { allow: ["API.example.com.", "203.0.113.7"] } });
    const p = await sandboxes.network.get(name);
    assert.deepEqual(p, { mode: "nat", egress: { allow: ["api.example.com", "203.0.113.7/32"], deny: [] } });
  });

  it("set replaces it, a re-attach keeps it, and the log is a list", async () => {
    const p = await sandboxes.network.set(name, { allow: ["*.example.org"], deny: ["bad.example.org"] });
    assert.deepEqual(p.egress, { allow: ["*.example.org"], deny: ["bad.example.org"] });
    // A fresh handle: the attach names the policy in force, no 409.
    const h = await sandboxes.attach(name);
    assert.equal(h.network, "nat");
    assert.deepEqual((await sandboxes.network.get(name)).egress.deny, ["bad.example.org"]);
    const log = await sandboxes.network.log(name);
    assert.ok(Array.isArray(log));
  });

  it("a hostile policy is a 400 naming the entry, and changes nothing", async () => {
    await assert.rejects(sandboxes.network.set(name, { allow: ["10.0.0.1/8"] }), (err) => {
      assert.ok(err instanceof SandboxRequestError);
      assert.equal(err.status, 400);
      assert.match(err.message, /10\.0\.0\.1\/8/);
      return true;
    });
    assert.deepEqual((await sandboxes.network.get(name)).egress.allow, ["*.example.org"]);
  });

  it("removing it: {}", async () => {
    const p = await sandboxes.network.set(name, {});
    assert.deepEqual(p.egress, { allow: null, deny: [] });
  });
});

describe("egress: the README's example", { skip: skipReason("tiny") }, () => {
  let daemon;
  let sandboxes;
  before(async () => {
    daemon = await startDaemon({ image: "tiny", args: ["--network", "nat", "--dns-upstream", "127.0.0.1:9"] });
    sandboxes = new SandboxClient({ identityToken: await daemon.token() });
  });
  after(async () => {
    await sandboxes?.delete("agent-7").catch(() => {});
    await daemon?.stop();
  });

  it("runs as written", async () => {
    const lines = [];
    const console = { log: (...a) => lines.push(a.join(" ")) };
    await sandboxes.attach("agent-7", "default", {
      network: "nat",
      egress: { allow: ["api.example.com", "*.pypi.org", "203.0.113.0/24"] },
    });
    await sandboxes.network.set("agent-7", { allow: ["api.example.com"], deny: ["203.0.113.9"] });
    const { egress } = await sandboxes.network.get("agent-7"); // canonical: "203.0.113.9/32"
    for (const e of await sandboxes.network.log("agent-7")) {
      console.log(e.time, e.type, e.allowed, e.name ?? `${e.address}:${e.port}/${e.protocol}`);
    }
    assert.deepEqual(egress, { allow: ["api.example.com"], deny: ["203.0.113.9/32"] });
    assert.equal(lines.length, 0); // nothing was asked or refused yet
  });
});
