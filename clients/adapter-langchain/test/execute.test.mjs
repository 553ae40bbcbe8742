// execute: combined output in the order it was written, the exit code,
// truncation at exec's cap, timeouts, the shell's own errors.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { SandboxdSandbox } from "../dist/index.js";
import { skipReason, startDaemon, uniqueName } from "../../typescript/test/harness.mjs";

describe("execute", { skip: skipReason("tiny"), timeout: 120_000 }, () => {
  let daemon;
  let sandbox;

  before(async () => {
    daemon = await startDaemon({ image: "tiny" });
    sandbox = new SandboxdSandbox({ name: uniqueName("exec"), identityToken: await daemon.token(), timeoutSeconds: 20 });
  });
  after(async () => {
    await sandbox?.close().catch(() => {});
    await daemon?.stop();
  });

  it("interleaves stdout and stderr exactly as written, and returns the exit code", async () => {
    // No pauses: two separately captured streams could not be put back in
    // this order; one pipe keeps it.
    const r = await sandbox.execute(
      "i=0; while [ $i -lt 200 ]; do echo out$i; echo err$i >&2; printf 'p%s ' $i; printf 'q%s\\n' $i >&2; i=$((i+1)); done; exit 7",
    );
    const want = Array.from({ length: 200 }, (_, i) => `out${i}\nerr${i}\np${i} q${i}\n`).join("");
    assert.equal(r.output, want);
    assert.equal(r.exitCode, 7);
    assert.equal(r.truncated, false);
  });

  it("covers every command of a list or pipeline, and the shell's own errors", async () => {
    let r = await sandbox.execute("echo a >&2 | cat; (echo b >&2); no-such-command-here");
    assert.match(r.output, /^a\nb\n.*no-such-command-here.*not found\n$/s);
    assert.equal(r.exitCode, 127);
    r = await sandbox.execute("echo before; if then");
    assert.match(r.output, /syntax error/);
    assert.notEqual(r.exitCode, 0);
  });

  it("runs in /workspace with a shell line (quotes, newlines inside quotes, &&)", async () => {
    const r = await sandbox.execute("pwd && printf '%s|' \"a b\" 'c\nd' && echo");
    assert.equal(r.output, "/workspace\na b|c\nd|\n");
    assert.equal(r.exitCode, 0);
  });

  it("sets truncated past exec's 1 MiB cap, the command still running to its end", async () => {
    const r = await sandbox.execute("head -c 3000000 /dev/zero | tr '\\0' x; echo >&2 tail; echo done > /workspace/ran-to-end");
    assert.equal(r.truncated, true);
    assert.equal(r.exitCode, 0);
    assert.ok(r.output.length >= 1 << 20 && r.output.length < 3_000_000, `output of ${r.output.length}`);
    assert.match(r.output, /^x+/);
    assert.equal((await sandbox.execute("cat /workspace/ran-to-end")).output, "done\n");
  });

  it("kills a command at its timeout and says so", async () => {
    const t0 = Date.now();
    const r = await sandbox.execute("echo started; sleep 10; echo never", { timeout: 1 });
    assert.ok(Date.now() - t0 < 8000);
    assert.equal(r.output, "started\nError: Command timed out after 1.0 seconds.");
    assert.equal(r.exitCode, 137);
  });

  it("passes output that is not UTF-8 with the bad bytes replaced", async () => {
    const r = await sandbox.execute("printf 'ok\\377\\n'");
    assert.equal(r.output, "ok\uFFFD\n");
  });
});
