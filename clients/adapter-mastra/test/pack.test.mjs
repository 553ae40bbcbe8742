// `npm pack` gives a tarball that installs into an empty project (with the
// client's tarball, and @mastra/core and zod from npm's cache: offline, as
// `npm install` here put them there) and runs the README's two-line example
// against a real daemon on loopback, the token from the environment.

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { skipReason, startDaemon, uniqueName } from "./helpers.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const pkg = resolve(here, "..");
const client = resolve(here, "../../typescript");

function run(cmd, args, options = {}) {
  return new Promise((resolveRun, reject) => {
    execFile(cmd, args, { timeout: 240_000, maxBuffer: 8 << 20, ...options }, (err, stdout, stderr) => {
      if (err) {
        err.message += `\n${stdout}\n${stderr}`;
        reject(err);
      } else resolveRun(stdout);
    });
  });
}

describe("the packed tarball", { skip: skipReason("tiny"), timeout: 300_000 }, () => {
  let dir;
  let daemon;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "adapter-mastra-pack-"));
    daemon = await startDaemon({ image: "tiny" });
  });
  after(async () => {
    await daemon?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("installs into an empty project and runs the two-line example", async (t) => {
    // Both packages are built already (npm test builds this one; the SDK's is a dependency).
    await run("npm", ["pack", "--ignore-scripts", "--silent", "--pack-destination", dir], { cwd: client });
    await run("npm", ["pack", "--ignore-scripts", "--silent", "--pack-destination", dir], { cwd: pkg });
    const tarballs = (await readdir(dir)).filter((f) => f.endsWith(".tgz")).sort();
    assert.deepEqual(tarballs, ["sandboxd-adapter-mastra-0.1.0.tgz", "sandboxd-client-0.1.0.tgz"]);

    const app = join(dir, "app");
    await run("mkdir", ["-p", app]);
    await writeFile(join(app, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
    try {
      await run(
        "npm",
        [
          "install",
          "--offline",
          "--no-audit",
          "--no-fund",
          "--loglevel=error",
          join(dir, tarballs[1]),
          join(dir, tarballs[0]),
          "@mastra/core@1.71.0",
          "zod@4.6.7",
        ],
        { cwd: app },
      );
    } catch (err) {
      if (!/ENOTCACHED/.test(err.message)) throw err;
      t.skip("npm's cache lacks @mastra/core 1.71.0 or its dependencies: run npm install in clients/adapter-mastra");
      return;
    }
    const files = await run("npm", ["ls", "--parseable", "--depth=0"], { cwd: app });
    assert.match(files, /@sandboxd\/adapter-mastra/);

    await writeFile(
      join(app, "main.mjs"),
      `import { Workspace } from "@mastra/core/workspace";
import { AstroSandbox, SandboxdFilesystem, SandboxdSandbox } from "@sandboxd/adapter-mastra";

const workspace = new Workspace({ sandbox: new SandboxdSandbox({ name: process.argv[2] }) });
await workspace.init();
const r = await workspace.sandbox.executeCommand("echo from-the-tarball");
const fs = new SandboxdFilesystem({ sandbox: workspace.sandbox });
await fs.writeFile("x.txt", "x");
console.log(JSON.stringify({ out: r.stdout, alias: AstroSandbox === SandboxdSandbox, file: await fs.readFile("x.txt", { encoding: "utf-8" }) }));
await workspace.destroy();
`,
    );
    const token = await daemon.token();
    const env = { ...process.env, SANDBOXD_TOKEN: token, MASTRA_TELEMETRY_DISABLED: "1" };
    delete env.ASTRO_AUTHZ_TOKEN;
    const out = await run(process.execPath, ["main.mjs", uniqueName("pack")], { cwd: app, env });
    assert.deepEqual(JSON.parse(out.trim().split("\n").pop()), { out: "from-the-tarball\n", alias: true, file: "x" });

    // The types ship too.
    const types = await run("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], { cwd: pkg });
    const listed = JSON.parse(types)[0].files.map((f) => f.path);
    for (const f of ["dist/index.js", "dist/index.d.ts", "dist/sandbox.d.ts", "README.md", "package.json"]) {
      assert.ok(listed.includes(f), `${f} in the tarball`);
    }
    assert.ok(!listed.some((f) => f.startsWith("test/") || f.startsWith("src/")), "only what is needed");
  });
});
