// Terminals: a process spawned with "pty" runs on a terminal of the size
// asked, typed at through stdin, read through its stream, resized
// (docs/api.md, "Terminals").
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Daemon, Client, until, HAVE_DEBIAN, GVISOR } from "./lib/daemon.mjs";
import { startReader, tryStream } from "./lib/stream.mjs";

const T = { timeout: 90000 };
const NO_DEBIAN = !HAVE_DEBIAN && "debian image not built";

let d, c, dd, cd;
before(async () => {
  d = await new Daemon().start();
  c = new Client(d);
  if (HAVE_DEBIAN) {
    dd = await new Daemon({ image: "debian" }).start();
    cd = new Client(dd);
  }
});
after(async () => {
  if (d) await d.destroy();
  if (dd) await dd.destroy();
});

// A process on a terminal: what it has written (read through a stream
// all along), typing, resizing.
class Term {
  static async spawn(cl, name, command, extra = {}) {
    const p = await cl.spawn(name, command, { pty: { cols: 80, rows: 24 }, ...extra });
    return new Term(cl, name, p);
  }

  constructor(cl, name, p) {
    this.cl = cl;
    this.name = name;
    this.p = p;
    this.id = p.processId;
    this.reader = startReader(cl, name, p.processId, { keep: 16 << 20, deadlineMs: 80000 });
    this.seen = 0;
  }

  get text() {
    return this.reader.stdout.length ? this.reader.stdout.text() : "";
  }

  // Waits for re to match what came after the last expect(); moves past it.
  async expect(re, ms = 30000) {
    let m;
    try {
      await until(() => (m = re.exec(this.text.slice(this.seen))), ms);
    } catch {
      throw new Error(`${re} did not appear on the terminal; after ${this.seen} it shows: ${JSON.stringify(this.text.slice(this.seen))}`);
    }
    this.seen += m.index + m[0].length;
    return m;
  }

  async type(s) {
    const r = await this.cl.data(this.name, "POST", `/processes/${this.id}/stdin`, s, true);
    assert.equal(r.status, 204, JSON.stringify(r.body));
  }

  resize(cols, rows) {
    return this.cl.data(this.name, "POST", `/processes/${this.id}/resize`, { cols, rows });
  }

  async exit() {
    const r = await this.reader.done;
    assert.equal(r.end, "exit", `the terminal's stream ended: ${r.end}`);
    assert.equal(r.stderr.length, 0, "a terminal's output comes on stdout");
    return r.exit;
  }

  close() {
    this.reader.abort();
  }
}

// A line the program printed (not the echo of one typed): at the start of
// a line ("\r\n" before it, or a lone "\r" as a shell that ends bracketed
// paste writes) and ending one.
const line = (s) => new RegExp(`(^|[\\r\\n])${s.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")}\\r?\\n`);

test("a terminal process has a tty of its own: tty prints /dev/pts/N; stdout and stderr both on the terminal", T, async () => {
  const t = await Term.spawn(c, "tty", ["/bin/sh", "-c", "tty; echo to-stderr >&2; [ -t 0 ] && [ -t 1 ] && [ -t 2 ] && echo all-ttys"]);
  try {
    assert.equal(t.p.pty, true);
    assert.equal(t.p.state, "running");
    await t.expect(/(^|\n)\/dev\/pts\/\d+\r?\n/);
    await t.expect(line("to-stderr"));
    await t.expect(line("all-ttys"));
    const x = await t.exit();
    assert.equal(x.exitCode, 0);
    assert.equal(x.stderrNext, 0);
    assert.equal(x.pty, true);
  } finally {
    t.close();
  }
  const list = (await c.data("tty", "GET", "/processes")).body.processes;
  assert.equal(list.find((p) => p.processId === t.id).pty, true);
  // A process without one has no flag, and no terminal.
  const plain = await c.spawn("tty", ["/bin/sh", "-c", "tty; true"]);
  assert.equal(plain.pty, undefined);
  const r = startReader(c, "tty", plain.processId);
  const out = await r.done;
  assert.equal(out.end, "exit");
  assert.doesNotMatch(out.stdout.text(), /\/dev\/pts/);
});

