// Wall time of one 20-step scripted Mastra agent run (file tools, commands,
// a background process) in a sandboxd sandbox through this adapter, beside
// the same run on Mastra's own local backend (LocalSandbox and
// LocalFilesystem in a temporary directory on the host), in one run.
//
//   node bench/agent.mjs                   starts its own sandboxd (as the tests do)
//   BENCH_RUNS=5 node bench/agent.mjs      runs per backend (default 3; the median is reported)
//   BENCH_IMAGE=debian node bench/agent.mjs
//
// Each run is a fresh sandbox (or directory). The sandboxd figure includes
// creating the sandbox on the first tool call; the start alone is reported
// beside it. The daemon's answers are not checked against the contract
// here (the tests do that), so the figures are the adapter's and the
// server's own.

import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";

const rawFetch = globalThis.fetch;
const { skipReason, startDaemon } = await import("../../typescript/test/harness.mjs");
const { Agent } = await import("@mastra/core/agent");
const { LocalFilesystem, LocalSandbox, Workspace } = await import("@mastra/core/workspace");
const { SandboxdFilesystem, SandboxdSandbox } = await import("@sandboxd/adapter-mastra");
const { T, scriptedModel } = await import("../test/helpers.mjs");

const RUNS = Math.max(1, Number(process.env.BENCH_RUNS || 3));
const IMAGE = process.env.BENCH_IMAGE || "tiny";

const MAIN = 'i=0; s=0\nwhile [ $i -lt 200 ]; do s=$((s+i)); i=$((i+1)); done\necho "sum=$s"\n';
const CSV = `id,value\n${Array.from({ length: 100 }, (_, i) => `${i},${i * i}`).join("\n")}\n`;

/** The script: 20 steps with one tool call each, then the answer. */
function script(check) {
  return [
    [{ tool: T.mkdir, input: { path: "app/src" } }],
    [{ tool: T.write, input: { path: "app/src/main.sh", content: MAIN } }],
    [{ tool: T.write, input: { path: "app/README.md", content: "# app\nTODO: document\n" } }],
    [{ tool: T.write, input: { path: "app/src/util.sh", content: "echo util\n" } }],
    [{ tool: T.read, input: { path: "app/src/main.sh" } }],
    [{ tool: T.edit, input: { path: "app/src/main.sh", old_string: "-lt 200", new_string: "-lt 300" } }],
    [{ tool: T.exec, input: { command: "sh app/src/main.sh" } }],
    ({ results }) => {
      check(results[0].output === "sum=44850\n", `exec: ${results[0].output}`);
      return [{ tool: T.list, input: { path: "app" } }];
    },
    [{ tool: T.grep, input: { pattern: "sum", path: "app" } }],
    [{ tool: T.stat, input: { path: "app/src/main.sh" } }],
    [{ tool: T.exec, input: { command: "ls app/src | wc -l" } }],
    [{ tool: T.exec, input: { command: "for i in 1 2 3; do echo tick $i; done", background: true } }],
    ({ results }) => {
      const pid = /PID: ([A-Za-z0-9-]+)/.exec(results[0].output)?.[1];
      check(pid, `background: ${results[0].output}`);
      return [{ tool: T.output, input: { pid, wait: true } }];
    },
    ({ results }) => {
      check(results[0].output.includes("tick 3"), `output: ${results[0].output}`);
      return [{ tool: T.write, input: { path: "app/data.csv", content: CSV } }];
    },
    [{ tool: T.exec, input: { command: "wc -l < app/data.csv" } }],
    [{ tool: T.read, input: { path: "app/data.csv", offset: 10, limit: 5 } }],
    [{ tool: T.edit, input: { path: "app/README.md", old_string: "TODO: document", new_string: "Sums numbers." } }],
    [{ tool: T.grep, input: { pattern: "TODO", path: "app" } }],
    [{ tool: T.del, input: { path: "app/src/util.sh" } }],
    [{ tool: T.exec, input: { command: "head -1 app/src/main.sh; ls app/src" } }],
    ({ results }) => {
      check(results[0].output === "i=0; s=0\nmain.sh\n", `last: ${results[0].output}`);
      return "done";
    },
  ];
}

async function runOnce(workspace) {
  const failures = [];
  const { model } = scriptedModel(script((ok, what) => ok || failures.push(what)));
  const agent = new Agent({ id: "bench", name: "bench", instructions: "Work in the workspace.", model, workspace });
  const t0 = performance.now();
  const result = await agent.generate("Build the app.", { maxSteps: 30 });
  const ms = performance.now() - t0;
  assert.equal(result.text, "done");
  assert.deepEqual(failures, []);
  return ms;
}

async function sandboxdRun(token, i) {
  const sandbox = new SandboxdSandbox({ name: `bench-agent-${process.pid}-${i}`, identityToken: token, fetchImpl: rawFetch });
  const workspace = new Workspace({ sandbox, filesystem: new SandboxdFilesystem({ sandbox }) });
  try {
    return await runOnce(workspace);
  } finally {
    await workspace.destroy();
  }
}

async function sandboxdStart(token, i) {
  const sandbox = new SandboxdSandbox({ name: `bench-start-${process.pid}-${i}`, identityToken: token, fetchImpl: rawFetch });
  const t0 = performance.now();
  await sandbox.start();
  const ms = performance.now() - t0;
  await sandbox.destroy();
  return ms;
}

async function localRun() {
  const dir = await mkdtemp(join(tmpdir(), "bench-agent-local-"));
  const workspace = new Workspace({
    sandbox: new LocalSandbox({ workingDirectory: dir }),
    filesystem: new LocalFilesystem({ basePath: dir }),
  });
  try {
    return await runOnce(workspace);
  } finally {
    await workspace.destroy();
    await rm(dir, { recursive: true, force: true });
  }
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const fmt = (ms) => `${ms.toFixed(0)} ms`;

async function main() {
  let daemon;
  let token = process.env.ASTRO_AUTHZ_TOKEN || process.env.SANDBOXD_TOKEN;
  if (!token) {
    const why = skipReason(IMAGE);
    if (why) {
      console.error(`cannot start sandboxd: ${why}`);
      process.exit(2);
    }
    daemon = await startDaemon({ image: IMAGE });
    token = await daemon.token();
  }
  try {
    // One warm-up each (module loading, JIT), not counted.
    await localRun();
    await sandboxdRun(token, "warm");
    const sd = [];
    const local = [];
    const starts = [];
    for (let i = 0; i < RUNS; i++) {
      sd.push(await sandboxdRun(token, i));
      local.push(await localRun());
      starts.push(await sandboxdStart(token, i));
    }
    const a = median(sd);
    const b = median(local);
    console.log(`20-step scripted Mastra agent (@mastra/core 1.71.0, Node ${process.version}), ${RUNS} run(s) each, median:`);
    console.log(`  sandboxd (image ${IMAGE}):              ${fmt(a).padStart(8)}   runs: ${sd.map(fmt).join(", ")}`);
    console.log(`    of which creating the sandbox, alone:  ${fmt(median(starts)).padStart(8)}`);
    console.log(`  Mastra LocalSandbox + LocalFilesystem: ${fmt(b).padStart(8)}   runs: ${local.map(fmt).join(", ")}`);
    console.log(`  ratio sandboxd / local: ${(a / b).toFixed(2)}x (${((a - b) / 20).toFixed(1)} ms more per step)`);
  } finally {
    await daemon?.stop();
  }
}

await main();
