// The documented error classes, each where the documentation says.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import {
  SandboxClient,
  SandboxNotEnabledError,
  SandboxRequestError,
  SandboxUnavailableError,
} from "@sandboxd/client";
import { countingFetch, freePort, skipReason, startDaemon, uniqueName } from "./harness.mjs";

/** The documentation's error-handling example, verbatim but for what each branch returns. */
async function documentedHandler(sandboxes, command) {
  const runWithoutSandbox = () => "runWithoutSandbox";
  const retryNextTurn = () => "retryNextTurn";
  try {
    await sandboxes.exec("thread-42", { command });
  } catch (err) {
    if (err instanceof SandboxNotEnabledError) return runWithoutSandbox();
    if (err instanceof SandboxRequestError && err.status === 402) {
      await sandboxes.delete("thread-01");
      return;
    }
    if (err instanceof SandboxUnavailableError) return retryNextTurn();
    throw err;
  }
  return "ran";
}

describe("client-side errors (no server needed)", () => {
  it("an unreachable server is SandboxUnavailableError with a cause, tried once", async () => {
    const port = await freePort(); // nothing listens there
    const { fetch, counts } = countingFetch();
    const sandboxes = new SandboxClient({
      identityToken: "x.eyJpc3MiOiJodHRwOi8vZXhhbXBsZS5pbnZhbGlkIn0.x",
      serverUrl: `http://127.0.0.1:${port}`,
      fetchImpl: fetch,
    });
    const err = await sandboxes.exec("thread-42", { command: ["true"] }).catch((e) => e);
    assert.ok(err instanceof SandboxUnavailableError, String(err));
    assert.ok(!(err instanceof SandboxRequestError));
    assert.ok(err.cause !== undefined);
    assert.equal(counts.attach, 1);
    assert.equal(counts.data, 0);
    assert.equal(await documentedHandler(sandboxes, ["true"]), "retryNextTurn");
  });

  it("serverUrl defaults to the iss claim of the token", async () => {
    const port = await freePort();
    const claims = Buffer.from(JSON.stringify({ iss: `http://127.0.0.1:${port}/` })).toString("base64url");
    const seen = [];
    const sandboxes = new SandboxClient({
      identityToken: `eyJhbGciOiJIUzI1NiJ9.${claims}.sig`,
      fetchImpl: async (url) => {
        seen.push(String(url));
        throw new TypeError("fetch failed");
      },
    });
    await assert.rejects(sandboxes.list(), SandboxUnavailableError);
    assert.deepEqual(seen, [`http://127.0.0.1:${port}/v1/sandboxes`]);
  });

  it("a bad sandbox name is refused before any request", async () => {
    let calls = 0;
    const sandboxes = new SandboxClient({
      identityToken: "t",
      serverUrl: "http://127.0.0.1:9",
      fetchImpl: async () => {
        calls++;
        throw new Error("unreachable");
      },
    });
    for (const bad of ["", "..", "../etc", "-x", "a/b", "x".repeat(129)]) {
      const err = await sandboxes.exec(bad, { command: ["true"] }).catch((e) => e);
      assert.ok(err instanceof SandboxRequestError && err.status === 400, `${bad}: ${err}`);
    }
    assert.equal(calls, 0);
  });
});

