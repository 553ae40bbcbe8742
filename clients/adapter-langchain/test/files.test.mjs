// uploadFiles / downloadFiles / read / write / edit through the native
// file endpoints: deepagents' per-file error names, parents created, paths
// with `//` and `.`, and read's window of lines taken from a stream.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { SandboxClient } from "@sandboxd/client";
import { SandboxdSandbox } from "../dist/index.js";
import { countingFetch, skipReason, startDaemon, uniqueName } from "../../typescript/test/harness.mjs";

const enc = new TextEncoder();
const dec = new TextDecoder();

describe("files", { skip: skipReason("tiny"), timeout: 180_000 }, () => {
  let daemon;
  let sandbox;
  let inside; // another client on the same sandbox
  let name;
  let counts;

  before(async () => {
    daemon = await startDaemon({ image: "tiny" });
    const token = await daemon.token();
    name = uniqueName("files");
    const counting = countingFetch();
    counts = counting.counts;
    sandbox = new SandboxdSandbox({ name, identityToken: token, fetchImpl: counting.fetch, timeoutSeconds: 60 });
    inside = new SandboxClient({ identityToken: token, timeoutSeconds: 60 });
  });
  after(async () => {
    await sandbox?.close().catch(() => {});
    await daemon?.stop();
  });

  const sh = async (line) => (await inside.exec(name, { command: ["/bin/sh", "-c", line] })).stdout;

  describe("uploadFiles", () => {
    it("writes bytes as given, creating parent directories, through paths with // and .", async () => {
      const all = Uint8Array.from({ length: 256 }, (_, i) => i);
      const res = await sandbox.uploadFiles([
        ["/workspace/up//deep/./er/all.bin", all],
        ["/workspace/up/text.txt", enc.encode("héllo ✓\n")],
        ["relative/r.txt", enc.encode("relative to /workspace")],
      ]);
      assert.deepEqual(res, [
        { path: "/workspace/up//deep/./er/all.bin", error: null },
        { path: "/workspace/up/text.txt", error: null },
        { path: "relative/r.txt", error: null },
      ]);
      assert.deepEqual(await inside.readFileBytes(name, "/workspace/up/deep/er/all.bin"), all);
      assert.equal(await inside.readFile(name, "/workspace/up/text.txt"), "héllo ✓\n");
      assert.equal(await inside.readFile(name, "/workspace/relative/r.txt"), "relative to /workspace");
      assert.equal(await sh("wc -c < /workspace/up/deep/er/all.bin"), "256\n");
    });

    it("reports each failure by deepagents' name and writes the rest (partial success)", async () => {
      await sh("mkdir -p /workspace/ro /workspace/adir && chmod 555 /workspace/ro && echo x > /workspace/plain");
      const res = await sandbox.uploadFiles([
        ["/workspace/adir", enc.encode("x")], // a directory
        ["/workspace/ok-1.txt", enc.encode("1")],
        ["/workspace/ro/denied.txt", enc.encode("x")], // the sandbox's own permissions
        ["/proc/denied", enc.encode("x")],
        ["/workspace/plain/under-a-file.txt", enc.encode("x")], // a component is a file
        ["", enc.encode("x")],
        ["/workspace/nul\u0000byte", enc.encode("x")],
        [`/workspace/${"n".repeat(300)}`, enc.encode("x")], // a name over 255 bytes
        ["/workspace/ok-2.txt", enc.encode("2")],
      ]);
      assert.deepEqual(
        res.map((r) => r.error),
        [
          "is_directory",
          null,
          "permission_denied",
          "permission_denied",
          "invalid_path",
          "invalid_path",
          "invalid_path",
          "invalid_path",
          null,
        ],
      );
      assert.equal(await sh("cat /workspace/ok-1.txt /workspace/ok-2.txt"), "12");
      assert.equal(await sh("ls -A /workspace/ro"), "");
    });

    it("applies a batch in order: a later file under an earlier file's path fails, never the earlier one", async () => {
      const res = await sandbox.uploadFiles([
        ["/workspace/order/f", enc.encode("file")],
        ["/workspace/order/f/g", enc.encode("under")],
      ]);
      assert.deepEqual(res, [
        { path: "/workspace/order/f", error: null },
        { path: "/workspace/order/f/g", error: "invalid_path" },
      ]);
    });
  });

  describe("downloadFiles", () => {
    it("returns bytes per path, with file_not_found, is_directory, permission_denied and invalid_path", async () => {
      await inside.writeFileBytes(name, "/workspace/down/b.bin", new Uint8Array([0, 255, 10]));
      await sh("echo s > /workspace/down/secret && chmod 000 /workspace/down/secret");
      const res = await sandbox.downloadFiles([
        "/workspace//down/./b.bin",
        "/workspace/down/missing",
        "/workspace/down",
        "down/b.bin",
        "",
        "/workspace/nul\u0000byte",
        "/workspace/down/secret",
      ]);
      assert.deepEqual(res[0], { path: "/workspace//down/./b.bin", content: new Uint8Array([0, 255, 10]), error: null });
      assert.deepEqual(
        res.slice(1).map((r) => [r.error, r.content]),
        [
          ["file_not_found", null],
          ["is_directory", null],
          [null, new Uint8Array([0, 255, 10])],
          ["invalid_path", null],
          ["invalid_path", null],
          ["permission_denied", null],
        ],
      );
    });
  });

  describe("write and edit (deepagents' own, on the native endpoints)", () => {
    it("write replaces a file and creates parents; edit replaces exactly", async () => {
      assert.deepEqual(await sandbox.write("/workspace/w/x.txt", "a b a\n"), { path: "/workspace/w/x.txt", filesUpdate: null });
      assert.deepEqual(await sandbox.write("/workspace/w/x.txt", "a b a c\n"), { path: "/workspace/w/x.txt", filesUpdate: null });
      assert.equal((await sandbox.edit("/workspace/w/x.txt", "a", "z")).error, "Multiple occurrences found in '/workspace/w/x.txt'. Use replaceAll=true to replace all.");
      assert.equal((await sandbox.edit("/workspace/w/x.txt", "a", "z", true)).occurrences, 2);
      assert.equal((await sandbox.edit("/workspace/w/x.txt", "nope", "z")).error, "String not found in file '/workspace/w/x.txt'");
      assert.equal((await sandbox.edit("/workspace/w/none.txt", "a", "z")).error, "Error: File '/workspace/w/none.txt' not found");
      assert.equal(await inside.readFile(name, "/workspace/w/x.txt"), "z b z c\n");
      assert.match((await sandbox.write("/workspace/adir", "x")).error, /^Failed to write to \/workspace\/adir: is_directory$/);
    });

    it("readRaw returns the file's text, binary files as bytes", async () => {
      const raw = await sandbox.readRaw("/workspace/w/x.txt");
      assert.equal(raw.data.content, "z b z c\n");
      await inside.writeFileBytes(name, "/workspace/w/pic.png", new Uint8Array([137, 80, 78, 71]));
      assert.deepEqual((await sandbox.readRaw("/workspace/w/pic.png")).data.content, new Uint8Array([137, 80, 78, 71]));
    });
  });

  describe("read", () => {
    before(async () => {
      await inside.writeFile(name, "/workspace/r/five.txt", "one\ntwo\nthree\nfour\nfive\n");
      await inside.writeFile(name, "/workspace/r/no-newline.txt", "a\nb");
      await inside.writeFile(name, "/workspace/r/crlf.txt", "a\r\nb\r\n");
      await inside.writeFile(name, "/workspace/r/empty.txt", "");
      await inside.writeFile(name, "/workspace/r/blank.txt", "\n\n");
    });

    it("returns a window of unmodified lines with the window's place in the file", async () => {
      assert.deepEqual(await sandbox.read("/workspace/r/five.txt"), {
        content: "one\ntwo\nthree\nfour\nfive",
        startLine: 1,
        endLine: 5,
        totalLines: 5,
      });
      assert.deepEqual(await sandbox.read("/workspace/r/five.txt", 1, 2), {
        content: "two\nthree",
        startLine: 2,
        endLine: 3,
        totalLines: 5,
        nextOffset: 3,
      });
      assert.deepEqual(await sandbox.read("/workspace/r/five.txt", 3, 100), {
        content: "four\nfive",
        startLine: 4,
        endLine: 5,
        totalLines: 5,
      });
      assert.deepEqual(await sandbox.read("/workspace//r/./five.txt", 4.7, 1.2), {
        content: "five",
        startLine: 5,
        endLine: 5,
        totalLines: 5,
      });
      assert.deepEqual(await sandbox.read("r/five.txt", 0, 0), { content: "" });
    });

    it("counts a last line without a newline, keeps CR, knows empty from blank", async () => {
      assert.deepEqual(await sandbox.read("/workspace/r/no-newline.txt"), { content: "a\nb", startLine: 1, endLine: 2, totalLines: 2 });
      assert.deepEqual(await sandbox.read("/workspace/r/crlf.txt"), { content: "a\r\nb\r", startLine: 1, endLine: 2, totalLines: 2 });
      assert.deepEqual(await sandbox.read("/workspace/r/empty.txt"), { content: "System reminder: File exists but has empty contents" });
      assert.deepEqual(await sandbox.read("/workspace/r/blank.txt"), { content: "\n", startLine: 1, endLine: 2, totalLines: 2 });
    });

    it("says what is wrong: a missing file, a directory, an offset past the end", async () => {
      assert.deepEqual(await sandbox.read("/workspace/r/missing.txt"), { error: "File '/workspace/r/missing.txt' not found" });
      assert.deepEqual(await sandbox.read("/workspace/r"), { error: "File '/workspace/r' not found" });
      assert.deepEqual(await sandbox.read("/workspace/r/five.txt", 5, 10), { error: "Line offset 5 exceeds file length (5 lines)" });
    });

    it("reads a window out of a file far larger than one chunk, multi-byte characters across every boundary", async () => {
      // 400k lines of 3-byte characters: lines and characters straddle every
      // chunk boundary of the download.
      const lines = Array.from({ length: 400_000 }, (_, i) => `${i}:${"✓".repeat(i % 7)}`);
      await inside.writeFile(name, "/workspace/r/big.txt", `${lines.join("\n")}\n`);
      const w = await sandbox.read("/workspace/r/big.txt", 250_000, 3);
      assert.deepEqual(w, {
        content: lines.slice(250_000, 250_003).join("\n"),
        startLine: 250_001,
        endLine: 250_003,
        totalLines: 400_000,
        nextOffset: 250_003,
      });
      const last = await sandbox.read("/workspace/r/big.txt", 399_998, 10);
      assert.equal(last.content, lines.slice(399_998).join("\n"));
      assert.equal(last.nextOffset, undefined);
    });

    it("returns binary files whole, and refuses one over read_file's 10 MiB without reading it", async () => {
      const png = Uint8Array.from({ length: 1000 }, (_, i) => i % 256);
      await inside.writeFileBytes(name, "/workspace/r/small.png", png);
      assert.deepEqual(await sandbox.read("/workspace/r/small.png"), { content: png, mimeType: "image/png" });
      await sh("head -c 12582912 /dev/zero > /workspace/r/huge.pdf");
      assert.deepEqual(await sandbox.read("/workspace/r/huge.pdf"), {
        error: "file too large to read (12MB exceeds 10MB limit for binary files)",
      });
      assert.deepEqual(await sandbox.read("/workspace/r/none.png"), { error: "File '/workspace/r/none.png' not found" });
    });
  });

  it("reached the daemon only through the data plane after one attach", () => {
    assert.equal(counts.attach, 1);
    assert.equal(counts.unauthorized, 0);
  });
});
