// A Mastra agent, driven by a scripted model, works in a sandboxd sandbox
// through a Workspace: the workspace's own tools (execute_command, a
// background process, the file tools) against a real daemon. The effects
// are checked in the sandbox itself, through a separate client.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Agent } from "@mastra/core/agent";
import { Workspace } from "@mastra/core/workspace";
import { SandboxClient } from "@sandboxd/client";
import { SandboxdFilesystem, SandboxdSandbox } from "@sandboxd/adapter-mastra";
import { T, scriptedModel, skipReason, startDaemon, uniqueName } from "./helpers.mjs";

const pidOf = (text) => /PID: ([A-Za-z0-9-]+)/.exec(text)?.[1];

describe("a Mastra agent in a sandboxd workspace", { skip: skipReason("tiny"), timeout: 120_000 }, () => {
  let daemon;
  let token;
  let inspector;

  before(async () => {
    daemon = await startDaemon({ image: "tiny" });
    token = await daemon.token();
    inspector = new SandboxClient({ identityToken: token });
  });
  after(async () => {
    await daemon?.stop();
  });

  function workspaceFor(name) {
    const sandbox = new SandboxdSandbox({ name, identityToken: token });
    const filesystem = new SandboxdFilesystem({ sandbox });
    return { sandbox, workspace: new Workspace({ sandbox, filesystem }) };
  }

  it("runs commands, a background process and the file tools", async () => {
    const name = uniqueName("agent");
    const { sandbox, workspace } = workspaceFor(name);
    const seen = {};
    const { model, transcript } = scriptedModel([
      [{ tool: T.mkdir, input: { path: "proj/src" } }],
      [{ tool: T.write, input: { path: "proj/src/greet.sh", content: 'echo "hello $1"\n# TODO: say more\n' } }],
      [{ tool: T.read, input: { path: "proj/src/greet.sh" } }],
      ({ results }) => {
        seen.read = results[0].output;
        return [{ tool: T.edit, input: { path: "proj/src/greet.sh", old_string: "hello", new_string: "hi" } }];
      },
      [{ tool: T.exec, input: { command: "sh proj/src/greet.sh world; echo oops >&2; exit 3" } }],
      ({ results }) => {
        seen.exec = results[0].output;
        return [{ tool: T.list, input: { path: "proj" } }];
      },
      ({ results }) => {
        seen.list = results[0].output;
        return [{ tool: T.grep, input: { pattern: "TODO|FIXME", path: "proj" } }];
      },
      ({ results }) => {
        seen.grep = results[0].output;
        return [{ tool: T.stat, input: { path: "proj/src/greet.sh" } }];
      },
      ({ results }) => {
        seen.stat = results[0].output;
        return [
          {
            tool: T.exec,
            input: { command: "i=0; while [ $i -lt 3 ]; do echo tick $i; i=$((i+1)); sleep 0.3; done", background: true },
          },
        ];
      },
      ({ results }) => {
        seen.bg = results[0].output;
        return [{ tool: T.output, input: { pid: pidOf(seen.bg), wait: true } }];
      },
      ({ results }) => {
        seen.bgOutput = results[0].output;
        return [{ tool: T.exec, input: { command: "echo started; sleep 60", background: true } }];
      },
      ({ results }) => {
        seen.sleeper = pidOf(results[0].output);
        return [{ tool: T.kill, input: { pid: seen.sleeper } }];
      },
      ({ results }) => {
        seen.kill = results[0].output;
        return [{ tool: T.kill, input: { pid: seen.sleeper } }];
      },
      ({ results }) => {
        seen.killAgain = results[0].output;
        return [{ tool: T.write, input: { path: "proj/notes.txt", content: "scratch\n" } }];
      },
      [{ tool: T.del, input: { path: "proj/notes.txt" } }],
      [{ tool: T.exec, input: { command: "pwd; ls proj", cwd: "/workspace" } }],
      ({ results }) => {
        seen.last = results[0].output;
        return "All done.";
      },
    ]);
    const agent = new Agent({ id: "sandboxd-agent", name: "sandboxd-agent", instructions: "Work in the sandbox.", model, workspace });
    try {
      const result = await agent.generate("Make a greeting script and try it.", { maxSteps: 30 });
      assert.equal(result.text, "All done.");

      assert.match(seen.read, /1→echo "hello \$1"/);
      assert.equal(seen.exec, "stdout:\nhi world\n\n\nstderr:\noops\n\nExit code: 3");
      assert.match(seen.list, /greet\.sh/);
      assert.match(seen.grep, /^1 match across 1 file/);
      assert.match(seen.grep, /proj\/src\/greet\.sh:2:3: # TODO: say more/);
      assert.match(seen.stat, /Type: file Size: \d+ bytes/);
      assert.match(seen.bg, /^Started background process \(PID: [A-Za-z0-9-]+\)$/);
      assert.equal(seen.bgOutput, "tick 0\ntick 1\ntick 2\n\n\nExit code: 0");
      assert.match(seen.kill, /has been killed/);
      assert.match(seen.kill, /started/);
      assert.match(seen.killAgain, /not found or had already exited/);
      assert.equal(seen.last, "/workspace\nsrc\n");
      // Every tool call got a result and none was an error.
      assert.equal(transcript.length, 16);

      // The effects, seen from outside the agent.
      assert.equal(await inspector.readFile(name, "/workspace/proj/src/greet.sh"), 'echo "hi $1"\n# TODO: say more\n');
      const entries = await inspector.listDir(name, "/workspace/proj");
      assert.deepEqual(entries.map((e) => e.name).sort(), ["src"]);
      const procs = await inspector.processes(name);
      assert.ok(!procs.some((p) => p.state === "running"), "the killed sleeper is not running");
      assert.equal(sandbox.provider, "sandboxd");
    } finally {
      await workspace.destroy();
    }
    await assert.rejects(inspector.get(name), (err) => err.status === 404);
  });

  it("goes on in a new sandbox when the old one is deleted between two steps", async () => {
    const name = uniqueName("agent-gone");
    const { workspace } = workspaceFor(name);
    const seen = {};
    const { model } = scriptedModel([
      [{ tool: T.write, input: { path: "marker.txt", content: "before\n" } }],
      [{ tool: T.exec, input: { command: "cat marker.txt" } }],
      async ({ results }) => {
        seen.before = results[0].output;
        // Someone else deletes the sandbox behind the agent's back.
        await inspector.delete(name);
        return [{ tool: T.exec, input: { command: "ls -A /workspace; echo listed" } }];
      },
      ({ results }) => {
        seen.after = results[0].output;
        return [{ tool: T.write, input: { path: "marker.txt", content: "after\n" } }];
      },
      [{ tool: T.read, input: { path: "marker.txt" } }],
      ({ results }) => {
        seen.read = results[0].output;
        return "ok";
      },
    ]);
    const agent = new Agent({ id: "gone-agent", name: "gone-agent", instructions: "-", model, workspace });
    try {
      const result = await agent.generate("go", { maxSteps: 10 });
      assert.equal(result.text, "ok");
      assert.equal(seen.before, "before\n");
      assert.equal(seen.after, "listed\n", "a new, empty sandbox");
      assert.match(seen.read, /1→after/);
      assert.equal(await inspector.readFile(name, "marker.txt"), "after\n");
    } finally {
      await workspace.destroy();
    }
  });
});
