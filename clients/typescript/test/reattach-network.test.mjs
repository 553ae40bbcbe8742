// A re-attach after the sandbox went away keeps what the first attach asked
// for: a `none` sandbox deleted under a live client comes back `none`, not
// with the server's default network.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { SandboxClient } from "@sandboxd/client";
import { countingFetch, skipReason, startDaemon, uniqueName } from "./harness.mjs";

describe("a re-attach keeps the network", { skip: skipReason("tiny") }, () => {
  let daemon;
  let token;

  before(async () => {
    daemon = await startDaemon({ image: "tiny", args: ["--pool-size", "0", "--network", "nat"] });
    token = await daemon.token();
  });
  after(async () => {
    await daemon?.stop();
  });

  it("a none sandbox deleted out of band comes back none", async () => {
    const { fetch, counts } = countingFetch();
    const live = new SandboxClient({ identityToken: token, fetchImpl: fetch });
    const other = new SandboxClient({ identityToken: token });
    const name = uniqueName("net");
    const h = await live.attach(name, undefined, { network: "none" });
    assert.equal(h.network, "none");
    await live.exec(name, { command: ["true"] });
    await other.delete(name);
    const r = await live.exec(name, { command: ["true"] });
    assert.equal(r.exitCode, 0);
    assert.equal(counts.attach, 2, "the client attached again");
    assert.equal((await other.get(name)).network, "none");
    await live.delete(name);
  });
});
