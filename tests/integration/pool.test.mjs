// The warm pool: it fills to its size (the sandboxd_pool_ready gauge),
// new names take its sandboxes, each under its own name, and it is filled
// again with starts made side by side (up to the host's cores), as the
// daemon's debug log of each warm start says.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { cpus } from "node:os";
import { Daemon, Client, GVISOR, until } from "./lib/daemon.mjs";

const pools = GVISOR ? ["--pool-size", "0", "--gvisor-pool-size", "4"] : ["--pool-size", "4"];
const d = new Daemon({ args: ["--network", "none", ...pools, "--log-level", "debug"] });
after(() => d.destroy());

async function ready() {
  const text = await (await fetch(`${d.url}/metrics`)).text();
  const m = /^sandboxd_pool_ready (\d+)$/m.exec(text);
  assert.ok(m, "/metrics has sandboxd_pool_ready");
  return Number(m[1]);
}

test("the pool fills, new names take from it, and it is filled again with starts side by side", { skip: cpus().length < 2 && "one core: one start at a time" }, async () => {
  await d.start();
  const c = new Client(d);
  await until(async () => (await ready()) === 4, 60000);
  const before = d.log.length;
  const names = ["w1", "w2", "w3", "w4"];
  await Promise.all(names.map((n) => c.attach(n)));
  await until(async () => (await ready()) === 4, 60000);
  const starts = [...d.log.slice(before).matchAll(/a warm start, (\d+) under way/g)].map((m) => Number(m[1]));
  assert.equal(starts.length, 4, "four warm starts refilled it");
  assert.ok(Math.max(...starts) >= 2, `the refill made starts side by side (under way: ${starts})`);
  assert.equal((d.log.match(/created \(warm pool\)/g) || []).length, 4, "the four names took warm sandboxes");
  for (const n of names) {
    assert.equal((await c.sh(n, "hostname")).stdout, `${n}\n`);
    assert.equal((await c.sh(n, `echo ${n} > /workspace/me && cat /workspace/me`)).stdout, `${n}\n`);
  }
});
