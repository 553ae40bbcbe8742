// Lifecycle: idle suspend, stop, resume, reclaim, and surviving a reboot.
// Thresholds of a few seconds; the sandbox's files and cgroups are read
// from the host, so looking never counts as activity.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, readdirSync, existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Daemon, Client, sleep, until } from "./lib/daemon.mjs";

// The sandbox whose /workspace holds `marker` (warm pool entries exist
// too, with an empty /workspace), found from the host: its id, host dir,
// cgroup, and `root`, its filesystem as its processes see it (its files may
// live in a disk image mounted only in its own mount namespace).
function sandboxDir(d, marker) {
  const found = [];
  for (const id of readdirSync(join(d.state, "sandboxes"))) {
    const cg = cgroupDir(d, id);
    let pids = [];
    try {
      pids = readFileSync(join(cg, "cgroup.procs"), "utf8").trim().split("\n").filter(Boolean);
    } catch {}
    // Any of its processes whose root is the sandbox's (under gVisor the
    // first may be runsc's, whose root is not).
    const root = pids.map((p) => `/proc/${p}/root`).find((r) => {
      try {
        return existsSync(join(r, "workspace", marker));
      } catch {
        return false;
      }
    });
    if (root) found.push({ id, dir: join(d.state, "sandboxes", id), cg, root });
  }
  assert.equal(found.length, 1, `sandboxes holding ${marker}: ${found.map((f) => f.id)}`);
  return found[0];
}
function cgroupDir(d, id) {
  const inst = readFileSync(join(d.state, "instance-id"), "utf8").trim();
  for (const base of ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"]) {
    const p = join(base, "sandboxd", inst, `sb-${id}`);
    if (existsSync(join(base, "cgroup.controllers")) || existsSync(join(base, "cgroup.procs"))) return p;
  }
  throw new Error("no cgroup v2 hierarchy");
}
const counter = (root) => {
  try {
    return Number(readFileSync(join(root, "workspace/count"), "utf8").trim() || "0");
  } catch {
    return 0;
  }
};
async function state(c, name) {
  const r = await c.control("GET", `/v1/sandboxes/${name}`);
  return r.status === 200 ? r.body.state : r.status;
}
const COUNT = "i=0; while :; do i=$((i+1)); echo $i > /workspace/count.new; mv /workspace/count.new /workspace/count; echo tick $i; sleep 0.1; done";

test("idle suspends (processes frozen), attach resumes, poll offsets continue", async () => {
  const d = await new Daemon({ args: ["--idle-timeout", "2s"] }).start();
  try {
    const c = new Client(d);
    const p = (await c.data("idle", "POST", "/processes", { command: ["/bin/sh", "-c", COUNT] })).body;
    const first = (await c.data("idle", "GET", `/processes/${p.processId}?waitMs=2000`)).body;
    assert.match(first.stdout, /tick 1/);
    let dir;
    await until(() => {
      try {
        dir = sandboxDir(d, "count").root;
        return true;
      } catch {
        return false;
      }
    });
    await until(async () => (await state(c, "idle")) === "suspended");
    const a = counter(dir);
    await sleep(1000);
    assert.equal(counter(dir), a, "the counter advanced while suspended");
    const g = await c.control("GET", "/v1/sandboxes/idle");
    assert.equal(g.body.state, "suspended");
    // "Absent when nothing runs", as the documented client says.
    assert.equal(g.body.ceilingAt, undefined);
    // Attach resumes; the process goes on where it was, offsets unchanged.
    const h = await c.attach("idle");
    assert.equal(h.state, "running");
    await sleep(500);
    assert.ok(counter(dir) > a, "the counter did not advance after resume");
    const next = (await c.data("idle", "GET", `/processes/${p.processId}?stdoutFrom=${first.stdoutNext}`)).body;
    assert.equal(next.stdoutDropped, 0);
    assert.equal(next.state, "running");
    const ticks = (first.stdout + next.stdout).trim().split("\n").map((l) => Number(l.split(" ")[1]));
    ticks.forEach((t, i) => assert.equal(t, i + 1));
    const m = await (await fetch(`${d.url}/metrics`)).text();
    assert.match(m, /sandboxd_sandbox_transitions_total\{event="suspended"\} [1-9]/);
    assert.match(m, /sandboxd_sandbox_transitions_total\{event="resumed"\} [1-9]/);
    assert.match(d.log, /name=idle deployment=dep-a from=running to=suspended why=idle/);
  } finally {
    await d.destroy();
  }
});

test("stop suspends at once; an exec resumes it", async () => {
  const d = await new Daemon().start();
  try {
    const c = new Client(d);
    await c.sh("stopme", "echo kept > /workspace/f");
    assert.equal((await c.control("POST", "/v1/sandboxes/stopme/stop")).status, 204);
    assert.equal(await state(c, "stopme"), "suspended");
    const r = await c.sh("stopme", "cat /workspace/f");
    assert.equal(r.stdout, "kept\n");
    assert.equal(await state(c, "stopme"), "running");
  } finally {
    await d.destroy();
  }
});

