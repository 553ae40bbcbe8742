// sbx, the command line, and libsandboxd under it, against the real daemon:
// exit codes, streamed output, stdin, --json, cp both ways, processes,
// the lifecycle verbs, one-line errors, a shell on a terminal, a stale
// credential re-attached once, one client shared by threads.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, writeFileSync, readFileSync, rmSync, mkdirSync, existsSync, symlinkSync, chmodSync, lstatSync, readlinkSync, readdirSync, utimesSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { Daemon, Client, BIN, IMAGES, ROOT, HAVE_DEBIAN, freePort } from "./lib/daemon.mjs";

const SBX = join(dirname(BIN), "sbx");
const LIVE = join(dirname(BIN), "tests", "libsandboxd-live");
const PTY_DRIVE = join(dirname(fileURLToPath(import.meta.url)), "lib", "pty-drive.py");

let d, c, token, dir, images;
before(async () => {
  // An images dir of our own (the snapshot test writes one there): tiny, copied.
  images = mkdtempSync(join(tmpdir(), "sbx-images-"));
  execFileSync("cp", ["-a", join(IMAGES, "tiny"), join(images, "tiny")]);
  d = await new Daemon({ images }).start();
  c = new Client(d);
  token = c.tok;
  dir = mkdtempSync(join(tmpdir(), "sbx-test-"));
});
after(async () => {
  if (dir) rmSync(dir, { recursive: true, force: true });
  if (d) await d.destroy();
  if (images) rmSync(images, { recursive: true, force: true });
});

const sha = (buf) => createHash("sha256").update(buf).digest("hex");

// Run a program to its end: stdout and stderr as Buffers, its exit code.
// `input` (a Buffer or string) is written to its stdin, which is then closed.
function run(file, args, { env = {}, input, noToken = false } = {}) {
  const base = { ...process.env };
  delete base.SANDBOXD_TOKEN;
  delete base.SANDBOXD_URL;
  delete base.ASTRO_AUTHZ_TOKEN;
  // No user config file leaks in: each run sees an empty config dir.
  base.XDG_CONFIG_HOME = join(dir, "no-config");
  const full = { ...base, ...(noToken ? {} : { SANDBOXD_TOKEN: token }), ...env };
  return new Promise((resolve, reject) => {
    const p = spawn(file, args, { env: full, stdio: ["pipe", "pipe", "pipe"] });
    const out = [];
    const err = [];
    p.stdout.on("data", (b) => out.push(b));
    p.stderr.on("data", (b) => err.push(b));
    p.on("error", reject);
    p.on("close", (code, signal) =>
      resolve({ code, signal, stdout: Buffer.concat(out), stderrBytes: Buffer.concat(err), stderr: Buffer.concat(err).toString() }),
    );
    if (input !== undefined) p.stdin.end(input);
    else p.stdin.end();
  });
}
const sbx = (args, opts) => run(SBX, args, opts);

// A failed sbx call says so in one line that names the verb.
function oneLineError(r, pattern) {
  const lines = r.stderr.split("\n").filter((l) => l !== "");
  assert.equal(lines.length, 1, `one line of error, got: ${r.stderr}`);
  assert.match(lines[0], /^sbx: /);
  assert.match(lines[0], pattern);
}

async function metrics(dd = d) {
  const text = await (await fetch(`${dd.url}/metrics`)).text();
  const get = (re) => Number(text.match(re)[1]);
  return {
    requests: get(/^sandboxd_http_requests_total (\d+)$/m),
    client4xx: get(/^sandboxd_http_responses_total\{class="4xx"\} (\d+)$/m),
  };
}

test("exec passes the command's exit code through and streams stdout and stderr apart", async () => {
  for (const code of [0, 3, 42]) {
    const r = await sbx(["exec", "e1", "--", "sh", "-c", `echo out; echo err >&2; exit ${code}`]);
    assert.equal(r.code, code, r.stderr);
    assert.equal(r.stdout.toString(), "out\n");
    assert.equal(r.stderr, "err\n");
  }
  // Killed by a signal: 128 + its number, as a shell reports it.
  const k = await sbx(["exec", "e1", "--", "sh", "-c", "kill -9 $$"]);
  assert.equal(k.code, 137, k.stderr);
  // A command that cannot start is the sandbox's 127, not an sbx failure.
  const missing = await sbx(["exec", "e1", "--", "no-such-command"]);
  assert.equal(missing.code, 127);
});

test("exec delivers a binary output of several MiB whole (sha256)", async () => {
  const data = randomBytes(3 * 1024 * 1024 + 12345);
  const local = join(dir, "big.bin");
  writeFileSync(local, data);
  let r = await sbx(["cp", local, "e2:/tmp/big.bin"]);
  assert.equal(r.code, 0, r.stderr);
  r = await sbx(["exec", "e2", "--", "cat", "/tmp/big.bin"]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout.length, data.length);
  assert.equal(sha(r.stdout), sha(data));
  // stderr too, and both at once.
  r = await sbx(["exec", "e2", "--", "sh", "-c", "cat /tmp/big.bin >&2; echo done"]);
  assert.equal(r.code, 0);
  assert.equal(r.stdout.toString(), "done\n");
  assert.equal(sha(r.stderrBytes), sha(data));
});

