// Files through the native endpoints: round trips, large bodies, escapes.

import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { existsSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { SandboxClient, SandboxRequestError } from "@sandboxd/client";
import { skipReason, startDaemon, uniqueName } from "./harness.mjs";

const sha256 = (b) => createHash("sha256").update(b).digest("hex");

describe("files", { skip: skipReason("tiny") }, () => {
  let daemon;
  let sandboxes;
  const name = uniqueName("files");

  before(async () => {
    daemon = await startDaemon({ image: "tiny" });
    sandboxes = new SandboxClient({ identityToken: await daemon.token(), timeoutSeconds: 120 });
  });
  after(async () => {
    await sandboxes?.delete(name).catch(() => {});
    await daemon?.stop();
  });

  it("text round trip, relative paths against /workspace, parents created", async () => {
    const text = "héllo wörld ✓ 🚀\nline two\n";
    await sandboxes.writeFile(name, "deep/er/notes.txt", text);
    assert.equal(await sandboxes.readFile(name, "/workspace/deep/er/notes.txt"), text);
    const r = await sandboxes.exec(name, { command: ["cat", "deep/er/notes.txt"] });
    assert.equal(r.stdout, text);
    const entries = await sandboxes.listDir(name, "deep");
    assert.deepEqual(entries, [{ name: "er", isDirectory: true }]);
    await sandboxes.writeFile(name, "deep/er/notes.txt", "");
    assert.equal(await sandboxes.readFile(name, "deep/er/notes.txt"), "");
  });

  it("bytes round trip: every byte value, and what the shell wrote", async () => {
    const all = Uint8Array.from({ length: 256 }, (_, i) => i);
    await sandboxes.writeFileBytes(name, "all.bin", all);
    assert.deepEqual(await sandboxes.readFileBytes(name, "all.bin"), all);
    await sandboxes.exec(name, { command: ["/bin/sh", "-c", "printf 'a\\000b\\377' > /workspace/sh.bin"] });
    assert.deepEqual([...(await sandboxes.readFileBytes(name, "sh.bin"))], [0x61, 0, 0x62, 0xff]);
  });

  it("100 MiB writeFileBytes/readFileBytes round trip is byte-identical", async () => {
    const big = randomBytes(100 * 1024 * 1024);
    const want = sha256(big);
    const t0 = Date.now();
    await sandboxes.writeFileBytes(name, "/workspace/big.bin", big);
    const t1 = Date.now();
    const back = await sandboxes.readFileBytes(name, "/workspace/big.bin");
    const t2 = Date.now();
    assert.equal(back.length, big.length);
    assert.equal(sha256(back), want);
    const inside = await sandboxes.exec(name, { command: ["/bin/sh", "-c", "wc -c < /workspace/big.bin"] });
    assert.equal(inside.stdout.trim(), String(big.length));
    process.stderr.write(`# 100 MiB: write ${(t1 - t0) / 1000} s, read ${(t2 - t1) / 1000} s\n`);
    await sandboxes.exec(name, { command: ["rm", "-f", "/workspace/big.bin"] });
  });

  it("reading a missing file or a directory is 404; listing a missing dir fails", async () => {
    await assert.rejects(sandboxes.readFile(name, "nope.txt"), (e) => e instanceof SandboxRequestError && e.status === 404);
    await assert.rejects(sandboxes.readFileBytes(name, "/nope/x"), (e) => e instanceof SandboxRequestError && e.status === 404);
    await assert.rejects(sandboxes.listDir(name, "/workspace/nope"), (e) => e instanceof SandboxRequestError);
  });

  it("a path escape lands inside the sandbox or is refused; the host is untouched", async () => {
    const tag = `sandboxd-escape-${process.pid}-${Date.now()}`;
    const hostEtc = join("/etc", tag);
    const canary = join(tmpdir(), `${tag}-canary`);
    writeFileSync(canary, "host secret\n");
    try {
      // 1. .. past the root.
      const dotdot = `../../../../etc/${tag}`;
      const wrote = await sandboxes.writeFile(name, dotdot, "x\n").then(
        () => true,
        (e) => {
          assert.ok(e instanceof SandboxRequestError, String(e));
          return false;
        },
      );
      assert.equal(existsSync(hostEtc), false, "a write escaped to the host's /etc");
      if (wrote) {
        const seen = await sandboxes.exec(name, { command: ["cat", `/etc/${tag}`] });
        assert.equal(seen.stdout, "x\n", "the write should have landed in the sandbox's own /etc");
      }
      const readBack = await sandboxes.readFile(name, `../../../..${canary}`).catch((e) => e);
      assert.ok(readBack instanceof SandboxRequestError || readBack !== "host secret\n");

      // 2. Through a symlink to / made inside the sandbox.
      const ln = await sandboxes.exec(name, { command: ["ln", "-sfn", "/", "/workspace/root"] });
      assert.equal(ln.exitCode, 0, ln.stderr);
      await sandboxes.writeFile(name, `/workspace/root/etc/${tag}-link`, "y\n").catch((e) => {
        assert.ok(e instanceof SandboxRequestError, String(e));
      });
      assert.equal(existsSync(`${hostEtc}-link`), false, "a write through a symlink escaped to the host");
      const viaLink = await sandboxes.readFile(name, `/workspace/root${canary}`).catch((e) => e);
      assert.ok(viaLink instanceof SandboxRequestError || viaLink !== "host secret\n", "read the host's file");
    } finally {
      rmSync(canary, { force: true });
      // Never leave a stray file in the host's /etc, even after a failure.
      rmSync(hostEtc, { force: true });
      rmSync(`${hostEtc}-link`, { force: true });
    }
  });

  it("exec output beyond 1 MiB is cut and flagged", async () => {
    const r = await sandboxes.exec(name, {
      command: ["/bin/sh", "-c", "head -c 3000000 /dev/zero | tr '\\0' a"],
    });
    assert.equal(r.exitCode, 0);
    assert.equal(r.truncated, true);
    assert.equal(r.stdout.length, 1024 * 1024);
  });
});
