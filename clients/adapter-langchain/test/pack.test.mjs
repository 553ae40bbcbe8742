// `npm pack` gives a tarball that works as an installed package: it holds
// dist and the README and nothing else, its manifest names no file: path
// and asks for deepagents as a peer, and it imports from a plain
// node_modules next to the client's tarball. The test reaches no registry:
// the tarballs are unpacked into node_modules (npm install would put them
// there), and the third-party packages they import are linked from this
// package's own node_modules. Both packages must be built first (npm run
// build); packing here runs no scripts, so it never rewrites a dist/ that
// another test is reading.

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, describe, it } from "node:test";

const here = dirname(fileURLToPath(import.meta.url));
const ADAPTER = resolve(here, "..");
const SDK = resolve(here, "../../typescript");

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

  it("holds dist and the README, names no file: dependency, and imports as an installed package", async () => {
    const sdkTgz = (await run("npm", ["pack", "--ignore-scripts", "--silent", "--pack-destination", dir], SDK)).trim().split("\n").pop();
    const tgz = (await run("npm", ["pack", "--ignore-scripts", "--silent", "--pack-destination", dir], ADAPTER)).trim().split("\n").pop();
    const listing = await run("tar", ["tzf", join(dir, tgz)], dir);
    for (const f of ["package/package.json", "package/README.md", "package/dist/index.js", "package/dist/index.d.ts", "package/dist/sandbox.d.ts"]) {
      assert.ok(listing.split("\n").includes(f), `${f} in the tarball`);
    }
    assert.ok(!listing.includes("package/src/") && !listing.includes("package/test/"));

    const manifest = JSON.parse(await run("tar", ["xzOf", join(dir, tgz), "package/package.json"], dir));
    for (const [dep, spec] of Object.entries(manifest.dependencies)) assert.doesNotMatch(spec, /^file:/, `${dep} in dependencies`);
    assert.equal(manifest.dependencies["@sandboxd/client"], "^0.1.0");
    assert.equal(manifest.peerDependencies.deepagents, "^1.14.1");

    const project = join(dir, "project");
    const modules = join(project, "node_modules");
    await run("mkdir", ["-p", join(modules, "@sandboxd/client"), join(modules, "@sandboxd/adapter-langchain"), join(modules, "@langchain")], dir);
    writeFileSync(join(project, "package.json"), JSON.stringify({ name: "scratch", private: true, type: "module" }));
    await run("tar", ["xzf", join(dir, sdkTgz), "-C", join(modules, "@sandboxd/client"), "--strip-components=1"], dir);
    await run("tar", ["xzf", join(dir, tgz), "-C", join(modules, "@sandboxd/adapter-langchain"), "--strip-components=1"], dir);
    for (const dep of ["deepagents", "micromatch", "@langchain/core", "@langchain/langgraph", "langchain"]) {
      symlinkSync(join(ADAPTER, "node_modules", dep), join(modules, dep));
    }
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

    // Its types let a strict TypeScript consumer hand it to createDeepAgent.
    symlinkSync(join(ADAPTER, "node_modules", "@types"), join(modules, "@types"));
    writeFileSync(
      join(project, "check.ts"),
      [
        'import { AstroSandbox, SandboxdSandbox, type SandboxdSandboxOptions } from "@sandboxd/adapter-langchain";',
        'import { SandboxClient } from "@sandboxd/client";',
        'import { createDeepAgent, type SandboxBackendProtocolV2 } from "deepagents";',
        'import { fakeModel } from "@langchain/core/testing";',
        'const options: SandboxdSandboxOptions = { name: "thread-42", timeoutSeconds: 60, client: new SandboxClient() };',
        "const backend: SandboxBackendProtocolV2 = new SandboxdSandbox(options);",
        'createDeepAgent({ model: fakeModel(), backend: new SandboxdSandbox({ name: "thread-42" }) });',
        'const astro: SandboxdSandbox = new AstroSandbox({ name: "t" });',
        "export async function use(): Promise<number | null> {",
        '  const made = await SandboxdSandbox.create({ initialFiles: { "/workspace/a": "x" } });',
        "  const running: boolean = made.isRunning && astro.isRunning;",
        '  const r = await made.execute("true", { timeout: 5 });',
        "  await made.close();",
        "  return running ? r.exitCode : backend.id.length;",
        "}",
      ].join("\n"),
    );
    writeFileSync(
      join(project, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: { strict: true, noEmit: true, module: "NodeNext", moduleResolution: "NodeNext", target: "ES2022", skipLibCheck: true, types: ["node"] },
        files: ["check.ts"],
      }),
    );
    await run("node", [join(ADAPTER, "node_modules/typescript/bin/tsc"), "-p", project], project);
  });
});
