// ls (the native listing), glob and grep (find/grep/stat as argv), delete,
// on an image with BusyBox (tiny) and one with GNU tools (debian).

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { SandboxClient } from "@sandboxd/client";
import { SandboxdSandbox } from "../dist/index.js";
import { countingFetch, skipReason, startDaemon, uniqueName } from "../../typescript/test/harness.mjs";

for (const image of ["tiny", "debian"])
describe(`ls, glob, grep, delete (${image})`, { skip: skipReason(image), timeout: 180_000 }, () => {
  let daemon;
  let sandbox;
  let inside;
  let name;
  let requests = [];

  before(async () => {
    daemon = await startDaemon({ image });
    const token = await daemon.token();
    name = uniqueName("search");
    const { fetch } = countingFetch({ onData: (url) => requests.push(url) });
    sandbox = new SandboxdSandbox({ name, identityToken: token, fetchImpl: fetch });
    inside = new SandboxClient({ identityToken: token });
    const files = {
      "/workspace/p/src/a.ts": "export const a = 1; // TODO: a\n",
      "/workspace/p/src/b.js": "const b = 'TODO';\nconst c = 'done';\n",
      "/workspace/p/src/deep/c.ts": "// TODO(c): [x] $1 .* \\n\nplain\n",
      "/workspace/p/.hidden.ts": "TODO hidden\n",
      "/workspace/p/README.md": "# p\nTODO: docs\n",
      "/workspace/p/we:ird 12:name.txt": "TODO colon\n",
      "/workspace/p/image.png": "TODO in a png\n",
      "/workspace/p/it's \"quoted\" $(x).txt": "quoted TODO\n",
    };
    for (const [path, text] of Object.entries(files)) await inside.writeFile(name, path, text);
    await inside.exec(name, { command: ["sh", "-c", "printf 'TODO\\000\\001bin\\n' > /workspace/p/blob.dat; mkdir -p /workspace/p/empty-dir"] });
  });
  after(async () => {
    await sandbox?.close().catch(() => {});
    await daemon?.stop();
  });

  describe("ls", () => {
    it("lists natively: absolute paths, directories marked, sorted", async () => {
      requests = [];
      const { files } = await sandbox.ls("/workspace//p/.");
      assert.deepEqual(
        files.map((f) => [f.path, f.is_dir]),
        [
          ["/workspace/p/.hidden.ts", false],
          ["/workspace/p/README.md", false],
          ["/workspace/p/blob.dat", false],
          ["/workspace/p/empty-dir/", true],
          ["/workspace/p/image.png", false],
          ["/workspace/p/it's \"quoted\" $(x).txt", false],
          ["/workspace/p/src/", true],
          ["/workspace/p/we:ird 12:name.txt", false],
        ],
      );
      assert.equal(requests.length, 1);
      assert.match(requests[0], /\/files\/list\?path=/, "the native listing, not a shell");
    });

    it("lists nothing for a missing path or a file; / and relative paths work", async () => {
      assert.deepEqual(await sandbox.ls("/workspace/nope"), { files: [] });
      assert.deepEqual(await sandbox.ls("/workspace/p/README.md"), { files: [] });
      assert.ok((await sandbox.ls("/")).files.some((f) => f.path === "/workspace/"));
      assert.deepEqual((await sandbox.ls("p/src")).files.map((f) => f.path), ["/workspace/p/src/a.ts", "/workspace/p/src/b.js", "/workspace/p/src/deep/"]);
    });
  });

  describe("glob", () => {
    const paths = async (pattern, path) => {
      const r = await sandbox.glob(pattern, path);
      assert.equal(r.error, undefined);
      return r.files.map((f) => f.path);
    };

    it("matches ** across directories and * within one, dot files included", async () => {
      assert.deepEqual(await paths("**/*.ts", "/workspace/p"), ["/workspace/p/.hidden.ts", "/workspace/p/src/a.ts", "/workspace/p/src/deep/c.ts"]);
      assert.deepEqual(await paths("*.ts", "/workspace/p"), ["/workspace/p/.hidden.ts"]);
      assert.deepEqual(await paths("src/*", "/workspace/p"), ["/workspace/p/src/a.ts", "/workspace/p/src/b.js", "/workspace/p/src/deep"]);
      assert.deepEqual(await paths("src/**/*.{ts,js}", "/workspace/p"), ["/workspace/p/src/a.ts", "/workspace/p/src/b.js", "/workspace/p/src/deep/c.ts"]);
      assert.deepEqual(await paths("**/?.ts", "/workspace/p/src"), ["/workspace/p/src/a.ts", "/workspace/p/src/deep/c.ts"]);
    });

    it("reports sizes, times and directories", async () => {
      const { files } = await sandbox.glob("src/*", "/workspace/p");
      const a = files.find((f) => f.path.endsWith("a.ts"));
      assert.equal(a.size, 31);
      assert.equal(a.is_dir, false);
      assert.ok(Math.abs(Date.parse(a.modified_at) - Date.now()) < 10 * 60_000);
      assert.equal(files.find((f) => f.path.endsWith("deep")).is_dir, true);
    });

    it("takes absolute patterns, patterns from /, relative and odd paths", async () => {
      assert.deepEqual(await paths("/workspace/p/src/*.ts", "/workspace/p"), ["/workspace/p/src/a.ts"]);
      assert.deepEqual(await paths("/workspace/p/src/*.ts", "/"), ["/workspace/p/src/a.ts"]);
      assert.deepEqual(await paths("workspace/p/**/c.ts"), ["/workspace/p/src/deep/c.ts"]);
      assert.deepEqual(await paths("*.txt", "p"), ["/workspace/p/it's \"quoted\" $(x).txt", "/workspace/p/we:ird 12:name.txt"]);
      assert.deepEqual(await paths("*.md", "/workspace//p/./"), ["/workspace/p/README.md"]);
      assert.deepEqual(await paths("**/*.ts", "/workspace/missing"), []);
    });

    it("never walks /proc, /sys or /dev", async () => {
      const all = await paths("**/status", "/");
      assert.ok(!all.some((p) => /^\/(proc|sys|dev|run)\//.test(p)), all.slice(0, 5).join(", "));
    });
  });

  describe("grep", () => {
    const found = async (...args) => {
      const r = await sandbox.grep(...args);
      assert.equal(r.error, undefined);
      return r.matches.map((m) => `${m.path}:${m.line}:${m.text}`).sort();
    };

    it("searches literally, recursively, skipping binary files", async () => {
      assert.deepEqual(await found("TODO", "/workspace/p"), [
        "/workspace/p/.hidden.ts:1:TODO hidden",
        "/workspace/p/README.md:2:TODO: docs",
        "/workspace/p/it's \"quoted\" $(x).txt:1:quoted TODO",
        "/workspace/p/src/a.ts:1:export const a = 1; // TODO: a",
        "/workspace/p/src/b.js:1:const b = 'TODO';",
        "/workspace/p/src/deep/c.ts:1:// TODO(c): [x] $1 .* \\n",
        "/workspace/p/we:ird 12:name.txt:1:TODO colon",
      ]);
      assert.deepEqual(await found("[x] $1 .* \\n", "/workspace/p"), ["/workspace/p/src/deep/c.ts:1:// TODO(c): [x] $1 .* \\n"]);
      assert.deepEqual(await found(".*", "/workspace/p"), ["/workspace/p/src/deep/c.ts:1:// TODO(c): [x] $1 .* \\n"]);
    });

    it("filters by a glob on the file name, searches one file, takes options as patterns", async () => {
      assert.deepEqual(await found("TODO", "/workspace/p", "*.ts"), [
        "/workspace/p/.hidden.ts:1:TODO hidden",
        "/workspace/p/src/a.ts:1:export const a = 1; // TODO: a",
        "/workspace/p/src/deep/c.ts:1:// TODO(c): [x] $1 .* \\n",
      ]);
      assert.deepEqual(await found("const", "/workspace/p/src/b.js"), ["/workspace/p/src/b.js:1:const b = 'TODO';", "/workspace/p/src/b.js:2:const c = 'done';"]);
      await inside.writeFile(name, "/workspace/q/opts.txt", "-v\n--help\nplain\n");
      assert.deepEqual(await found("-v", "/workspace/q"), ["/workspace/q/opts.txt:1:-v"]);
      assert.deepEqual(await found("--help", "q"), ["/workspace/q/opts.txt:2:--help"]);
    });

    it("finds nothing under a missing path; caps matches at maxCount and says so", async () => {
      assert.deepEqual(await sandbox.grep("TODO", "/workspace/none"), { matches: [] });
      const capped = await sandbox.grep("TODO", "/workspace/p", null, 2);
      assert.equal(capped.matches.length, 2);
      assert.equal(capped.truncated, true);
    });

    it("marks a search cut at exec's output cap as truncated, keeping whole lines", async () => {
      await inside.exec(name, {
        command: ["sh", "-c", "mkdir -p /workspace/many && i=0; while [ $i -lt 30000 ]; do echo \"needle line $i padding padding\"; i=$((i+1)); done > /workspace/many/m.txt"],
      });
      const r = await sandbox.grep("needle", "/workspace/many");
      assert.equal(r.truncated, true);
      assert.ok(r.matches.length > 1000 && r.matches.length < 30000, `${r.matches.length}`);
      for (const m of r.matches) assert.match(m.text, /^needle line \d+ padding padding$/);
    });
  });

  describe("delete", () => {
    it("deletes files and directories (recursively), and says when there is nothing", async () => {
      const odd = "/workspace/p/it's \"quoted\" $(x).txt";
      assert.deepEqual(await sandbox.delete(odd), { path: odd, filesUpdate: null });
      assert.deepEqual(await sandbox.delete("/workspace//p/src/."), { path: "/workspace//p/src/.", filesUpdate: null });
      assert.deepEqual((await sandbox.ls("/workspace/p")).files.map((f) => f.path).filter((p) => /src|quoted/.test(p)), []);
      assert.deepEqual(await sandbox.delete("/workspace/p/src"), { error: "Error: '/workspace/p/src' not found" });
      assert.equal((await inside.exec(name, { command: ["ls", "/workspace/p"] })).exitCode, 0);
    });
  });
});