test("the process leads a session of its own with the terminal as its controlling tty", T, async () => {
  // Its pid is its session id and its process group id.
  const t = await Term.spawn(c, "sess", ["/bin/sh", "-c",
    "read -r _ _ _ _ pgrp sess _ < /proc/$$/stat; echo pid=$$ pgrp=$pgrp sess=$sess"]);
  try {
    const m = await t.expect(/pid=(\d+) pgrp=(\d+) sess=(\d+)\r?\n/);
    assert.equal(m[2], m[1], "not its own process group");
    assert.equal(m[3], m[1], "not its own session");
    assert.equal((await t.exit()).exitCode, 0);
  } finally {
    t.close();
  }
  // /dev/tty opens only on a controlling tty. (gVisor's /dev/tty cannot be
  // opened at all, EIO whatever the terminal: there the foreground group
  // below, and Ctrl-C, show it.)
  if (!GVISOR) {
    const u = await Term.spawn(c, "sess", ["/bin/sh", "-c", "echo via-dev-tty > /dev/tty && echo opened"]);
    try {
      await u.expect(line("via-dev-tty"));
      await u.expect(line("opened"));
      assert.equal((await u.exit()).exitCode, 0);
    } finally {
      u.close();
    }
  }
});

test("the terminal's foreground process group is the process's own (tcgetpgrp)", { ...T, skip: NO_DEBIAN }, async () => {
  const t = await Term.spawn(cd, "fg", ["python3", "-c",
    "import os; print('fg', os.tcgetpgrp(0) == os.getpgrp() == os.getpid(), os.getsid(0) == os.getpid(), os.ttyname(0).startswith('/dev/pts/'))"]);
  try {
    await t.expect(line("fg True True True"));
    assert.equal((await t.exit()).exitCode, 0);
  } finally {
    t.close();
  }
});

test("stty size shows the size asked for and follows a resize", T, async () => {
  const once = await Term.spawn(c, "size", ["stty", "size"]);
  try {
    await once.expect(line("24 80"));
    assert.equal((await once.exit()).exitCode, 0);
  } finally {
    once.close();
  }
  const t = await Term.spawn(c, "size", ["/bin/sh", "-i"]);
  try {
    await t.type("stty size\r");
    await t.expect(line("24 80"));
    const r = await t.resize(120, 40);
    assert.equal(r.status, 204, JSON.stringify(r.body));
    await t.type("stty size\r");
    await t.expect(line("40 120"));
    assert.equal((await t.resize(33, 11)).status, 204);
    await t.type("stty size\r");
    await t.expect(line("11 33"));
    await t.type("exit\r");
    assert.equal((await t.exit()).exitCode, 0);
  } finally {
    t.close();
  }
});

test("a resize sends SIGWINCH to the foreground process group", T, async () => {
  const t = await Term.spawn(c, "winch", ["/bin/sh", "-c",
    "trap 'echo got-winch; stty size' WINCH; echo ready; i=0; while [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done"]);
  try {
    await t.expect(line("ready"));
    assert.equal((await t.resize(100, 30)).status, 204);
    await t.expect(line("got-winch"));
    await t.expect(line("30 100"));
  } finally {
    t.close();
    await c.data("winch", "DELETE", `/processes/${t.id}`);
  }
});

