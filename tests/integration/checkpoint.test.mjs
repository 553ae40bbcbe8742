// Checkpoints and forks: POST {endpoint}/checkpoint saves a sandbox's
// processes, their memory and its files; a start after its processes ended
// (a host reboot, simulated by SIGKILLing the daemon and every process of
// the sandbox) resumes exactly that; POST {endpoint}/fork starts new
// sandboxes from it. The gvisor class can; the ns class answers 409.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, readdirSync, writeFileSync, existsSync } from "node:fs";
import { join } from "node:path";
import { Daemon, Client, until, GVISOR, CLASS } from "./lib/daemon.mjs";

const COUNT = "i=0; while :; do i=$((i+1)); echo $i > /tmp/count; sleep 0.05; done";

let d, c;
before(async () => {
  d = await new Daemon({ args: ["--pool-size", "0", "--gvisor-pool-size", "0"] }).start();
  c = new Client(d);
});
after(async () => d && (await d.destroy()));

const count = async (name) => Number((await c.sh(name, "cat /tmp/count")).stdout.trim());

function cgroupOf(daemon, id) {
  const inst = readFileSync(join(daemon.state, "instance-id"), "utf8").trim();
  const base = existsSync("/sys/fs/cgroup/unified/cgroup.procs") ? "/sys/fs/cgroup/unified" : "/sys/fs/cgroup";
  return join(base, "sandboxd", inst, `sb-${id}`);
}
// The running sandbox whose files (the host's view of its root) hold
// /workspace/<marker>.
function idOf(daemon, marker) {
  for (const id of readdirSync(join(daemon.state, "sandboxes")))
    if (existsSync(join(daemon.state, "sandboxes", id, "root/workspace", marker))) return id;
  throw new Error(`no sandbox holds ${marker}`);
}

test("the ns class cannot checkpoint: 409 unsupported_class (its forks carry files: snapshot.test.mjs)", { skip: GVISOR && "ns only" }, async () => {
  const r = await c.data("plain", "POST", "/checkpoint", {});
  assert.equal(r.status, 409);
  assert.equal(r.body.error.code, "unsupported_class");
});

test("a checkpoint keeps the sandbox running: processes, their memory and files go on", { skip: !GVISOR && `class ${CLASS} cannot checkpoint` }, async () => {
  const p = await c.spawn("keep", ["/bin/sh", "-c", COUNT]);
  await c.sh("keep", "echo before > /workspace/f; sleep 0.5");
  const r = await c.data("keep", "POST", "/checkpoint", {});
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.equal(r.body.running, true);
  assert.ok(r.body.sizeBytes > 0 && r.body.durationMs >= 0);
  const n1 = await count("keep");
  await until(async () => (await count("keep")) > n1);
  const st = await c.poll("keep", p.processId);
  assert.equal(st.state, "running");
  assert.equal((await c.sh("keep", "cat /workspace/f")).stdout, "before\n");
  // Bad input: a body that is not an object, a keepRunning that is not a boolean.
  assert.equal((await c.data("keep", "POST", "/checkpoint", { keepRunning: "yes" })).status, 400);
  assert.equal((await c.data("keep", "POST", "/checkpoint", [])).status, 400);
});

test("after a host reboot the sandbox resumes exactly its checkpoint, files included", { skip: !GVISOR && `class ${CLASS} cannot checkpoint` }, async () => {
  const dd = await new Daemon({ args: ["--pool-size", "0", "--gvisor-pool-size", "0"] }).start();
  try {
    const cc = new Client(dd);
    const p = await cc.spawn("boot", ["/bin/sh", "-c", COUNT]);
    await cc.sh("boot", "echo saved > /workspace/boot-marker; sleep 0.5");
    // Read before the checkpoint: the count it holds is at least this (one
    // read after it would race the counter, which runs on).
    const saved = Number((await cc.sh("boot", "cat /tmp/count")).stdout);
    assert.equal((await cc.data("boot", "POST", "/checkpoint", {})).status, 200);
    await cc.sh("boot", "echo later > /workspace/after; sleep 0.3");
    // The reboot: the daemon and every process of the sandbox gone.
    const cg = cgroupOf(dd, idOf(dd, "boot-marker"));
    await dd.stop("SIGKILL");
    writeFileSync(join(cg, "cgroup.kill"), "1");
    // Every task gone, threads too (cgroup.procs lists processes: a
    // multi-threaded one whose leader exited is no longer there).
    await until(() => /^populated 0$/m.test(readFileSync(join(cg, "cgroup.events"), "utf8")));
    await dd.start();
    const r = await cc.sh("boot", "cat /tmp/count; cat /workspace/boot-marker; ls /workspace");
    const [n, marker] = r.stdout.split("\n");
    assert.ok(Number(n) >= saved, `the counter resumed at ${n}, saved at ${saved}`);
    assert.equal(marker, "saved");
    assert.doesNotMatch(r.stdout, /after/, "files are the checkpoint's");
    // The process the checkpoint held is the same one, and counts on.
    const st = await cc.poll("boot", p.processId);
    assert.equal(st.state, "running");
    assert.match(dd.log, /name=boot .*why=restored from its checkpoint/);
  } finally {
    await dd.destroy();
  }
});

