// Every code example of the documented SandboxClient, as written there but
// for the import and the token, run against a real sandboxd.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { SandboxClient } from "@sandboxd/client";
import * as subpath from "@sandboxd/client/sandbox";
import { skipReason, startDaemon } from "./harness.mjs";

const EMPTY_WORKSPACE = "cd / && rm -rf /workspace/* /workspace/.[!.]* /workspace/..?*";

/** Stand-ins for `console` and `process.stdout` that record what an example prints. */
function recorder() {
  const lines = [];
  const written = [];
  return {
    lines,
    written,
    console: { log: (...a) => lines.push(a.join(" ")), warn: (...a) => lines.push(`warn: ${a.join(" ")}`) },
    process: { stdout: { write: (s) => written.push(s) } },
  };
}

describe("documented examples (tiny image)", { skip: skipReason("tiny") }, () => {
  let daemon;
  let token;
  let sandboxes;

  before(async () => {
    daemon = await startDaemon({ image: "tiny" });
    token = await daemon.token();
    sandboxes = new SandboxClient({ identityToken: token });
  });
  after(async () => {
    await daemon?.stop();
  });

  it("exports SandboxClient from the root and from /sandbox", () => {
    assert.equal(subpath.SandboxClient, SandboxClient);
    assert.equal(typeof subpath.SandboxRequestError, "function");
  });

  it("zero-argument construction: token from ASTRO_AUTHZ_TOKEN, server from its iss", async () => {
    const saved = process.env.ASTRO_AUTHZ_TOKEN;
    process.env.ASTRO_AUTHZ_TOKEN = token;
    try {
      const sandboxes = new SandboxClient();

      const result = await sandboxes.exec("thread-42", {
        command: ["/bin/sh", "-c", "echo $((2 + 2))"],
      });

      assert.equal(result.stdout, "4\n");
      assert.equal(result.exitCode, 0);
    } finally {
      if (saved === undefined) delete process.env.ASTRO_AUTHZ_TOKEN;
      else process.env.ASTRO_AUTHZ_TOKEN = saved;
    }
  });

  it("attach returns a handle", async () => {
    const handle = await sandboxes.attach("thread-42");

    assert.equal(handle.name, "thread-42");
    assert.equal(handle.class, "default");
    assert.equal(handle.state, "running");
    assert.match(handle.endpoint, /^https?:\/\//);
    assert.equal(typeof handle.headers, "object");
    assert.ok(Object.keys(handle.headers).length > 0);
    const left = Date.parse(handle.expiresAt) - Date.now();
    assert.ok(left > 60_000 && left <= 15 * 60_000 + 5_000, `expiresAt ${handle.expiresAt}`);
  });

  it("argv is not a shell line, so a shell line needs an explicit shell", async () => {
    await sandboxes.exec("thread-42", { command: ["/bin/sh", "-c", `${EMPTY_WORKSPACE}; cd /workspace && touch a b c`] });

    const r = await sandboxes.exec("thread-42", {
      command: ["/bin/sh", "-c", "ls -1 | wc -l"],
    });

    assert.equal(r.exitCode, 0);
    assert.equal(r.stdout.trim(), "3");
  });

  it("exec with cwd, env and timeoutMs", async () => {
    const result = await sandboxes.exec("thread-42", {
      command: ["/bin/sh", "-c", 'echo "$NODE_ENV $(pwd)"'],
      cwd: "/workspace",
      env: { NODE_ENV: "production" },
      timeoutMs: 5_000,
    });

    if (result.exitCode !== 0) throw new Error(result.stderr);
    assert.equal(result.stdout, "production /workspace\n");
    assert.equal(result.timedOut, false);
    assert.equal(result.truncated, false);
    assert.equal(typeof result.durationMs, "number");
  });

  it("execCombined folds stderr into stdout", async () => {
    const { output, exitCode } = await sandboxes.execCombined(
      "thread-42",
      "npm test | tail -20",
    );

    // npm complains on stderr (the tiny image has no npm at all: then it is
    // the shell that complains); either way the complaint shows up in the
    // combined output, and the pipeline's status is tail's.
    assert.match(output, /npm/);
    assert.equal(exitCode, 0);

    const mixed = await sandboxes.execCombined("thread-42", "echo one; echo two >&2; echo three");
    assert.equal(mixed.output, "one\ntwo\nthree\n");
    assert.equal(mixed.truncated, false);
  });

  it("spawn returns at once", async () => {
    const proc = await sandboxes.spawn("thread-42", {
      command: ["npm", "run", "dev"],
    });

    assert.equal(typeof proc.processId, "string");
    assert.deepEqual(proc.command, ["npm", "run", "dev"]);
    assert.ok(proc.state === "running" || proc.state === "exited");
    assert.ok(!Number.isNaN(Date.parse(proc.startedAt)));
    await sandboxes.kill("thread-42", proc.processId);
  });

  it("the poll loop reads a spawned process to its end", async () => {
    const rec = recorder();
    const { console, process } = rec;
    const proc = await sandboxes.spawn("thread-42", {
      command: ["/bin/sh", "-c", "for i in 1 2 3; do echo line $i; sleep 0.3; done; echo oops >&2; exit 3"],
    });

    let stdoutFrom = 0;
    let stderrFrom = 0;
    let last;

    for (;;) {
      const chunk = await sandboxes.poll("thread-42", proc.processId, {
        stdoutFrom,
        stderrFrom,
      });
      stdoutFrom = chunk.stdoutNext;
      stderrFrom = chunk.stderrNext;

      if (chunk.stdoutDropped > 0) console.warn(`lost ${chunk.stdoutDropped} bytes`);
      process.stdout.write(chunk.stdout);

      last = chunk;
      if (chunk.state === "exited") break;
      await new Promise((r) => setTimeout(r, 500));
    }

    assert.equal(rec.written.join(""), "line 1\nline 2\nline 3\n");
    assert.deepEqual(rec.lines, []);
    assert.equal(last.exitCode, 3);
    assert.equal(stdoutFrom, 21);
    assert.ok(last.exitedAt);
    const tail = await sandboxes.poll("thread-42", proc.processId, { stderrFrom: 0, stdoutFrom });
    assert.equal(tail.stderr, "oops\n");
    assert.equal(tail.stdout, "");
    await sandboxes.kill("thread-42", proc.processId);
  });

  it("processes and kill reap what was spawned", async () => {
    await sandboxes.spawn("thread-42", { command: ["sleep", "60"] });
    await sandboxes.spawn("thread-42", { command: ["/bin/sh", "-c", "sleep 60 & sleep 60; wait"] });
    assert.ok((await sandboxes.processes("thread-42")).some((p) => p.state === "running"));

    for (const p of await sandboxes.processes("thread-42")) {
      if (p.state === "running") await sandboxes.kill("thread-42", p.processId);
    }

    const left = await sandboxes.processes("thread-42");
    assert.equal(left.filter((p) => p.state === "running").length, 0);
  });

  it("files and search", async () => {
    const rec = recorder();
    const { console } = rec;
    await sandboxes.exec("thread-42", { command: ["/bin/sh", "-c", EMPTY_WORKSPACE] });
    await sandboxes.exec("thread-42", { command: ["mkdir", "-p", "/workspace/src"] });
    await sandboxes.writeFile("thread-42", "/workspace/src/todo.txt", "first\n# TODO: write tests\n");

    await sandboxes.writeFile("thread-42", "/workspace/main.py", "print('hi')\n");

    for (const entry of await sandboxes.listDir("thread-42", "/workspace")) {
      console.log(entry.isDirectory ? `${entry.name}/` : entry.name);
    }

    const matches = await sandboxes.grep("thread-42", "TODO", "/workspace");
    for (const m of matches) console.log(`${m.path}:${m.line}: ${m.text}`);

    const lines = rec.lines;
    assert.deepEqual(lines.slice(0, 2).sort(), ["main.py", "src/"]);
    assert.deepEqual(lines.slice(2), ["/workspace/src/todo.txt:2: # TODO: write tests"]);
    assert.equal(await sandboxes.readFile("thread-42", "/workspace/main.py"), "print('hi')\n");
    assert.deepEqual(await sandboxes.grep("thread-42", "no-such-thing-anywhere", "/workspace"), []);
    // listDir and grep default to "." (the working directory, /workspace).
    assert.equal((await sandboxes.listDir("thread-42")).length, 2);
    assert.deepEqual(
      (await sandboxes.grep("thread-42", "TODO")).map((m) => m.line),
      [2],
    );
  });

  it("inspecting and ending a sandbox", async () => {
    const rec = recorder();
    const { console } = rec;
    await sandboxes.attach("thread-42");

    for (const row of await sandboxes.list()) {
      console.log(row.name, row.state, row.ceilingAt);
    }

    const lines = rec.lines;
    const row = lines.find((l) => l.startsWith("thread-42 "));
    assert.ok(row, lines.join("\n"));
    const [, state, ceilingAt] = row.split(" ");
    assert.equal(state, "running");
    assert.ok(!Number.isNaN(Date.parse(ceilingAt)), `ceilingAt ${ceilingAt}`);

    await sandboxes.stop("thread-42");   // suspends compute early
    assert.notEqual((await sandboxes.get("thread-42")).state, "running");
    // Any use resumes it, files intact.
    const r = await sandboxes.exec("thread-42", { command: ["cat", "/workspace/main.py"] });
    assert.equal(r.stdout, "print('hi')\n");

    await sandboxes.delete("thread-42"); // drops the sandbox and its filesystem
    await assert.rejects(sandboxes.get("thread-42"), (err) => err.status === 404);
    // A later attach creates an empty one.
    const after = await sandboxes.exec("thread-42", { command: ["ls", "-A", "/workspace"] });
    assert.equal(after.stdout, "");
    await sandboxes.delete("thread-42");
  });
});

describe("documented examples (debian image: python3, node, npm)", { skip: skipReason("debian") }, () => {
  let daemon;
  let sandboxes;

  before(async () => {
    daemon = await startDaemon({ image: "debian" });
    sandboxes = new SandboxClient({ identityToken: await daemon.token(), timeoutSeconds: 60 });
  });
  after(async () => {
    await daemon?.stop();
  });

  it("exec python3", async () => {
    const result = await sandboxes.exec("thread-42", {
      command: ["python3", "-c", "print(2 + 2)"],
    });

    assert.equal(result.stdout, "4\n");
  });

  it("exec node --version", async () => {
    const result = await sandboxes.exec("thread-42", {
      command: ["node", "--version"],
      cwd: "/workspace",
      env: { NODE_ENV: "production" },
      timeoutMs: 5_000,
    });

    if (result.exitCode !== 0) throw new Error(result.stderr);
    assert.match(result.stdout, /^v\d+\.\d+\.\d+\n$/);
  });

  it("run npm install", async (t) => {
    const which = await sandboxes.exec("thread-42", { command: ["/bin/sh", "-c", "command -v npm"] });
    if (which.exitCode !== 0) return t.skip("the debian image has no npm");
    // No dependencies and no registry: the install finishes offline.
    await sandboxes.writeFile("thread-42", "/workspace/package.json", '{"name":"demo","version":"1.0.0"}\n');
    await sandboxes.writeFile("thread-42", "/workspace/.npmrc", "audit=false\nfund=false\nupdate-notifier=false\noffline=true\n");
    const rec = recorder();
    const { process } = rec;

    const result = await sandboxes.run(
      "thread-42",
      { command: ["npm", "install"], cwd: "/workspace" },
      {
        intervalMs: 500,
        timeoutMs: 120_000,
        onOutput: (chunk) => process.stdout.write(chunk.stdout),
      },
    );

    if (result.killed) throw new Error("install did not finish");
    if (result.exitCode !== 0) throw new Error(result.stderr);
    assert.equal(rec.written.join(""), result.stdout);
    assert.match(result.stdout, /up to date|added/);
  });
});