test("sizes at the bounds are taken; 0, 4097, non-numbers and missing fields are refused at spawn and resize", T, async () => {
  const size = async (cl, cols, rows) => {
    const t = await Term.spawn(cl, "bounds", ["stty", "size"], { pty: { cols, rows } });
    try {
      assert.equal(t.p.pty, true);
      await t.expect(line(`${rows} ${cols}`));
      assert.equal((await t.exit()).exitCode, 0);
    } finally {
      t.close();
    }
  };
  for (const [cols, rows] of [[4096, 4096], [2, 3], [4096, 2]]) await size(c, cols, rows);
  // busybox's stty shows a dimension of 1 as its default (80 or 24); the
  // spawn is taken all the same, and coreutils' stty shows it as it is.
  const one = await c.spawn("bounds", ["true"], { pty: { cols: 1, rows: 1 } });
  assert.equal(one.pty, true);
  if (HAVE_DEBIAN) for (const [cols, rows] of [[1, 1], [4096, 1], [1, 4096]]) await size(cd, cols, rows);
  const bad = [{ cols: 0, rows: 24 }, { cols: 80, rows: 0 }, { cols: 4097, rows: 24 }, { cols: 80, rows: 4097 },
    { cols: "x", rows: 24 }, { cols: 80, rows: "24" }, { cols: -1, rows: 24 }, { cols: 80 }, { rows: 24 }, { cols: 80.5, rows: 24 }];
  for (const pty of bad) {
    const r = await c.data("bounds", "POST", "/processes", { command: ["stty", "size"], pty });
    assert.equal(r.status, 400, `spawn with ${JSON.stringify(pty)}: ${r.status} ${JSON.stringify(r.body)}`);
    assert.equal(r.body.error.code, "invalid_argument");
  }
  const t = await Term.spawn(c, "bounds", ["/bin/sh", "-i"]);
  try {
    for (const size of bad) {
      const r = await c.data("bounds", "POST", `/processes/${t.id}/resize`, size);
      assert.equal(r.status, 400, `resize to ${JSON.stringify(size)}: ${r.status} ${JSON.stringify(r.body)}`);
      assert.equal(r.body.error.code, "invalid_argument");
    }
    // Nothing changed.
    await t.type("stty size\r");
    await t.expect(line("24 80"));
  } finally {
    t.close();
    await c.data("bounds", "DELETE", `/processes/${t.id}`);
  }
});

test("resize: a process without a terminal or one that has exited is 409 invalid_state, an unknown one 404", T, async () => {
  const plain = await c.spawn("rs", ["/bin/sleep", "30"]);
  let r = await c.data("rs", "POST", `/processes/${plain.processId}/resize`, { cols: 100, rows: 30 });
  assert.equal(r.status, 409, JSON.stringify(r.body));
  assert.equal(r.body.error.code, "invalid_state");
  assert.equal((await c.data("rs", "DELETE", `/processes/${plain.processId}`)).status, 204);

  const t = await Term.spawn(c, "rs", ["/bin/sh", "-c", "echo bye"]);
  try {
    await t.exit();
  } finally {
    t.close();
  }
  r = await t.resize(100, 30);
  assert.equal(r.status, 409, JSON.stringify(r.body));
  assert.equal(r.body.error.code, "invalid_state");

  r = await c.data("rs", "POST", "/processes/p-nope/resize", { cols: 100, rows: 30 });
  assert.equal(r.status, 404);
  assert.equal(r.body.error.code, "process_not_found");
});

test("TERM is xterm-256color unless env names it", T, async () => {
  for (const [env, want] of [[undefined, "xterm-256color"], [{ TERM: "vt100" }, "vt100"], [{ OTHER: "1" }, "xterm-256color"]]) {
    const t = await Term.spawn(c, "term", ["/bin/sh", "-c", "echo TERM=$TERM"], env ? { env } : {});
    try {
      await t.expect(line(`TERM=${want}`));
      assert.equal((await t.exit()).exitCode, 0);
    } finally {
      t.close();
    }
  }
});

test("stdin is the terminal: typed lines are echoed and read, Ctrl-D ends input; close only stops writes", T, async () => {
  const t = await Term.spawn(c, "cat", ["/bin/cat"]);
  try {
    await t.type("hello tty\r");
    // The echo, then cat's copy.
    await t.expect(line("hello tty"));
    await t.expect(line("hello tty"));
    await t.type("\u0004");
    assert.equal((await t.exit()).exitCode, 0);
  } finally {
    t.close();
  }
  // stdin needs no "stdin": true, and close=true does not end the input.
  const u = await Term.spawn(c, "cat", ["/bin/sh", "-c", "read -r l; echo got=$l; read -r m; echo never"]);
  try {
    let r = await c.data("cat", "POST", `/processes/${u.id}/stdin?close=true`, "one\r", true);
    assert.equal(r.status, 204);
    await u.expect(line("got=one"));
    r = await c.data("cat", "POST", `/processes/${u.id}/stdin`, "two\r", true);
    assert.equal(r.status, 409);
    assert.equal(r.body.error.code, "invalid_state");
    assert.equal((await c.poll("cat", u.id)).state, "running", "close=true ended the terminal's input");
  } finally {
    u.close();
    await c.data("cat", "DELETE", `/processes/${u.id}`);
  }
});

// Every command line running in the sandbox, from /proc (busybox and
// procps alike).
const PS = "for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f 2>/dev/null; echo; done";
const running = async (cl, name, re) => re.test((await cl.sh(name, PS)).stdout);