test("keepRunning false stops it; the next call restores it", { skip: !GVISOR && `class ${CLASS} cannot checkpoint` }, async () => {
  await c.spawn("park", ["/bin/sh", "-c", COUNT]);
  // Counting before the checkpoint (a loaded host starts it late).
  await until(async () => (await count("park")) > 3);
  const r = await c.data("park", "POST", "/checkpoint", { keepRunning: false });
  assert.equal(r.status, 200);
  assert.equal(r.body.running, false);
  assert.equal((await c.control("GET", "/v1/sandboxes/park")).body.state, "stopped");
  const n = await count("park");
  assert.ok(n > 3, `restored counter ${n}`);
  await until(async () => (await count("park")) > n);
});

test("a fork starts from the checkpoint with its own name, files and randomness", { skip: !GVISOR && `class ${CLASS} cannot checkpoint` }, async () => {
  assert.equal((await c.data("parent", "POST", "/fork", { name: "orphan" })).body.error.code, "no_checkpoint");
  await c.spawn("parent", ["/bin/sh", "-c", COUNT]);
  await c.sh("parent", "echo parent > /workspace/who");
  await until(async () => (await count("parent")) > 3);
  assert.equal((await c.data("parent", "POST", "/checkpoint", {})).status, 200);
  const f = await c.data("parent", "POST", "/fork", { name: "child" });
  assert.equal(f.status, 200, JSON.stringify(f.body));
  assert.equal(f.body.name, "child");
  assert.equal(f.body.state, "running");
  assert.ok(f.body.headers.Authorization.startsWith("Bearer "));
  // The handle works as an attach's does.
  const e = await fetch(`${f.body.endpoint}/exec`, {
    method: "POST", headers: { ...f.body.headers, "content-type": "application/json" },
    body: JSON.stringify({ command: ["hostname"] }),
  });
  assert.equal((await e.json()).stdout, "child\n");
  assert.ok((await count("child")) > 3, "the fork's counter goes on");
  await c.sh("child", "echo child > /workspace/who");
  assert.equal((await c.sh("parent", "cat /workspace/who")).stdout, "parent\n");
  assert.equal((await c.sh("child", "cat /workspace/who")).stdout, "child\n");
  const rnd = "head -c 16 /dev/urandom | od -An -tx1";
  assert.notEqual((await c.sh("parent", rnd)).stdout, (await c.sh("child", rnd)).stdout);
  // A second fork of the same name, a bad name, a missing one.
  assert.equal((await c.data("parent", "POST", "/fork", { name: "child" })).body.error.code, "already_exists");
  assert.equal((await c.data("parent", "POST", "/fork", { name: "../x" })).status, 400);
  assert.equal((await c.data("parent", "POST", "/fork", {})).status, 400);
  assert.equal((await c.data("parent", "POST", "/fork", { name: "a\u0000b" })).status, 400);
  // Two forks of one checkpoint at once.
  const [a, b] = await Promise.all(["twin-a", "twin-b"].map((name) => c.data("parent", "POST", "/fork", { name })));
  assert.equal(a.status, 200);
  assert.equal(b.status, 200);
  assert.equal((await c.sh("twin-b", "cat /workspace/who")).stdout, "parent\n");
  const list = (await c.control("GET", "/v1/sandboxes")).body.sandboxes.map((s) => s.name);
  for (const n of ["parent", "child", "twin-a", "twin-b"]) assert.ok(list.includes(n), n);
});
