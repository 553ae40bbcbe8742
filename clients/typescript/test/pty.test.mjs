// Terminals through the SDK: spawn with pty, read the terminal as a
// stream, type at it with stdin, resize it.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { SandboxClient, SandboxRequestError } from "@sandboxd/client";
import { CLASS, skipReason, startDaemon, uniqueName } from "./harness.mjs";

/** A terminal's stream read in the background: its text so far, and a wait for a pattern. */
function watch(stream) {
  const decoder = new TextDecoder();
  const term = {
    text: "",
    ended: false,
    error: undefined,
    /** Resolves with the first match of `re` in the text after `from`. */
    async waitFor(re, from = 0, ms = 10_000) {
      const until = Date.now() + ms;
      for (;;) {
        const m = re.exec(term.text.slice(from));
        if (m) return m;
        if (term.ended || term.error || Date.now() > until) {
          throw new Error(
            `no ${re} in the terminal (${term.error ? `error ${term.error}` : term.ended ? "ended" : "timed out"}): ${JSON.stringify(term.text.slice(from))}`,
          );
        }
        await new Promise((r) => setTimeout(r, 20));
      }
    },
  };
  term.done = (async () => {
    try {
      for await (const c of stream) {
        assert.equal(c.stream, "stdout", "a terminal's output comes on stdout");
        term.text += decoder.decode(c.data, { stream: true });
      }
    } catch (e) {
      term.error = e;
    } finally {
      term.ended = true;
    }
  })();
  return term;
}

describe(`terminals (${CLASS})`, { skip: skipReason("tiny") }, () => {
  let daemon;
  let sandboxes;
  const name = uniqueName("pty");

  before(async () => {
    daemon = await startDaemon({ image: "tiny" });
    sandboxes = new SandboxClient({ identityToken: await daemon.token() });
  });
  after(async () => {
    await sandboxes?.delete(name).catch(() => {});
    await daemon?.stop();
  });

  it("an interactive shell: tty, stty size follows resize, typed lines answered, Ctrl-C, exit", { timeout: 60_000 }, async () => {
    const proc = await sandboxes.spawn(name, { command: ["/bin/sh", "-i"], pty: { cols: 80, rows: 24 } });
    assert.equal(proc.pty, true);
    const stream = sandboxes.stream(name, proc.processId);
    const term = watch(stream);
    const type = async (line) => {
      const from = term.text.length;
      await sandboxes.stdin(name, proc.processId, line);
      return from;
    };

    let from = await type("tty\n");
    assert.match((await term.waitFor(/\/dev\/pts\/\d+/, from))[0], /^\/dev\/pts\/\d+$/);

    from = await type("stty size\n");
    assert.deepEqual((await term.waitFor(/(\d+) (\d+)\r?\n/, from)).slice(1), ["24", "80"]);

    await sandboxes.resize(name, proc.processId, 132, 43);
    from = await type("stty size\n");
    assert.deepEqual((await term.waitFor(/(\d+) (\d+)\r?\n/, from)).slice(1), ["43", "132"]);

    from = await type("echo $((6 * 7))z\n");
    await term.waitFor(/42z\r?\n/, from);

    assert.match((await term.waitFor(/xterm-256color/, await type("echo $TERM\n")))[0], /xterm-256color/);

    // Ctrl-C interrupts the foreground job; the shell answers again.
    from = await type("sleep 30; echo after\n");
    await new Promise((r) => setTimeout(r, 300));
    const t0 = Date.now();
    await sandboxes.stdin(name, proc.processId, "\u0003");
    from = await type("echo back$((1 + 1))\n");
    await term.waitFor(/back2\r?\n/, from);
    assert.ok(Date.now() - t0 < 10_000, "Ctrl-C did not interrupt the sleep");

    await type("exit 5\n");
    await term.done;
    assert.equal(term.error, undefined, String(term.error));
    const exit = await stream.exit;
    assert.equal(exit.exitCode, 5);
    assert.equal(exit.pty, true);
    assert.equal(exit.stderrNext, 0, "a terminal's stderr stays empty");

    // Resizing an exited terminal: 409 invalid_state.
    const late = await sandboxes.resize(name, proc.processId, 80, 24).catch((e) => e);
    assert.ok(late instanceof SandboxRequestError, String(late));
    assert.equal(late.status, 409);
    assert.equal(late.code, "invalid_state");
    await sandboxes.kill(name, proc.processId);
  });

  it("tty on a terminal, Ctrl-D ends a line reader, resize of a pipe process is 409", { timeout: 30_000 }, async () => {
    const r = await sandboxes.run(name, { command: ["tty"], pty: { cols: 40, rows: 10 } });
    assert.equal(r.exitCode, 0);
    assert.match(r.stdout, /^\/dev\/pts\/\d+\r?\n$/);
    assert.equal(r.stderr, "");

    const cat = await sandboxes.spawn(name, { command: ["cat"], pty: { cols: 1, rows: 4096 } });
    const stream = sandboxes.stream(name, cat.processId);
    const term = watch(stream);
    await sandboxes.stdin(name, cat.processId, "hello\n");
    await term.waitFor(/hello\r\nhello\r\n/); // the echo, then cat's copy
    await sandboxes.stdin(name, cat.processId, "\u0004");
    await term.done;
    assert.equal((await stream.exit).exitCode, 0);
    await sandboxes.kill(name, cat.processId);

    const plain = await sandboxes.spawn(name, { command: ["sleep", "10"] });
    assert.equal(plain.pty, undefined);
    assert.equal(plain.lossless, undefined);
    const e = await sandboxes.resize(name, plain.processId, 80, 24).catch((x) => x);
    assert.ok(e instanceof SandboxRequestError, String(e));
    assert.equal(e.status, 409);
    assert.equal(e.code, "invalid_state");
    await sandboxes.kill(name, plain.processId);
  });
});
