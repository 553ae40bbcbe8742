// Beyond the documented client: a sandbox's network, chosen at attach.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { SandboxClient, SandboxRequestError } from "@sandboxd/client";
import { CLASS, skipReason, startDaemon, uniqueName } from "./harness.mjs";

// The sandbox's interfaces: its sysfs lists them (ns); gVisor's sysfs has
// no class/net, its network stack lists them in /proc/net/dev.
const LIST_NET = CLASS === "gvisor"
  ? ["sh", "-c", "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '"]
  : ["ls", "/sys/class/net"];

describe("network", { skip: skipReason("tiny") }, () => {
  let daemon;
  let sandboxes;
  const isolated = uniqueName("net-none");
  const open = uniqueName("net-nat");

  before(async () => {
    daemon = await startDaemon({ image: "tiny" });
    sandboxes = new SandboxClient({ identityToken: await daemon.token() });
  });
  after(async () => {
    for (const n of [isolated, open]) await sandboxes?.delete(n).catch(() => {});
    await daemon?.stop();
  });

  it("attach may ask for none; exec on the same name keeps it", async () => {
    const h = await sandboxes.attach(isolated, undefined, { network: "none" });
    assert.equal(h.network, "none");
    const r = await sandboxes.exec(isolated, { command: LIST_NET });
    assert.equal(r.stdout, "lo\n");
    assert.equal((await sandboxes.get(isolated)).network, "none");
  });

  it("the default is the server's (nat here), and a clash is a 409", async () => {
    const h = await sandboxes.attach(open);
    assert.equal(h.network, "nat");
    await assert.rejects(sandboxes.attach(open, "default", { network: "none" }), (err) => {
      assert.ok(err instanceof SandboxRequestError);
      assert.equal(err.status, 409);
      return true;
    });
  });
});