async function ctrlC(cl, name, shell) {
  const t = await Term.spawn(cl, name, shell);
  try {
    await t.type("echo shell-up\r");
    await t.expect(line("shell-up"));
    await t.type("sleep 100\r");
    // The sleep is running before the key comes.
    await until(() => running(cl, name, /^sleep 100 $/m), 30000);
    await t.type("\u0003");
    // Typed once the shell has its job back (input typed before may be
    // flushed with the interrupt).
    await until(async () => !(await running(cl, name, /^sleep 100 $/m)), 30000);
    await t.type("echo rc=$?\r");
    await t.expect(line("rc=130"));
    await t.type("echo still-here\r");
    await t.expect(line("still-here"));
    assert.equal((await cl.poll(name, t.id)).state, "running");
    await t.type("exit\r");
    assert.equal((await t.exit()).exitCode, 0);
  } finally {
    t.close();
  }
}

test("Ctrl-C interrupts the foreground job of an interactive shell, and the shell lives", T, async () => {
  await ctrlC(c, "intr", ["/bin/sh", "-i"]);
});

test("Ctrl-C in bash -i", { ...T, skip: NO_DEBIAN }, async () => {
  await ctrlC(cd, "bash", ["/bin/bash", "-i"]);
});

test("a python3 REPL on a terminal answers typed lines", { ...T, skip: NO_DEBIAN }, async () => {
  const t = await Term.spawn(cd, "py", ["python3", "-i"]);
  try {
    await t.expect(/>>> /);
    await t.type("print(6*7)\r");
    await t.expect(line("42"));
    await t.type("import os, sys; print(os.isatty(0), sys.stdin.isatty(), os.get_terminal_size())\r");
    await t.expect(line("True True os.terminal_size(columns=80, lines=24)"));
    await t.type("\u0004");
    assert.equal((await t.exit()).exitCode, 0);
  } finally {
    t.close();
  }
});

test("top runs on a terminal: its screen, then q quits", { ...T, skip: NO_DEBIAN }, async () => {
  const t = await Term.spawn(cd, "top", ["top", "-d", "1"], { pty: { cols: 120, rows: 40 } });
  try {
    await t.expect(/top - \d/);
    await t.expect(/Tasks:/);
    await t.type("q");
    assert.equal((await t.exit()).exitCode, 0);
  } finally {
    t.close();
  }
  const b = await Term.spawn(cd, "top", ["top", "-b", "-n", "1"]);
  try {
    await b.expect(/top - \d/);
    await b.expect(/PID +USER/);
    assert.equal((await b.exit()).exitCode, 0);
  } finally {
    b.close();
  }
});

test("vim on a terminal: insert, escape, :wq writes the file", { ...T, skip: NO_DEBIAN }, async () => {
  const t = await Term.spawn(cd, "vim", ["vi", "/workspace/note.txt"], { pty: { cols: 100, rows: 30 } });
  try {
    await t.expect(/note\.txt/); // its status line: the screen is drawn
    await t.type("ihello from vim");
    await t.expect(/hello from vim/);
    await t.type("\u001b:wq\r");
    assert.equal((await t.exit()).exitCode, 0);
  } finally {
    t.close();
  }
  assert.equal((await cd.sh("vim", "cat /workspace/note.txt")).stdout, "hello from vim\n");
});

test("a terminal's stream reconnects from an offset like any other", T, async () => {
  const t = await Term.spawn(c, "again", ["/bin/sh", "-c", "echo first; read -r x; echo second"]);
  let tail;
  try {
    await t.expect(line("first"));
    const at = t.reader.stdout.length;
    tail = startReader(c, "again", t.id, { stdoutFrom: at });
    assert.equal((await tail.started).stdoutFrom, at);
    await t.type("go\r");
    const r = await tail.done;
    assert.equal(r.end, "exit");
    assert.equal(r.start.stdoutDropped, 0);
    assert.match(r.stdout.text(), /^go\r?\nsecond\r?\n$/);
    const all = await t.exit();
    assert.equal(all.stdoutNext, r.exit.stdoutNext);
    assert.equal(t.text.slice(at), r.stdout.text());
  } finally {
    t.close();
    tail?.abort();
  }
});