describe("server errors", { skip: skipReason("tiny") }, () => {
  let daemon;
  let sandboxes;

  before(async () => {
    daemon = await startDaemon({ image: "tiny" });
    sandboxes = new SandboxClient({ identityToken: await daemon.token() });
  });
  after(async () => {
    await daemon?.stop();
  });

  it("an unknown sandbox is SandboxRequestError 404", async () => {
    const err = await sandboxes.get(uniqueName("nope")).catch((e) => e);
    assert.ok(err instanceof SandboxRequestError, String(err));
    assert.ok(!(err instanceof SandboxNotEnabledError));
    assert.equal(err.status, 404);
    assert.equal(err.code, "sandbox_not_found");
    assert.ok(err.message.length > 0);
  });

  it("an unreadable path is SandboxRequestError 404", async () => {
    const name = uniqueName();
    for (const read of [sandboxes.readFile, sandboxes.readFileBytes]) {
      const err = await read.call(sandboxes, name, "/workspace/does/not/exist").catch((e) => e);
      assert.ok(err instanceof SandboxRequestError, String(err));
      assert.equal(err.status, 404);
    }
    await sandboxes.delete(name);
  });

  it("a class other than default is 409, not SandboxNotEnabledError", async () => {
    const err = await sandboxes.attach(uniqueName(), "gpu-xl").catch((e) => e);
    assert.ok(err instanceof SandboxRequestError, String(err));
    assert.ok(!(err instanceof SandboxNotEnabledError));
    assert.equal(err.status, 409);
  });

  it("a forged identity token is 401", async () => {
    const forged = new SandboxClient({ identityToken: "e30.e30.AAAA", serverUrl: daemon.url });
    const err = await forged.list().catch((e) => e);
    assert.ok(err instanceof SandboxRequestError, String(err));
    assert.equal(err.status, 401);
  });

  it("a disabled account gets SandboxNotEnabledError (409)", async (t) => {
    try {
      await daemon.disableAccount("acct-off");
    } catch (e) {
      return t.skip(`'sandboxd account disable' failed: ${String(e.message).split("\n")[0]}`);
    }
    const off = new SandboxClient({ identityToken: await daemon.token({ account: "acct-off" }) });
    const err = await off.attach("thread-42").catch((e) => e);
    assert.ok(err instanceof SandboxNotEnabledError, String(err));
    assert.ok(err instanceof SandboxRequestError);
    assert.equal(err.status, 409);
    assert.equal(err.code, "not_enabled");
    assert.equal(await documentedHandler(off, ["true"]), "runWithoutSandbox");
  });

  it("exec's deadline is bounded one second under the request timeout", async () => {
    const short = new SandboxClient({ identityToken: await daemon.token(), timeoutSeconds: 3 });
    const name = uniqueName();
    await short.attach(name); // time the exec alone, not the sandbox's creation
    // An answer at all (not SandboxUnavailableError) is the proof: the
    // exec's deadline, not the request's 3 s, ended it.
    const r = await short.exec(name, { command: ["sleep", "10"], timeoutMs: 60_000 });
    assert.equal(r.timedOut, true);
    // The clean-up is not under test: a delete may outlast 3 s on a loaded host.
    await new SandboxClient({ identityToken: await daemon.token() }).delete(name);
  });

  it("a request over timeoutSeconds is SandboxUnavailableError and is not retried", async () => {
    let calls = 0;
    const slow = new SandboxClient({
      identityToken: await daemon.token(),
      timeoutSeconds: 1,
      fetchImpl: async (url, init) => {
        calls++;
        // Never answers; only the client's own timeout ends it.
        return new Promise((_, reject) => init.signal.addEventListener("abort", () => reject(init.signal.reason)));
      },
    });
    const err = await slow.list().catch((e) => e);
    assert.ok(err instanceof SandboxUnavailableError, String(err));
    assert.equal(calls, 1);
  });
});

describe("caps", { skip: skipReason("tiny") }, () => {
  let daemon;
  let sandboxes;

  before(async () => {
    daemon = await startDaemon({ image: "tiny", args: ["--max-per-deployment", "1"] });
    sandboxes = new SandboxClient({ identityToken: await daemon.token() });
  });
  after(async () => {
    await daemon?.stop();
  });

  it("the per-deployment cap is SandboxRequestError 402, freed by delete", async () => {
    await sandboxes.attach("thread-01");
    const err = await sandboxes.attach("thread-42").catch((e) => e);
    assert.ok(err instanceof SandboxRequestError, String(err));
    assert.equal(err.status, 402);
    assert.equal(err.code, "cap_reached");

    // The documented handler deletes thread-01 on a 402 ...
    assert.equal(await documentedHandler(sandboxes, ["true"]), undefined);
    await assert.rejects(sandboxes.get("thread-01"), (e) => e.status === 404);
    // ... after which thread-42 fits.
    assert.equal(await documentedHandler(sandboxes, ["true"]), "ran");
    await sandboxes.delete("thread-42");
  });
});