test("suspended past suspended_ttl is reclaimed; the next attach is empty", async () => {
  const d = await new Daemon({ args: ["--suspended-ttl", "2s"] }).start();
  try {
    const c = new Client(d);
    await c.sh("ttl", "echo x > /workspace/f");
    await c.control("POST", "/v1/sandboxes/ttl/stop");
    await until(async () => (await state(c, "ttl")) === 404);
    assert.match(d.log, /name=ttl deployment=dep-a from=suspended to=deleted why=suspended_ttl/);
    c.handles.delete("ttl");
    assert.equal((await c.sh("ttl", "ls -A /workspace")).stdout, "");
  } finally {
    await d.destroy();
  }
});

test("max_age reclaims a busy sandbox", async () => {
  const d = await new Daemon({ args: ["--max-age", "3s"] }).start();
  try {
    const c = new Client(d);
    await c.sh("old", "echo x > /workspace/f");
    const t0 = Date.now();
    while ((await state(c, "old")) !== 404) {
      assert.ok(Date.now() - t0 < 15000, "not reclaimed");
      await c.exec("old", ["true"]).catch(() => {});
      await sleep(200);
    }
    assert.match(d.log, /name=old deployment=dep-a from=\w+ to=deleted why=max_age/);
  } finally {
    await d.destroy();
  }
});

test("delete of a frozen sandbox leaves no process, mount, cgroup or directory", async () => {
  const d = await new Daemon().start();
  try {
    const c = new Client(d);
    await c.sh("frozen", "sleep 1000 >/dev/null 2>&1 & sleep 1000 >/dev/null 2>&1 & echo x > /workspace/f");
    const { id, dir } = sandboxDir(d, "f");
    const cg = cgroupDir(d, id);
    const pids = readFileSync(join(cg, "cgroup.procs"), "utf8").trim().split("\n").map(Number);
    assert.ok(pids.length >= 3);
    await c.control("POST", "/v1/sandboxes/frozen/stop");
    assert.equal(await state(c, "frozen"), "suspended");
    assert.equal((await c.control("DELETE", "/v1/sandboxes/frozen")).status, 204);
    // Gone, or a zombie the host's init has not reaped yet: never running.
    const alive = (pid) => {
      try {
        return readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1][0] !== "Z";
      } catch {
        return false;
      }
    };
    for (const pid of pids) assert.ok(!alive(pid), `pid ${pid} survived`);
    assert.ok(!existsSync(cg), "cgroup left");
    assert.ok(!existsSync(dir), "directory left");
    assert.ok(!readFileSync("/proc/self/mountinfo", "utf8").includes(dir), "mount left");
    // Nor a loop device still backed by its disk image.
    await until(() => readdirSync("/sys/block").filter((b) => b.startsWith("loop")).every((b) => {
      try {
        return !readFileSync(`/sys/block/${b}/loop/backing_file`, "utf8").includes(dir);
      } catch {
        return true;
      }
    }), 5000);
  } finally {
    await d.destroy();
  }
});

test("a reboot (daemon SIGKILLed, every sandbox process killed) leaves it stopped, files intact", async () => {
  const d = await new Daemon().start();
  try {
    const c = new Client(d);
    await c.sh("reboot", "echo survived > /workspace/f");
    const { id } = sandboxDir(d, "f");
    const cg = cgroupDir(d, id);
    await d.stop("SIGKILL");
    writeFileSync(join(cg, "cgroup.kill"), "1");
    // Every task gone, threads too (cgroup.procs lists processes: a
    // multi-threaded one whose leader exited is no longer there).
    await until(() => /^populated 0$/m.test(readFileSync(join(cg, "cgroup.events"), "utf8")));
    await d.start();
    assert.equal(await state(c, "reboot"), "stopped");
    const g = await c.control("GET", "/v1/sandboxes/reboot");
    assert.equal(g.body.ceilingAt, undefined);
    assert.match(d.log, /name=reboot deployment=dep-a from=running to=stopped/);
    const h = await c.attach("reboot");
    assert.equal(h.state, "running");
    assert.equal((await c.sh("reboot", "cat /workspace/f")).stdout, "survived\n");
  } finally {
    await d.destroy();
  }
});

test("an agent killed under a running daemon is started again by the next call, files intact", async () => {
  const d = await new Daemon({ args: ["--pool-size", "0"] }).start();
  try {
    const c = new Client(d);
    await c.sh("crash", "echo kept > /workspace/f");
    const { id } = sandboxDir(d, "f");
    const cg = cgroupDir(d, id);
    writeFileSync(join(cg, "cgroup.kill"), "1");
    // Every task gone, threads too (cgroup.procs lists processes: a
    // multi-threaded one whose leader exited is no longer there).
    await until(() => /^populated 0$/m.test(readFileSync(join(cg, "cgroup.events"), "utf8")));
    const r = await c.sh("crash", "cat /workspace/f");
    assert.equal(r.stdout, "kept\n");
    assert.equal(await state(c, "crash"), "running");
    assert.match(d.log, /name=crash deployment=dep-a from=running to=stopped why=agent gone/);
  } finally {
    await d.destroy();
  }
});
