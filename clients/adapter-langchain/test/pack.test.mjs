// `npm pack` gives tarballs that install into an empty project and import:
// the client's and the adapter's, with the pinned deepagents, from npm's
// local cache only (--offline: the test reaches no registry). Both packages
// must be built first (npm run build); packing here runs no scripts, so it
// never rewrites a dist/ another test is reading.

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, describe, it } from "node:test";

const here = dirname(fileURLToPath(import.meta.url));
const ADAPTER = resolve(here, "..");
const SDK = resolve(here, "../../typescript");
const pinned = JSON.parse(readFileSync(join(ADAPTER, "package.json"), "utf8")).devDependencies.deepagents;

function run(cmd, args, cwd, timeout = 120_000) {
  return new Promise((ok, fail) => {
    execFile(cmd, args, { cwd, timeout, maxBuffer: 8 << 20 }, (err, stdout, stderr) => {
      if (err) {
        err.message += `\n${stdout}\n${stderr}`;
        fail(err);
      } else ok(stdout);
    });
  });
}

const built = existsSync(join(ADAPTER, "dist/index.js")) && existsSync(join(SDK, "dist/index.js"));

describe("the packed tarball", { skip: built ? false : "build both packages first (npm run build)", timeout: 240_000 }, () => {
  let dir;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "adapter-langchain-pack-"));
  });
  after(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("holds dist and the README, and installs and imports into an empty project", async () => {
    const sdkTgz = (await run("npm", ["pack", "--ignore-scripts", "--silent", "--pack-destination", dir], SDK)).trim().split("\n").pop();
    const tgz = (await run("npm", ["pack", "--ignore-scripts", "--silent", "--pack-destination", dir], ADAPTER)).trim().split("\n").pop();
    const listing = await run("tar", ["tzf", join(dir, tgz)], dir);
    for (const f of ["package/package.json", "package/README.md", "package/dist/index.js", "package/dist/index.d.ts", "package/dist/sandbox.d.ts"]) {
      assert.ok(listing.split("\n").includes(f), `${f} in the tarball`);
    }
    assert.ok(!listing.includes("package/src/") && !listing.includes("package/test/"));

    const project = join(dir, "project");
    await run("mkdir", ["-p", project], dir);
    writeFileSync(join(project, "package.json"), JSON.stringify({ name: "scratch", private: true, type: "module" }));
    await run(
      "npm",
      ["install", "--offline", "--no-audit", "--no-fund", "--ignore-scripts", join(dir, sdkTgz), join(dir, tgz), `deepagents@${pinned}`],
      project,
    );
    await run("npm", ["ls", "--silent"], project); // a consistent tree
    writeFileSync(
      join(project, "check.mjs"),
      [
        'import { SandboxdSandbox, AstroSandbox } from "@sandboxd/adapter-langchain";',
        'import { BaseSandbox, createDeepAgent } from "deepagents";',
        'import { fakeModel } from "@langchain/core/testing";',
        'const sb = new SandboxdSandbox({ name: "thread-42", identityToken: "t", serverUrl: "http://127.0.0.1:9" });',
        'if (!(sb instanceof BaseSandbox) || AstroSandbox !== SandboxdSandbox || sb.id !== "thread-42") process.exit(1);',
        'createDeepAgent({ model: fakeModel(), backend: sb });',
        'console.log("imported");',
      ].join("\n"),
    );
    assert.equal((await run("node", ["check.mjs"], project)).trim(), "imported");
  });
});
