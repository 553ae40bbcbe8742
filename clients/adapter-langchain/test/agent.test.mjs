// A deep agent driven end to end by deepagents' own tools against a real
// sandboxd: a scripted model (fakeModel from @langchain/core/testing) calls
// write_file, edit_file, read_file, ls, glob, grep and execute, each of
// which reaches the daemon through SandboxdSandbox; the test checks what
// the agent was told and what really happened in the sandbox.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { AIMessage, HumanMessage, ToolMessage } from "@langchain/core/messages";
import { fakeModel } from "@langchain/core/testing";
import { MemorySaver } from "@langchain/langgraph";
import { SandboxClient } from "@sandboxd/client";
import { createDeepAgent } from "deepagents";
import { SandboxdSandbox } from "../dist/index.js";
import { countingFetch, skipReason, startDaemon, uniqueName } from "../../typescript/test/harness.mjs";

const text = (m) => (typeof m.content === "string" ? m.content : m.content.map((b) => b.text ?? "").join("\n"));

/**
 * A model turn that calls tools. respond() rather than fakeModel's
 * respondWithTools(), whose message content repeats the whole conversation
 * (so doubles at every step).
 */
let ids = 0;
const calls = (...toolCalls) =>
  new AIMessage({ content: "", tool_calls: toolCalls.map((c) => ({ ...c, id: `call-${++ids}`, type: "tool_call" })) });

/** The tool messages of a run, in order. */
const toolMessages = (result) => result.messages.filter((m) => ToolMessage.isInstance(m));

describe("a deep agent on a sandboxd sandbox", { skip: skipReason("tiny"), timeout: 180_000 }, () => {
  let daemon;
  let token;
  let control; // a second client: the control plane, and a look inside the sandbox

  before(async () => {
    daemon = await startDaemon({ image: "tiny" });
    token = await daemon.token();
    control = new SandboxClient({ identityToken: token });
  });
  after(async () => {
    await daemon?.stop();
  });

  it("writes, edits, reads, lists, globs, greps and executes through the backend", async () => {
    const name = uniqueName("agent");
    const backend = new SandboxdSandbox({ name, identityToken: token });
    const main = "/workspace/app/main.sh";
    const model = fakeModel()
      .respond(calls(
        { name: "write_file", args: { file_path: main, content: "greet() {\n  echo hello\n}\ngreet\n" } },
        { name: "write_file", args: { file_path: "/workspace/app/lib/util.sh", content: "# greet helper\n" } },
      ))
      .respond(calls({ name: "edit_file", args: { file_path: main, old_string: "echo hello", new_string: "echo hello, sandbox" } }))
      .respond(calls({ name: "read_file", args: { file_path: main, offset: 1, limit: 2 } }))
      .respond(calls({ name: "ls", args: { path: "/workspace/app" } }))
      .respond(calls({ name: "glob", args: { pattern: "**/*.sh", path: "/workspace" } }))
      .respond(calls({ name: "grep", args: { pattern: "greet", path: "/workspace/app" } }))
      .respond(calls({ name: "execute", args: { command: `sh ${main}; echo to-stderr >&2; echo again; exit 3` } }))
      .respond(new AIMessage("done"));

    const agent = createDeepAgent({ model, backend });
    const result = await agent.invoke({ messages: [new HumanMessage("work in the sandbox")] }, { recursionLimit: 100 });
    const tools = toolMessages(result);
    const by = (n) => tools.filter((m) => m.name === n).map(text);

    assert.deepEqual(by("write_file"), [`Successfully wrote to '${main}'`, "Successfully wrote to '/workspace/app/lib/util.sh'"]);
    assert.deepEqual(by("edit_file"), [`Successfully replaced 1 occurrence(s) in '${main}'`]);
    assert.deepEqual(by("read_file"), ["@@ lines 2-3 of 4 | next offset 3 @@\n  echo hello, sandbox\n}"]);
    assert.deepEqual(by("ls"), ["/workspace/app/lib/ (directory)\n/workspace/app/main.sh"]);
    assert.deepEqual(by("glob"), ["/workspace/app/lib/util.sh\n/workspace/app/main.sh"]);
    assert.deepEqual(by("grep"), [
      "/workspace/app/lib/util.sh:\n  1: # greet helper\n/workspace/app/main.sh:\n  1: greet() {\n  4: greet",
    ]);
    assert.deepEqual(by("execute"), ["hello, sandbox\nto-stderr\nagain\n\n[Command failed with exit code 3]"]);
    assert.equal(result.messages.at(-1).content, "done");

    // The effects are real: another client sees them in the sandbox.
    assert.equal(await control.readFile(name, main), "greet() {\n  echo hello, sandbox\n}\ngreet\n");
    const r = await control.exec(name, { command: ["sh", "app/main.sh"] });
    assert.equal(r.stdout, "hello, sandbox\n");
    await backend.close();
  });

  it("keeps working when the sandbox is deleted out of band between two turns", async () => {
    const name = uniqueName("oob");
    const { fetch, counts } = countingFetch();
    const backend = new SandboxdSandbox({ name, identityToken: token, fetchImpl: fetch });
    const model = fakeModel()
      // turn 1
      .respond(calls({ name: "write_file", args: { file_path: "/workspace/notes.txt", content: "turn one\n" } }))
      .respond(calls({ name: "execute", args: { command: "ls -A /workspace" } }))
      .respond(new AIMessage("first turn done"))
      // turn 2, after the sandbox was deleted behind the agent's back
      .respond(calls({ name: "execute", args: { command: "ls -A /workspace; echo listed" } }))
      .respond(calls({ name: "read_file", args: { file_path: "/workspace/notes.txt" } }))
      .respond(calls({ name: "write_file", args: { file_path: "/workspace/notes.txt", content: "turn two\n" } }))
      .respond(calls({ name: "read_file", args: { file_path: "/workspace/notes.txt" } }))
      .respond(new AIMessage("second turn done"));
    const agent = createDeepAgent({ model, backend, checkpointer: new MemorySaver() });
    const config = { configurable: { thread_id: name }, recursionLimit: 100 };

    const first = await agent.invoke({ messages: [new HumanMessage("turn one")] }, config);
    assert.deepEqual(toolMessages(first).map(text), ["Successfully wrote to '/workspace/notes.txt'", "notes.txt\n\n[Command succeeded with exit code 0]"]);
    const attachesBefore = counts.attach;

    await control.delete(name); // someone else, or the reclaimer
    assert.ok(!(await control.list()).some((s) => s.name === name));

    const second = await agent.invoke({ messages: [new HumanMessage("turn two")] }, config);
    const turn2 = toolMessages(second).slice(2).map(text);
    assert.deepEqual(turn2, [
      "listed\n\n[Command succeeded with exit code 0]", // a new, empty sandbox
      "Error: File '/workspace/notes.txt' not found",
      "Successfully wrote to '/workspace/notes.txt'",
      "@@ lines 1-1 of 1 @@\nturn two",
    ]);
    assert.equal(second.messages.at(-1).content, "second turn done");
    // Two holders of the old credential, each refused once and attaching
    // again once: the client (execute) and the adapter's streamed reads.
    assert.equal(counts.unauthorized, 2, "the stale credential was refused");
    assert.equal(counts.attach, attachesBefore + 2, "and each holder attached again once");
    assert.equal(await control.readFile(name, "notes.txt"), "turn two\n");
    await backend.close();
  });
});
