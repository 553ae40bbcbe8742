// Wall time of a 20-step scripted deep agent (fakeModel: no model latency,
// so this is the backend's time plus deepagents' own) against sandboxd,
// beside the same script against deepagents' LocalShellBackend (the host's
// shell and filesystem, no isolation), in one run.
//
//   node bench/agent.mjs                      starts its own sandboxd (see ../../typescript/test/harness.mjs)
//   SANDBOXD_TOKEN=... node bench/agent.mjs   uses the server of that token
//   BENCH_RUNS=10 node bench/agent.mjs        more runs of each (default 5)
//
// sandboxd is timed twice: "new" runs each script in a sandbox it creates
// (the attach that creates it is part of the time), "warm" in one that is
// already attached. Median of the runs, and the minimum.

import { execFileSync } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AIMessage, HumanMessage, ToolMessage } from "@langchain/core/messages";
import { fakeModel } from "@langchain/core/testing";
import { createDeepAgent, LocalShellBackend } from "deepagents";
import { SandboxdSandbox } from "../dist/index.js";

// The fetch of the client before the harness wraps it with the contract
// validator, so the validation's cost is not counted against sandboxd.
const rawFetch = globalThis.fetch;
const { skipReason, startDaemon } = await import("../../typescript/test/harness.mjs");

const RUNS = Math.max(1, Number(process.env.BENCH_RUNS || 5));

/** The 20 tool calls, under `root`. */
function script(root) {
  const main = `${root}/src/main.sh`;
  const lib = `${root}/src/lib.sh`;
  const numbers = Array.from({ length: 1000 }, (_, i) => `line ${i}`).join("\n") + "\n";
  return [
    { name: "write_file", args: { file_path: main, content: ". ./lib.sh\ngreet world\n" } },
    { name: "write_file", args: { file_path: lib, content: "greet() {\n  echo \"hello $1\"\n}\n" } },
    { name: "write_file", args: { file_path: `${root}/README.md`, content: "# bench\nTODO: more\n" } },
    { name: "ls", args: { path: root } },
    { name: "ls", args: { path: `${root}/src` } },
    { name: "read_file", args: { file_path: main } },
    { name: "edit_file", args: { file_path: main, old_string: "greet world", new_string: "greet sandbox" } },
    { name: "read_file", args: { file_path: lib, offset: 1, limit: 1 } },
    { name: "glob", args: { pattern: "**/*.sh", path: root } },
    { name: "grep", args: { pattern: "greet", path: root } },
    { name: "execute", args: { command: `cd ${root}/src && sh main.sh` } },
    { name: "execute", args: { command: `ls ${root} | wc -l; echo to-stderr >&2` } },
    { name: "write_file", args: { file_path: `${root}/data/numbers.txt`, content: numbers } },
    { name: "read_file", args: { file_path: `${root}/data/numbers.txt`, offset: 500, limit: 20 } },
    { name: "grep", args: { pattern: "line 99", path: `${root}/data` } },
    { name: "edit_file", args: { file_path: lib, old_string: "hello", new_string: "hi" } },
    { name: "execute", args: { command: `cat ${root}/src/*.sh | wc -c` } },
    { name: "glob", args: { pattern: "**/*", path: root } },
    { name: "write_file", args: { file_path: `${root}/out/result.txt`, content: "done\n" } },
    { name: "read_file", args: { file_path: `${root}/out/result.txt` } },
  ];
}

/** Wraps the methods the tools call, adding their time to `spent.ms`. */
function timed(backend) {
  const spent = { ms: 0 };
  for (const m of ["ls", "read", "write", "edit", "glob", "grep", "execute"]) {
    const f = backend[m].bind(backend);
    backend[m] = async (...args) => {
      const t0 = performance.now();
      try {
        return await f(...args);
      } finally {
        spent.ms += performance.now() - t0;
      }
    };
  }
  return spent;
}