test("exec -i pipes stdin in, to its end", async () => {
  const data = randomBytes(2 * 1024 * 1024 + 7);
  const r = await sbx(["exec", "-i", "e3", "--", "sh", "-c", "cat; echo end >&2"], { input: data });
  assert.equal(r.code, 0, r.stderr);
  assert.equal(sha(r.stdout), sha(data));
  assert.equal(r.stderr, "end\n");
  const wc = await sbx(["exec", "--stdin", "e3", "--", "wc", "-l"], { input: "a\nb\nc\n" });
  assert.equal(wc.stdout.toString().trim(), "3");
  // Without -i the command's stdin is empty.
  const none = await sbx(["exec", "e3", "--", "wc", "-c"], { input: "ignored" });
  assert.equal(none.stdout.toString().trim(), "0");
});

test("a signal to sbx exec goes to the command, and sbx waits for its end", async () => {
  const p = spawn(SBX, ["exec", "sg1", "--", "sh", "-c", "trap 'echo got INT; exit 4' INT; echo ready; while :; do sleep 1; done"],
    { env: { ...process.env, SANDBOXD_TOKEN: token, XDG_CONFIG_HOME: join(dir, "no-config") }, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  let err = "";
  p.stderr.on("data", (b) => (err += b));
  const closed = new Promise((res) => p.on("close", (code, signal) => res({ code, signal })));
  await new Promise((res) => p.stdout.on("data", (b) => { out += b; if (out.includes("ready\n")) res(); }));
  p.kill("SIGINT");
  const r = await closed;
  assert.equal(r.code, 4, `${r.signal} ${err}`);
  assert.equal(out, "ready\ngot INT\n");
});

test("exec whose reader goes away (| head) kills the command and exits 141", async () => {
  const p = spawn(SBX, ["exec", "pp1", "--", "sh", "-c", "echo $$ > /tmp/pid; exec yes"],
    { env: { ...process.env, SANDBOXD_TOKEN: token, XDG_CONFIG_HOME: join(dir, "no-config") }, stdio: ["ignore", "pipe", "pipe"] });
  let err = "";
  p.stderr.on("data", (b) => (err += b));
  const closed = new Promise((res) => p.on("close", (code) => res(code)));
  await new Promise((res) => p.stdout.once("data", res));
  p.stdout.destroy();
  assert.equal(await closed, 141, err);
  assert.equal(err, "");
  // The process is gone from the sandbox, not blocked on output nobody reads.
  const ps = JSON.parse((await sbx(["ps", "pp1", "--json"])).stdout);
  assert.deepEqual(ps.filter((x) => x.state === "running"), []);
  const alive = await sbx(["exec", "pp1", "--", "sh", "-c", "kill -0 $(cat /tmp/pid) 2>/dev/null && echo alive || echo gone"]);
  assert.equal(alive.stdout.toString(), "gone\n");
});

test("exec passes env, workdir and user", async () => {
  const r = await sbx(["exec", "-e", "A=1", "--env", "B=two words", "-w", "/tmp", "-u", "65534", "e4", "--",
    "sh", "-c", 'echo "$A|$B|$(pwd)|$(id -u)"']);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout.toString(), "1|two words|/tmp|65534\n");
});

test("--json output is parseable and carries the records", async () => {
  const a = await sbx(["attach", "j1", "--json"]);
  assert.equal(a.code, 0, a.stderr);
  const h = JSON.parse(a.stdout);
  assert.equal(h.name, "j1");
  assert.equal(h.state, "running");
  assert.equal(h.headers, undefined, "no credential printed");
  const g = JSON.parse((await sbx(["--json", "get", "j1"])).stdout);
  assert.equal(g.name, "j1");
  assert.equal(g.image, "tiny");
  const l = JSON.parse((await sbx(["ls", "--json"])).stdout);
  assert.ok(Array.isArray(l) && l.some((s) => s.name === "j1"));
  const im = JSON.parse((await sbx(["images", "--json"])).stdout);
  assert.ok(im.some((i) => i.name === "tiny" && i.sizeBytes > 0));
  const ps = JSON.parse((await sbx(["ps", "j1", "--json"])).stdout);
  assert.ok(Array.isArray(ps));
});

test("cp copies a binary file both ways, into directories, and through stdin/stdout", async () => {
  const data = randomBytes(1024 * 1024 * 2 + 3);
  const src = join(dir, "rt.bin");
  writeFileSync(src, data);
  let r = await sbx(["cp", src, "cp1:/workspace/sub/rt.bin"]);
  assert.equal(r.code, 0, r.stderr);
  const back = join(dir, "back.bin");
  r = await sbx(["cp", "cp1:/workspace/sub/rt.bin", back]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(sha(readFileSync(back)), sha(data));
  // The sandbox sees the same bytes.
  const sum = await sbx(["exec", "cp1", "--", "sha256sum", "/workspace/sub/rt.bin"]);
  assert.equal(sum.stdout.toString().split(" ")[0], sha(data));
  // Into a directory on either side: the source's name is kept.
  r = await sbx(["cp", src, "cp1:/workspace/sub"]);
  assert.equal(r.code, 0, r.stderr);
  const into = join(dir, "into");
  mkdirSync(into);
  r = await sbx(["cp", "cp1:sub/rt.bin", into]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(sha(readFileSync(join(into, "rt.bin"))), sha(data));
  // '-' is stdin or stdout.
  r = await sbx(["cp", "-", "cp1:/tmp/piped"], { input: "through a pipe\n" });
  assert.equal(r.code, 0, r.stderr);
  r = await sbx(["cp", "cp1:/tmp/piped", "-"]);
  assert.equal(r.stdout.toString(), "through a pipe\n");
  // A file that is not there: the server's 404, one line, nothing left behind.
  r = await sbx(["cp", "cp1:/nope", join(dir, "nope")]);
  assert.equal(r.code, 1);
  oneLineError(r, /^sbx: cp cp1: 404 file_not_found: /);
  assert.equal(existsSync(join(dir, "nope")), false);
  r = await sbx(["cp", join(dir, "missing-local"), "cp1:/tmp/x"]);
  assert.equal(r.code, 4);
  oneLineError(r, /missing-local: No such file/);
});

test("cp shows a progress line on a terminal for a large file, none for a small one or off a terminal", async () => {
  const big = join(dir, "progress.bin");
  writeFileSync(big, randomBytes(3 * 1024 * 1024));
  const small = join(dir, "small.txt");
  writeFileSync(small, "small\n");
  const onTty = (args) => run("python3", [PTY_DRIVE, SBX, ...args, "::"]);
  let r = await onTty(["cp", big, "pg1:/tmp/progress.bin"]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout.toString(), /\r +[0-9.]+ \/ 3\.0 MiB +\d+%/);
  r = await onTty(["cp", "pg1:/tmp/progress.bin", join(dir, "progress.back")]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout.toString(), /MiB/);
  r = await onTty(["cp", small, "pg1:/tmp/small.txt"]);
  assert.equal(r.code, 0, r.stderr);
  assert.doesNotMatch(r.stdout.toString(), /MiB/);
  r = await sbx(["cp", big, "pg1:/tmp/progress2.bin"]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stderr, "");
});

// A tree as lines "path type mode [sha256 | link target] [mtime]", sorted:
// the local one, and the sandbox's (by a shell script in it).
function describeLocal(root) {
  const out = [];
  const walk = (rel) => {
    const p = rel === "." ? root : join(root, rel);
    const st = lstatSync(p);
    const mode = (st.mode & 0o7777).toString(8);
    if (st.isSymbolicLink()) out.push(`${rel} l ${readlinkSync(p)}`);
    else if (st.isDirectory()) {
      out.push(`${rel} d ${mode}`);
      for (const e of readdirSync(p)) walk(rel === "." ? `./${e}` : `${rel}/${e}`);
    } else out.push(`${rel} f ${mode} ${sha(readFileSync(p))} ${Math.floor(st.mtimeMs / 1000)}`);
  };
  walk(".");
  return out.sort().join("\n");
}
const DESCRIBE =
  'cd "$1" && find . | while read -r f; do if [ -L "$f" ]; then echo "$f l $(readlink "$f")"; ' +
  'elif [ -d "$f" ]; then echo "$f d $(stat -c %a "$f")"; ' +
  'else echo "$f f $(stat -c %a "$f") $(sha256sum < "$f" | cut -d" " -f1) $(stat -c %Y "$f")"; fi; done | sort';
async function describeRemote(name, path, opts) {
  const r = await sbx(["exec", name, "--", "sh", "-c", DESCRIBE, "sh", path], opts);
  assert.equal(r.code, 0, r.stderr);
  return r.stdout.toString().trimEnd();
}

// A tree of every kind cp carries, under root.
function makeTree(tree) {
  mkdirSync(join(tree, "a", "b"), { recursive: true });
  mkdirSync(join(tree, "empty"));
  mkdirSync(join(tree, "private"));
  const bin = randomBytes(300000);
  writeFileSync(join(tree, "a", "b", "bin"), bin);
  writeFileSync(join(tree, "top.txt"), "top\n");
  writeFileSync(join(tree, "run.sh"), "#!/bin/sh\necho hi\n");
  writeFileSync(join(tree, "private", "secret"), "s\n");
  writeFileSync(join(tree, "a", "name with spaces"), "");
  chmodSync(join(tree, "run.sh"), 0o755);
  chmodSync(join(tree, "private", "secret"), 0o600);
  chmodSync(join(tree, "top.txt"), 0o644);
  chmodSync(join(tree, "a", "b", "bin"), 0o640);
  chmodSync(join(tree, "private"), 0o700);
  chmodSync(join(tree, "a"), 0o750);
  chmodSync(join(tree, "empty"), 0o755);
  chmodSync(tree, 0o755);
  symlinkSync("top.txt", join(tree, "link"));
  symlinkSync("../../top.txt", join(tree, "a", "b", "up"));
  symlinkSync("/etc/passwd", join(tree, "abs"));
  symlinkSync("a", join(tree, "dirlink"));
  symlinkSync("nowhere", join(tree, "dangling"));
  const when = new Date("2024-02-03T04:05:06Z");
  utimesSync(join(tree, "top.txt"), when, when);
}

test("cp copies a tree both ways: names, types, modes, symlinks (as links), empty directories, times", async () => {
  const tree = join(dir, "tree");
  makeTree(tree);
  const want = describeLocal(tree);
  assert.match(want, /^\. d 755$/m);
  assert.match(want, /^\.\/abs l \/etc\/passwd$/m);

  let r = await sbx(["cp", tree, "tr1:/workspace/t"]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stderr, "");
  assert.equal(await describeRemote("tr1", "/workspace/t"), want);
  // The links are links in the sandbox too, not what they point at.
  r = await sbx(["exec", "tr1", "--", "sh", "-c", "[ -L /workspace/t/abs ] && [ -L /workspace/t/dirlink ] && stat -c %U:%G /workspace/t/run.sh"]);
  assert.equal(r.stdout.toString(), "root:root\n", r.stderr);

  // Back into an existing directory: under the source's name, the same tree.
  const back = join(dir, "back");
  mkdirSync(back);
  r = await sbx(["cp", "tr1:/workspace/t", back]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(describeLocal(join(back, "t")), want);
  // A tree made in the sandbox comes out as it is there.
  r = await sbx(["exec", "tr1", "--", "sh", "-c",
    "mkdir -p /tmp/m/d/e && cd /tmp/m && echo x > f && chmod 604 f && chmod 711 d && ln -s /proc/self/root out && ln -s d/e in && touch -d '2020-01-01 00:00:00' f"]);
  assert.equal(r.code, 0, r.stderr);
  r = await sbx(["cp", "tr1:/tmp/m", join(dir, "m")]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(describeLocal(join(dir, "m")), await describeRemote("tr1", "/tmp/m"));
  assert.equal(readlinkSync(join(dir, "m", "out")), "/proc/self/root");
});

test("cp copies a tree both ways through GNU tar too (the debian image)", { skip: !HAVE_DEBIAN && "no debian image" }, async () => {
  // A daemon of its own: this file's has only the tiny image.
  const dd = await new Daemon().start();
  try {
    const opts = { env: { SANDBOXD_TOKEN: new Client(dd).tok } };
    const tree = join(dir, "gnu-tree");
    makeTree(tree);
    const want = describeLocal(tree);
    assert.equal((await sbx(["attach", "gnu1", "--image", "debian"], opts)).code, 0);
    let r = await sbx(["cp", tree, "gnu1:/workspace/t"], opts);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(await describeRemote("gnu1", "/workspace/t", opts), want);
    r = await sbx(["cp", "gnu1:/workspace/t", join(dir, "gnu-back")], opts);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(describeLocal(join(dir, "gnu-back")), want);
  } finally {
    await dd.destroy();
  }
});

test("cp of a single file keeps its mode both ways", async () => {
  const f = join(dir, "mode.sh");
  writeFileSync(f, "#!/bin/sh\n");
  chmodSync(f, 0o750);
  let r = await sbx(["cp", f, "sm1:/workspace/mode.sh"]);
  assert.equal(r.code, 0, r.stderr);
  r = await sbx(["exec", "sm1", "--", "sh", "-c", "stat -c %a mode.sh; chmod 600 mode.sh"]);
  assert.equal(r.stdout.toString(), "750\n");
  r = await sbx(["cp", "sm1:mode.sh", join(dir, "mode.back")]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(lstatSync(join(dir, "mode.back")).mode & 0o7777, 0o600);
});

test("ps lists processes, logs prints and follows their output, kill signals and forgets", async () => {
  const p = await c.spawn("p1", ["sh", "-c", "echo started; echo warn >&2; trap 'echo bye; exit 5' TERM; while :; do sleep 1; done"]);
  const id = p.processId;
  // The output is there once a poll that waits for it says so.
  for (let out = ""; !out.includes("started"); ) out += (await c.poll("p1", id, { waitMs: 5000 })).stdout;
  let r = await sbx(["ps", "p1"]);
  assert.equal(r.code, 0, r.stderr);
  const row = r.stdout.toString().split("\n").find((l) => l.startsWith(id));
  assert.ok(row, r.stdout.toString());
  assert.match(row, /running/);
  r = await sbx(["logs", "p1", id]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout.toString(), "started\n");
  // logs -f runs until the process exits; the TERM sent meanwhile ends it.
  const follow = sbx(["logs", "-f", "p1", id]);
  r = await sbx(["kill", "-s", "TERM", "p1", id]);
  assert.equal(r.code, 0, r.stderr);
  const f = await follow;
  assert.equal(f.code, 0, f.stderr);
  assert.equal(f.stdout.toString(), "started\nbye\n");
  const ps = JSON.parse((await sbx(["ps", "p1", "--json"])).stdout);
  const rec = ps.find((x) => x.processId === id);
  assert.equal(rec.state, "exited");
  assert.equal(rec.exitCode, 5);
  r = await sbx(["kill", "p1", id]);
  assert.equal(r.code, 0, r.stderr);
  r = await sbx(["kill", "p1", id]);
  assert.equal(r.code, 1);
  oneLineError(r, /404 process_not_found/);
  r = await sbx(["kill", "-s", "BOGUS", "p1", "p0-0"]);
  assert.equal(r.code, 1);
  oneLineError(r, /400 invalid_argument/);
});

test("ls, get, stop and rm", async () => {
  assert.equal((await sbx(["attach", "life"])).code, 0);
  let r = await sbx(["ls"]);
  assert.equal(r.code, 0);
  const lines = r.stdout.toString().trim().split("\n");
  assert.match(lines[0], /^NAME +STATE +CLASS +IMAGE +NETWORK +LAST ACTIVE$/);
  assert.ok(lines.some((l) => /^life +running /.test(l)), r.stdout.toString());
  r = await sbx(["stop", "life"]);
  assert.equal(r.code, 0, r.stderr);
  const g = JSON.parse((await sbx(["get", "life", "--json"])).stdout);
  assert.notEqual(g.state, "running");
  r = await sbx(["rm", "life"]);
  assert.equal(r.code, 0, r.stderr);
  r = await sbx(["get", "life"]);
  assert.equal(r.code, 1);
  oneLineError(r, /^sbx: get life: 404 sandbox_not_found: /);
  r = await sbx(["exec", "-i", "e1", "--", "true"]);
  assert.equal(r.code, 0, r.stderr);
});

test("errors are one line with the server's code: a bad name, a bad token, a daemon that is down", async () => {
  let r = await sbx(["exec", "bad/name", "--", "true"]);
  assert.equal(r.code, 125);
  oneLineError(r, /^sbx: exec bad\/name: 400 invalid_argument: /);
  r = await sbx(["get", "bad/name"]);
  assert.equal(r.code, 1);
  oneLineError(r, /invalid_argument/);
  // A token the server did not sign, with the server given explicitly.
  const forged = token.slice(0, -4) + (token.endsWith("AAAA") ? "BBBB" : "AAAA");
  r = await sbx(["ls"], { env: { SANDBOXD_TOKEN: forged } });
  assert.equal(r.code, 1);
  oneLineError(r, /^sbx: ls: 401 unauthenticated: /);
  r = await sbx(["--token", "not-a-jwt", "--server", d.url, "ls"]);
  assert.equal(r.code, 1);
  oneLineError(r, /401 unauthenticated/);
  // No token at all, or one without an issuer and no server.
  r = await sbx(["ls"], { noToken: true });
  assert.equal(r.code, 2);
  oneLineError(r, /no identity token/);
  r = await sbx(["ls"], { env: { SANDBOXD_TOKEN: "x.y.z" } });
  assert.equal(r.code, 2);
  oneLineError(r, /no server URL/);
  // Nothing listens there.
  const port = await freePort();
  r = await sbx(["--server", `http://127.0.0.1:${port}`, "ls"]);
  assert.equal(r.code, 3);
  oneLineError(r, /^sbx: ls: unreachable: GET http:\/\/127\.0\.0\.1:\d+\/v1\/sandboxes: /);
  r = await sbx(["exec", "e1", "--", "true"], { env: { SANDBOXD_URL: `http://127.0.0.1:${port}` } });
  assert.equal(r.code, 125);
  oneLineError(r, /unreachable/);
  // Usage errors: exit 2, and they point at --help.
  r = await sbx(["get"]);
  assert.equal(r.code, 2);
  oneLineError(r, /expected NAME \(sbx get --help\)/);
  r = await sbx(["frobnicate"]);
  assert.equal(r.code, 2);
});

test("--help on every verb; settings from the config file, flags over the environment", async () => {
  for (const verb of ["attach", "exec", "shell", "ps", "logs", "kill", "cp", "ls", "get", "stop", "rm", "snapshot", "fork", "images"]) {
    const r = await sbx([verb, "--help"]);
    assert.equal(r.code, 0, verb);
    assert.match(r.stdout.toString(), new RegExp(`^usage: sbx ${verb}`), verb);
  }
  const xdg = join(dir, "xdg");
  mkdirSync(join(xdg, "sandboxd"), { recursive: true });
  writeFileSync(join(xdg, "sandboxd", "config"), `# sbx settings\nserver = ${d.url}\n  token =   ${token}  \n`);
  let r = await sbx(["ls", "--json"], { noToken: true, env: { XDG_CONFIG_HOME: xdg } });
  assert.equal(r.code, 0, r.stderr);
  // The environment over the file: this token is refused.
  r = await sbx(["ls"], { noToken: true, env: { XDG_CONFIG_HOME: xdg, SANDBOXD_TOKEN: "not-a-jwt" } });
  assert.equal(r.code, 1);
  oneLineError(r, /401/);
  // The flag over both.
  r = await sbx(["--token", token, "ls"], { noToken: true, env: { XDG_CONFIG_HOME: xdg, SANDBOXD_TOKEN: "not-a-jwt" } });
  assert.equal(r.code, 0, r.stderr);
  writeFileSync(join(xdg, "sandboxd", "config"), "server = x\nbogus line\n");
  r = await sbx(["ls"], { env: { XDG_CONFIG_HOME: xdg } });
  assert.equal(r.code, 2);
  oneLineError(r, /config:2: not `key = value`/);
});

test("the bash completion completes verbs, options and the server's sandbox names", async () => {
  const script = join(ROOT, "contrib", "bash-completion", "sbx");
  const complete = async (...words) => {
    const line = `source '${script}'; COMP_WORDS=(${words.map((w) => `'${w}'`).join(" ")}); COMP_CWORD=${words.length - 1}; _sbx; printf '%s\\n' "\${COMPREPLY[@]}"`;
    const r = await run("bash", ["-c", line], { env: { PATH: `${dirname(SBX)}:${process.env.PATH}` } });
    assert.equal(r.code, 0, r.stderr);
    return r.stdout.toString().trim().split("\n").sort();
  };
  assert.deepEqual(await complete("sbx", "ex"), ["exec"]);
  assert.deepEqual(await complete("sbx", "kill", "-s", "T"), ["TERM"]);
  assert.ok((await complete("sbx", "exec", "--")).includes("--stdin"));
  assert.equal((await sbx(["attach", "compl-one"])).code, 0);
  assert.deepEqual(await complete("sbx", "get", "compl-"), ["compl-one"]);
});

test("snapshot makes an image that a new sandbox starts from", async () => {
  assert.equal((await sbx(["exec", "snap1", "--", "sh", "-c", "echo kept > /workspace/mark"])).code, 0);
  const img = `sbx-${randomBytes(4).toString("hex")}`;
  let r = await sbx(["snapshot", "snap1", img, "--json"]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(JSON.parse(r.stdout).image, img);
  const list = JSON.parse((await sbx(["images", "--json"])).stdout);
  assert.ok(list.some((i) => i.name === img && i.source === "snapshot"));
  assert.equal((await sbx(["attach", "snap2", "--image", img])).code, 0);
  r = await sbx(["exec", "snap2", "--", "cat", "/workspace/mark"]);
  assert.equal(r.stdout.toString(), "kept\n");
  r = await sbx(["snapshot", "snap1", img]);
  assert.equal(r.code, 1);
  oneLineError(r, /409 already_exists/);
  await sbx(["rm", "snap2"]);
});

test("fork makes a new sandbox from another's files now, each on its own from then on", async () => {
  assert.equal((await sbx(["exec", "fk1", "--", "sh", "-c", "echo before > /workspace/mark && chmod 640 /workspace/mark"])).code, 0);
  let r = await sbx(["fork", "fk1", "fk2", "--json"]);
  assert.equal(r.code, 0, r.stderr);
  const h = JSON.parse(r.stdout);
  assert.equal(h.name, "fk2");
  assert.equal(h.state, "running");
  r = await sbx(["exec", "fk2", "--", "sh", "-c", "stat -c %a /workspace/mark; cat /workspace/mark; echo fork > /workspace/mark"]);
  assert.equal(r.stdout.toString(), "640\nbefore\n", r.stderr);
  r = await sbx(["exec", "fk1", "--", "cat", "/workspace/mark"]);
  assert.equal(r.stdout.toString(), "before\n");
  assert.ok(JSON.parse((await sbx(["ls", "--json"])).stdout).some((s) => s.name === "fk2"));
  r = await sbx(["fork", "fk1", "fk2"]);
  assert.equal(r.code, 1);
  oneLineError(r, /^sbx: fork fk1: 409 already_exists: /);
  r = await sbx(["fork", "fk1", "bad/name"]);
  assert.equal(r.code, 1);
  oneLineError(r, /400 invalid_argument/);
  r = await sbx(["fork", "fk1"]);
  assert.equal(r.code, 2);
  await sbx(["rm", "fk2"]);
});

test("shell runs on a terminal: typed input, the window's size, the command's exit code", async () => {
  const r = await run("python3", [PTY_DRIVE, SBX, "shell", "sh1", "::",
    "expect:# ", "send:echo $((6*7))\\r", "expect:42",
    "size:50x132", "send:stty size\\r", "expect:50 132",
    "send:exit 7\\r"]);
  assert.equal(r.code, 7, `${r.stderr}\n${r.stdout}`);
  assert.match(r.stderr, /exit=7/);
  // Ctrl-C is the remote terminal's: it interrupts the remote command,
  // not sbx, which goes on to the shell's own exit.
  // (The ^C waits for the output of the line that runs sleep: typed while
  // the shell still edits the line, it would be a byte of the line.)
  const i = await run("python3", [PTY_DRIVE, SBX, "shell", "sh1", "::",
    "expect:# ", "send:echo start; sleep 1000\\r", "expect:start\r\n", "send:\\x03", "expect:# ",
    "send:exit 3\\r"]);
  assert.equal(i.code, 3, `${i.stderr}\n${i.stdout}`);
  // A signal to sbx hangs the remote terminal up: the shell ends (129, by
  // SIGHUP), and nothing is left running in the sandbox.
  const t = await run("python3", [PTY_DRIVE, SBX, "shell", "sh1", "::", "expect:# ", "kill:TERM"]);
  assert.equal(t.code, 129, `${t.stderr}\n${t.stdout}`);
  const ps = JSON.parse((await sbx(["ps", "sh1", "--json"])).stdout);
  assert.deepEqual(ps.filter((x) => x.state === "running"), []);
  // An explicit command, its code passed through.
  const e = await run("python3", [PTY_DRIVE, SBX, "shell", "sh1", "--", "sh", "-c", "tty; exit 9", "::"]);
  assert.equal(e.code, 9, e.stderr);
  assert.match(e.stdout.toString(), /\/dev\/pts\//);
});

// Run libsandboxd-live MODE NAME against daemon dd: it calls, prints
// "ready", waits for a line, calls again. The daemon's counters around the
// second call (after `pause` ms) are returned.
async function secondCall(dd, tok, mode, name, pause = 0) {
  const p = spawn(LIVE, [mode, name], { env: { ...process.env, SANDBOXD_TOKEN: tok }, stdio: ["pipe", "pipe", "pipe"] });
  let out = "";
  let err = "";
  const closed = new Promise((res) => p.on("close", (code) => res(code)));
  p.stderr.on("data", (b) => (err += b));
  const ready = new Promise((res) => p.stdout.on("data", (b) => { out += b; if (out.includes("ready\n")) res(); }));
  await Promise.race([ready, closed]);
  if (pause) await new Promise((r) => setTimeout(r, pause));
  const before = await metrics(dd);
  p.stdin.end("\n");
  const code = await closed;
  const afterM = await metrics(dd);
  assert.equal(code, 0, `${out}\n${err}`);
  assert.match(out, /exec two: 0 two/);
  return { requests: afterM.requests - before.requests, client4xx: afterM.client4xx - before.client4xx };
}

test("a stale credential is re-attached once, and the call then works", async () => {
  // The first exec, then a delete through a second client: the first
  // client's credential is stale. Its next call: the 401, one attach, the
  // retry, and the metrics request itself; nothing more.
  const n = await secondCall(d, token, "stale", "st1");
  assert.deepEqual(n, { requests: 4, client4xx: 1 });
});

test("a credential is refreshed before it expires, not after a 401", async () => {
  const short = await new Daemon({ images, args: ["--credential-ttl", "3s"] }).start();
  try {
    // Past the whole lifetime: the call attaches first, then runs (and the
    // metrics request): no 401 on the way.
    const n = await secondCall(short, new Client(short).tok, "again", "rf1", 3500);
    assert.deepEqual(n, { requests: 3, client4xx: 0 });
    // Within it, the cached credential serves: the call alone.
    const m = await secondCall(short, new Client(short).tok, "again", "rf1");
    assert.deepEqual(m, { requests: 2, client4xx: 0 });
  } finally {
    await short.destroy();
  }
});

test("one libsandboxd client shared by threads: their first calls share one attach", async () => {
  const before = await metrics();
  const r = await run(LIVE, ["threads", "th1", "16"]);
  const afterM = await metrics();
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout.toString().trim().split("\n").length, 16);
  // 16 execs, one attach, and the metrics request itself.
  assert.equal(afterM.requests - before.requests, 18);
});

// A server that breaks the contract on purpose (the real daemon never
// does, so this one stands in for a hostile or broken one): every answer
// it gives is a clear one-line error from sbx, never a crash or a hang.
function frame(type, payload = Buffer.alloc(0), offset = 0n, reserved = 0) {
  const h = Buffer.alloc(16);
  h[0] = type;
  h[1] = reserved;
  h.writeUInt32BE(payload.length, 4);
  h.writeBigUInt64BE(offset, 8);
  return Buffer.concat([h, payload]);
}
const startFrame = (from = 0) =>
  frame(1, Buffer.from(JSON.stringify({ processId: "p1", command: ["x"], state: "running", stdoutFrom: from, stderrFrom: 0 })));

const exitFrame = (outNext) =>
  frame(4, Buffer.from(JSON.stringify({ processId: "p1", command: ["x"], state: "exited", exitCode: 0, startedAt: "2026-01-01T00:00:00.000Z", exitedAt: "2026-01-01T00:00:01.000Z", stdoutNext: outNext, stderrNext: 0 })));

// A ustar entry: type "0" a file, "1" a hard link, "2" a symlink, "3" a device.
function tarEntry(name, { type = "0", body = Buffer.alloc(0), link = "" } = {}) {
  const h = Buffer.alloc(512);
  const put = (off, len, str) => h.write(str, off, len, "latin1");
  const oct = (off, len, n) => put(off, len, n.toString(8).padStart(len - 1, "0") + "\0");
  put(0, 100, name);
  oct(100, 8, type === "2" ? 0o777 : 0o644);
  oct(108, 8, 0);
  oct(116, 8, 0);
  oct(124, 12, body.length);
  oct(136, 12, 1700000000);
  put(148, 8, "        ");
  put(156, 1, type);
  put(157, 100, link);
  put(257, 6, "ustar\0");
  put(263, 2, "00");
  let sum = 0;
  for (const b of h) sum += b;
  put(148, 8, sum.toString(8).padStart(6, "0") + "\0 ");
  const pad = Buffer.alloc((512 - (body.length % 512)) % 512);
  return Buffer.concat([h, body, pad]);
}
// What a hostile sandbox's `tar -c` could send, by sandbox name.
const hostileTars = (outside) => ({
  traverse: [tarEntry("../evil", { body: Buffer.from("x") })],
  absolute: [tarEntry("/tmp/sbx-evil", { body: Buffer.from("x") })],
  hardlink: [tarEntry("h", { type: "1", link: "../../etc/passwd" })],
  device: [tarEntry("dev", { type: "3" })],
  throughlink: [tarEntry("l", { type: "2", link: outside }), tarEntry("l/planted", { body: Buffer.from("x") })],
});

async function hostileServer(outside = "/nonexistent") {
  const tars = hostileTars(outside);
  const http = await import("node:http");
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const server = http.createServer((req, res) => {
    const name = decodeURIComponent(req.url.split("/")[3] || "");
    const json = (status, body) => {
      res.writeHead(status, { "content-type": "application/json" });
      res.end(typeof body === "string" ? body : JSON.stringify(body));
    };
    req.resume();
    if (req.url.endsWith("/attach")) {
      const headers = name === "inject" ? { Authorization: "Bearer x\r\nX-Evil: 1" } : { Authorization: "Bearer cred" };
      return json(200, { name, class: "default", state: "running", endpoint: `${url}/v1/sandboxes/${name}`, headers, expiresAt: "2099-01-01T00:00:00.000Z", network: "none", image: "tiny" });
    }
    if (req.method === "POST" && req.url.endsWith("/processes"))
      return json(200, { processId: "p1", command: ["x"], state: "running", startedAt: "2026-01-01T00:00:00.000Z" });
    if (req.method === "DELETE") return res.writeHead(204).end();
    if (req.url.includes("/files/list"))
      return json(200, { entries: [{ name: "..", isDirectory: true }, { name: "ok", isDirectory: false }] });
    if (req.url.includes("/stream")) {
      res.writeHead(200, { "content-type": "application/vnd.sandboxd.stream" });
      if (name === "badframe") return res.end(Buffer.concat([startFrame(), frame(2, Buffer.from("x"), 0n, 1)]));
      if (name === "gap") return res.end(Buffer.concat([startFrame(), frame(2, Buffer.from("ab"), 0n), frame(2, Buffer.from("cd"), 7n)]));
      if (name === "toobig") return res.end(Buffer.concat([startFrame(), Buffer.from([2, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0])]));
      // A start at the offset asked, the data once, then never an exit.
      const from = Number(new URL(req.url, url).searchParams.get("stdoutFrom"));
      if (name === "noexit")
        return res.end(from ? startFrame(from) : Buffer.concat([startFrame(), frame(2, Buffer.from("partial\n"), 0n)]));
      if (tars[name]) {
        const tar = Buffer.concat([...tars[name], Buffer.alloc(1024)]);
        return res.end(Buffer.concat([startFrame(), frame(2, tar, 0n), exitFrame(tar.length)]));
      }
      return res.end(frame(2, Buffer.from("no start")));
    }
    switch (name) {
      case "badjson": return json(200, "{not json");
      case "missing": return json(200, { state: "running" });
      case "wrongtype": return json(200, { name: 5, state: "running" });
      case "html": res.writeHead(404, { "content-type": "text/html" }); return res.end("<h1>nope</h1>");
      case "redirect": res.writeHead(302, { location: "http://example.com/" }); return res.end();
      case "huge": {
        res.writeHead(200, { "content-type": "application/json" });
        const chunk = Buffer.alloc(1 << 20, 0x20);
        let sent = 0;
        const more = () => { while (sent < 40 && res.write(chunk)) sent++; if (sent >= 40) res.end(); else sent++; };
        res.on("drain", more);
        return more();
      }
      case "cut": res.writeHead(200, { "content-type": "application/json", "content-length": "100" }); return res.end('{"name":"cut"').socket?.destroy();
      default: return json(404, { error: { code: "sandbox_not_found", message: `no ${name}` } });
    }
  });
  await new Promise((r) => server.listen(port, "127.0.0.1", r));
  return { url, close: () => new Promise((r) => server.close(r)) };
}

test("answers that break the contract are one-line errors, never a crash or a hang", async () => {
  const outside = join(dir, "outside");
  mkdirSync(outside);
  const h = await hostileServer(outside);
  try {
    // An unsigned token whose iss is this server: sbx reads iss, the server never checks.
    const b64 = (o) => Buffer.from(JSON.stringify(o)).toString("base64url");
    const tok = `${b64({ alg: "none" })}.${b64({ iss: h.url, sub: "d", acct: "a" })}.sig`;
    const opts = { env: { SANDBOXD_TOKEN: tok } };
    const cases = [
      [["get", "badjson"], 3, /get badjson: bad_response: answer is not JSON/],
      [["get", "missing"], 3, /bad_response: answer: no string 'name'/],
      [["get", "wrongtype"], 3, /bad_response: answer: no string 'name'/],
      [["get", "huge"], 3, /bad_response: GET .*: an answer over 16777216 bytes/],
      [["get", "cut"], 3, /get cut: unreachable: /],
      [["get", "html"], 1, /get html: 404 unknown: HTTP 404 without an error body/],
      [["get", "redirect"], 1, /get redirect: 302 unknown/],
      [["get", "other"], 1, /get other: 404 sandbox_not_found: no other/],
      [["exec", "badframe", "--", "x"], 125, /bad_response: stream: a frame head with non-zero reserved bytes/],
      [["exec", "gap", "--", "x"], 125, /bad_response: stream: stdout data at offset 7, expected 2/],
      [["exec", "toobig", "--", "x"], 125, /bad_response: stream: a frame of 4294967295 bytes/],
      [["exec", "nostart", "--", "x"], 125, /bad_response: stream: the first frame is of type 2, not start/],
      [["exec", "noexit", "--", "x"], 125, /bad_response: stream: the body ended without an exit frame/],
      [["exec", "inject", "--", "x"], 125, /bad_response: answer: a bad credential header/],
      // A tar from the sandbox that would write outside the destination,
      // or make what cp never makes.
      [["cp", "traverse:/d", join(dir, "trav")], 3, /the tar from traverse holds a bad name '\.\.\/evil'/],
      [["cp", "absolute:/d", join(dir, "trav")], 3, /the tar from absolute holds a bad name '\/tmp\/sbx-evil'/],
      [["cp", "hardlink:/d", join(dir, "trav")], 3, /the tar from hardlink holds a bad hard link '\.\.\/\.\.\/etc\/passwd'/],
      [["cp", "device:/d", join(dir, "trav")], 3, /the tar from device holds a special file 'dev'/],
      [["cp", "throughlink:/d", join(dir, "trav")], 4, /l\/planted: /],
    ];
    for (const [args, code, pattern] of cases) {
      const r = await sbx(args, opts);
      assert.equal(r.code, code, `${args.join(" ")}: ${r.stderr}`);
      oneLineError(r, pattern);
    }
    assert.deepEqual(readdirSync(outside), []);
    assert.equal(existsSync(join(dir, "evil")), false);
    assert.equal(existsSync("/tmp/sbx-evil"), false);
    // What a cut stream delivered before it broke is on stdout, once:
    // the reconnects after it find nothing new and give up.
    const r = await sbx(["exec", "noexit", "--", "x"], opts);
    assert.equal(r.stdout.toString(), "partial\n");
  } finally {
    await h.close();
  }
});

test("libsandboxd's exec with stdin: fed whole, output capped at 1 MiB, killed at its timeout", async () => {
  const r = await run(LIVE, ["stdin", "in1"]);
  assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
  assert.match(r.stdout.toString(), /^cat: exit 0, 1048576 bytes out, truncated 1, timed out 0$/m);
  assert.match(r.stdout.toString(), /^sleep: exit 137, 0 bytes out, truncated 0, timed out 1$/m);
});
