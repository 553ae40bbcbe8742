// Shared by the adapter's tests: the SDK tests' daemon harness (a real
// sandboxd on loopback, every answer checked against docs/openapi.yaml),
// and a scripted model from the AI SDK's test kit that drives a Mastra agent
// through tool calls, so no network model is needed.

import { WORKSPACE_TOOLS } from "@mastra/core/workspace";
import { MockLanguageModelV2 } from "ai/test";

// Tests talk to loopback only: Mastra's usage telemetry (sent by its Mastra
// class, which these tests do not use) stays off all the same. Read when an
// event would be sent, so setting it here is in time.
process.env.MASTRA_TELEMETRY_DISABLED ??= "1";

export {
  countingFetch,
  skipReason,
  sleep,
  startDaemon,
  uniqueName,
} from "../../typescript/test/harness.mjs";

/** Short names of the workspace tools a script calls (Mastra's own names). */
export const T = {
  exec: WORKSPACE_TOOLS.SANDBOX.EXECUTE_COMMAND,
  output: WORKSPACE_TOOLS.SANDBOX.GET_PROCESS_OUTPUT,
  kill: WORKSPACE_TOOLS.SANDBOX.KILL_PROCESS,
  read: WORKSPACE_TOOLS.FILESYSTEM.READ_FILE,
  write: WORKSPACE_TOOLS.FILESYSTEM.WRITE_FILE,
  edit: WORKSPACE_TOOLS.FILESYSTEM.EDIT_FILE,
  list: WORKSPACE_TOOLS.FILESYSTEM.LIST_FILES,
  del: WORKSPACE_TOOLS.FILESYSTEM.DELETE,
  stat: WORKSPACE_TOOLS.FILESYSTEM.FILE_STAT,
  mkdir: WORKSPACE_TOOLS.FILESYSTEM.MKDIR,
  grep: WORKSPACE_TOOLS.FILESYSTEM.GREP,
};

/** Polls `fn` until it is truthy, for at most `ms`. */
export async function until(fn, ms = 20_000, what = "condition") {
  const t0 = Date.now();
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() - t0 > ms) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * A language model that plays a script. Each step is a string (the final
 * answer), an array of tool calls `{ tool, input }`, or a function of
 * `{ results, transcript }` (the tool results of the last step, and of every
 * step so far) returning one of those. The results carry `toolName`,
 * `input` and `output` (the text the model is shown).
 */
export function scriptedModel(steps) {
  const transcript = [];
  let index = 0;
  let callId = 0;

  async function play(options) {
    const last = options.prompt.at(-1);
    const results =
      last?.role === "tool"
        ? last.content
            .filter((p) => p.type === "tool-result")
            .map((p) => ({ toolName: p.toolName, input: p.input, output: outputText(p.output) }))
        : [];
    transcript.push(...results);
    if (index >= steps.length) throw new Error(`the script has ${steps.length} steps; step ${index + 1} was asked for`);
    const step = steps[index++];
    const value = typeof step === "function" ? await step({ results, transcript }) : step;
    const usage = { inputTokens: 10, outputTokens: 5, totalTokens: 15 };
    if (typeof value === "string") {
      return { content: [{ type: "text", text: value }], finishReason: "stop", usage, warnings: [] };
    }
    return {
      content: value.map((c) => ({
        type: "tool-call",
        toolCallId: `call-${++callId}`,
        toolName: c.tool,
        input: JSON.stringify(c.input),
      })),
      finishReason: "tool-calls",
      usage,
      warnings: [],
    };
  }

  const model = new MockLanguageModelV2({
    doGenerate: play,
    doStream: async (options) => {
      const r = await play(options);
      const parts = [{ type: "stream-start", warnings: [] }];
      for (const c of r.content) {
        if (c.type === "text") {
          parts.push({ type: "text-start", id: "t" }, { type: "text-delta", id: "t", delta: c.text }, { type: "text-end", id: "t" });
        } else parts.push(c);
      }
      parts.push({ type: "finish", finishReason: r.finishReason, usage: r.usage });
      return {
        stream: new ReadableStream({
          start(controller) {
            for (const p of parts) controller.enqueue(p);
            controller.close();
          },
        }),
      };
    },
  });
  return { model, transcript, get stepsPlayed() { return index; } };
}

function outputText(output) {
  if (output == null) return "";
  if (typeof output === "string") return output;
  if (output.type === "text" || output.type === "error-text") return output.value;
  if (output.type === "json" || output.type === "error-json") return JSON.stringify(output.value);
  if (output.type === "content") return output.value.map((v) => (v.type === "text" ? v.text : `[${v.type}]`)).join("\n");
  return JSON.stringify(output);
}