async function runScript(backend, root) {
  const steps = script(root);
  const spent = timed(backend);
  // respond() with tool calls rather than respondWithTools(), whose message
  // content repeats the whole conversation and so doubles at every step.
  let model = fakeModel();
  steps.forEach((call, i) => {
    model = model.respond(new AIMessage({ content: "", tool_calls: [{ ...call, id: `call-${i}`, type: "tool_call" }] }));
  });
  model = model.respond(new AIMessage("done"));
  const agent = createDeepAgent({ model, backend });
  const t0 = performance.now();
  const result = await agent.invoke({ messages: [new HumanMessage("go")] }, { recursionLimit: 200 });
  const ms = performance.now() - t0;
  const tools = result.messages.filter((m) => ToolMessage.isInstance(m));
  if (tools.length !== steps.length) throw new Error(`${tools.length} tool results for ${steps.length} steps`);
  const text = (m) => (typeof m.content === "string" ? m.content : m.content.map((b) => b.text ?? "").join(""));
  const bad = tools.filter((m) => /^Error|not found/.test(text(m)));
  if (bad.length) throw new Error(`a step failed: ${text(bad[0])}`);
  const ran = text(tools[10]);
  if (!ran.startsWith("hello sandbox")) throw new Error(`execute gave ${JSON.stringify(ran)}`);
  return { ms, backendMs: spent.ms };
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

async function main() {
  let daemon;
  let token = process.env.ASTRO_AUTHZ_TOKEN || process.env.SANDBOXD_TOKEN;
  if (!token) {
    const why = skipReason("tiny");
    if (why) {
      console.error(`cannot start sandboxd: ${why}`);
      process.exit(2);
    }
    daemon = await startDaemon({ image: "tiny" });
    token = await daemon.token();
  }
  const times = { local: [], fresh: [], warm: [] };
  const inBackend = { local: [], fresh: [], warm: [] };
  const record = (kind, r) => {
    times[kind].push(r.ms);
    inBackend[kind].push(r.backendMs);
  };
  const open = [];
  try {
    // One untimed run of each first: module loading and JIT warm-up.
    const scratch = await mkdtemp(join(tmpdir(), "bench-agent-"));
    await runScript(await LocalShellBackend.create({ rootDir: scratch, inheritEnv: true }), join(scratch, "w"));
    const warm = new SandboxdSandbox({ name: `bench-warm-${process.pid}`, identityToken: token, fetchImpl: rawFetch });
    open.push(warm);
    await runScript(warm, "/workspace/warmup");

    for (let i = 0; i < RUNS; i++) {
      const dir = await mkdtemp(join(tmpdir(), "bench-agent-"));
      const local = await LocalShellBackend.create({ rootDir: dir, inheritEnv: true });
      record("local", await runScript(local, join(dir, "w")));
      await rm(dir, { recursive: true, force: true });

      const fresh = new SandboxdSandbox({ name: `bench-${process.pid}-${i}`, identityToken: token, fetchImpl: rawFetch });
      open.push(fresh);
      record("fresh", await runScript(fresh, "/workspace/w"));

      record("warm", await runScript(warm, `/workspace/run-${i}`));
    }
    await rm(scratch, { recursive: true, force: true });
  } finally {
    for (const sb of open) await sb.close().catch(() => {});
    await daemon?.stop();
  }

  const ms = (x) => `${x.toFixed(1).padStart(8)} ms`;
  const row = (label, kind) =>
    `${label.padEnd(38)} ${ms(median(times[kind]))} ${ms(Math.min(...times[kind]))} ${ms(median(times[kind]) / 20)} ${ms(median(inBackend[kind]))}`;
  console.log(`20-step scripted deep agent (fakeModel), ${RUNS} runs each, Node ${process.version}`);
  console.log(`${"wall time of agent.invoke".padEnd(38)} ${"median".padStart(11)} ${"min".padStart(11)} ${"per step".padStart(11)} ${"in backend".padStart(11)}`);
  console.log(row("deepagents LocalShellBackend (host)", "local"));
  console.log(row("sandboxd, new sandbox each run", "fresh"));
  console.log(row("sandboxd, sandbox already attached", "warm"));
  let rg = "no rg on PATH: its grep searched in-process";
  try {
    execFileSync("rg", ["--version"], { stdio: "ignore" });
    rg = "its grep used rg";
  } catch {
    // keep the note
  }
  console.log(`(LocalShellBackend: ${rg})`);
  const l = median(times.local);
  console.log(`ratio sandboxd/local: new sandbox ${(median(times.fresh) / l).toFixed(2)}x, attached ${(median(times.warm) / l).toFixed(2)}x`);
}

await main();
// deepagents' FilesystemBackend.grep spawns `rg` with a 30 s timeout that
// stays armed when rg is missing (it then searches in-process): do not wait
// for it.
process.exit(0);
