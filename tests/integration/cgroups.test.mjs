// Where a sandbox's processes live on the host: every one in the
// sandbox's own cgroup of every hierarchy, from sandbox-init on, whether
// the start was served by a spare launcher (already in cgroups of its own,
// renamed to the sandbox's) or by a plain one (which moves sandbox-init);
// and the spares' cgroups, which exist while the daemon runs, go with it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { Daemon, Client, until, CLASS } from "./lib/daemon.mjs";

const V1 = ["memory", "pids", "cpu", "freezer"].filter((c) => existsSync(`/sys/fs/cgroup/${c}/cgroup.procs`));
const HYBRID = existsSync("/sys/fs/cgroup/unified/cgroup.procs");
const skip = CLASS !== "ns" ? "the ns class's launchers" : V1.length === 0 ? "no cgroup v1 hierarchy here" : false;

const inst = (d) => readFileSync(join(d.state, "instance-id"), "utf8").trim();
const v2root = (d) => join(HYBRID ? "/sys/fs/cgroup/unified" : "/sys/fs/cgroup", "sandboxd", inst(d));
const v1root = (d, ctrl) => join("/sys/fs/cgroup", ctrl, "sandboxd", inst(d));
const procs = (dir) => {
  try {
    return readFileSync(join(dir, "cgroup.procs"), "utf8").split("\n").filter(Boolean).map(Number);
  } catch {
    return [];
  }
};
const spares = (d) => V1.flatMap((c) => {
  try {
    return readdirSync(v1root(d, c)).filter((n) => n.startsWith("spare-")).map((n) => `${c}/${n}`);
  } catch {
    return [];
  }
});
// "N:controllers:/path" lines of /proc/PID/cgroup, by controller ("" for v2).
function cgroupsOf(pid) {
  const out = {};
  for (const line of readFileSync(`/proc/${pid}/cgroup`, "utf8").split("\n").filter(Boolean)) {
    const [, ctrls, path] = line.match(/^\d+:([^:]*):(.*)$/);
    for (const c of ctrls.split(",")) out[c] = path;
  }
  return out;
}

test("every process of a sandbox is in the sandbox's cgroups of every hierarchy, from its first, by either kind of launcher", { skip }, async () => {
  // Starts back to back use up the spares, so both kinds of launcher serve.
  const d = await new Daemon({ args: ["--pool-size", "0"] }).start();
  try {
    const c = new Client(d);
    await until(() => spares(d).length >= 2 * V1.length, 20000);
    for (let i = 0; i < 5; i++) {
      await c.attach(`cg-${i}`);
      await c.spawn(`cg-${i}`, ["sleep", "60"]);
    }
    const ids = readdirSync(v2root(d)).filter((n) => n.startsWith("sb-")).map((n) => n.slice(3));
    assert.equal(ids.length, 5, `sandbox cgroups: ${ids}`);
    for (const id of ids) {
      const pids = procs(join(v2root(d), `sb-${id}`));
      assert.ok(pids.length >= 2, `sandbox ${id}: processes ${pids} (sandbox-init and sleep)`);
      for (const pid of pids) {
        const cg = cgroupsOf(pid);
        for (const ctrl of V1)
          assert.equal(cg[ctrl], `/sandboxd/${inst(d)}/sb-${id}`, `sandbox ${id}, pid ${pid}, ${ctrl}: ${JSON.stringify(cg)}`);
        if (HYBRID) assert.equal(cg[""], `/sandboxd/${inst(d)}/sb-${id}`, `sandbox ${id}, pid ${pid}, v2`);
      }
      // The launcher that made it (a spare sat in these v1 cgroups) is gone
      // once its answer is out: the v1 cgroups hold the sandbox's processes only.
      await until(() => V1.every((ctrl) => procs(join(v1root(d, ctrl), `sb-${id}`)).sort().join() === pids.sort().join()), 10000)
        .catch(() => assert.fail(`sandbox ${id}: v1 ${V1.map((ctrl) => `${ctrl} ${procs(join(v1root(d, ctrl), `sb-${id}`))}`)} against ${pids}`));
    }
  } finally {
    await d.destroy();
  }
});

test("spare launchers hold cgroups of their own while the daemon runs; none is left after it stops", { skip }, async () => {
  const d = await new Daemon({ args: ["--pool-size", "0"] }).start();
  let during = [];
  try {
    during = await until(() => {
      const s = spares(d);
      return s.length >= 2 * V1.length && s;
    }, 20000);
    // Each holds one live process: the spare, ready for a start.
    for (const s of during.filter((x) => x.startsWith(`${V1[0]}/`))) {
      const pids = procs(join("/sys/fs/cgroup", V1[0], "sandboxd", inst(d), s.split("/")[1]));
      assert.equal(pids.length, 1, `${s}: ${pids}`);
    }
    const c = new Client(d);
    await c.attach("taken");
    assert.equal((await c.exec("taken", ["true"])).exitCode, 0);
    await d.stop();
    assert.deepEqual(spares(d), [], `left behind after the stop (there were ${during})`);
  } finally {
    await d.destroy();
  }
});
