// Cluster mode against a real three-member etcd and three real sandboxd
// hosts (on loopback, each with its own port, state and ranges). The checks
// of the issue, in its order; each prints its figures beside what it
// asserts. Durations are printed, never asserted, except the protocol
// bound the design states (a lost host is noticed within its TTL + 1 s).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Client } from "../integration/lib/daemon.mjs";
import { HAVE_ETCD, startCluster, stopCluster, sleep } from "./lib/cluster.mjs";

const TTL_MS = 4000;
let cl;
const skip = !HAVE_ETCD && "no etcd (scripts/test.sh installs etcd-server)";

before(async () => {
  if (skip) return;
  cl = await startCluster(3, { ttl: `${TTL_MS / 1000}s`, args: ["--max-per-deployment", "10"] });
});
after(async () => {
  if (cl) await stopCluster(cl);
});

const figure = (what, v) => console.log(`# figure: ${what}: ${v}`);

async function attachVia(host, dep, name, acct = "acct-a") {
  const c = new Client(host, dep, acct);
  return c.control("POST", `/v1/sandboxes/${name}/attach`, {});
}

async function placements(dep) {
  return (await cl.etcd.list(`${cl.hosts[0].prefix}place/${dep}/`)).map((kv) => ({
    name: kv.key.split("/").pop(), ...JSON.parse(kv.value) }));
}

test("30 names attached through all three hosts at once: one placement, one endpoint each", { skip }, async () => {
  const deps = ["dep-p0", "dep-p1", "dep-p2"]; // max_per_deployment is 10
  const jobs = [];
  const t0 = Date.now();
  for (let i = 0; i < 30; i++)
    for (const h of cl.hosts)
      jobs.push(attachVia(h, deps[i % 3], `n${i}`).then((r) => ({ i, h: h.id, r })));
  const res = await Promise.all(jobs);
  figure("90 attaches (30 names x 3 hosts) took ms", Date.now() - t0);
  for (const { i, r } of res) assert.equal(r.status, 200, `n${i}: ${JSON.stringify(r.body)}`);
  const urls = new Map(cl.hosts.map((h) => [h.url, h.id]));
  for (let i = 0; i < 30; i++) {
    const eps = new Set(res.filter((x) => x.i === i).map((x) => x.r.body.endpoint));
    assert.equal(eps.size, 1, `n${i} answered ${[...eps]}`);
  }
  const owners = {};
  for (const dep of deps) {
    const ps = await placements(dep);
    assert.equal(ps.length, 10, `${dep}: ${ps.length} placements`);
    for (const p of ps) {
      owners[p.host] = (owners[p.host] || 0) + 1;
      const ep = res.find((x) => x.i === Number(p.name.slice(1))).r.body.endpoint;
      assert.equal(urls.get(new URL(ep).origin), p.host, `${p.name}: endpoint ${ep}, owner ${p.host}`);
    }
  }
  figure("placements per host", JSON.stringify(owners));
  // Each sandbox exists on its owner only.
  for (const h of cl.hosts)
    for (const dep of deps) {
      const r = await new Client(h, dep).control("GET", "/v1/sandboxes");
      assert.equal(r.status, 200);
      const ps = (await placements(dep)).filter((p) => p.host === h.id).map((p) => p.name).sort();
      assert.deepEqual(r.body.sandboxes.map((s) => s.name).sort(), ps);
    }
});

test("max_per_deployment 10 under 30 parallel attaches through different hosts: exactly 10", { skip }, async () => {
  const jobs = [];
  for (let i = 0; i < 30; i++) jobs.push(attachVia(cl.hosts[i % 3], "dep-cap", `c${i}`));
  const res = await Promise.all(jobs);
  const ok = res.filter((r) => r.status === 200).length;
  const capped = res.filter((r) => r.status !== 200);
  figure("attaches answered 200 / cap_reached", `${ok} / ${capped.length}`);
  assert.equal(ok, 10);
  for (const r of capped) assert.equal(r.body.error.code, "cap_reached", JSON.stringify(r.body));
  assert.equal((await placements("dep-cap")).length, 10);
  const cnt = await cl.etcd.list(`${cl.hosts[0].prefix}count/dep/dep-cap`);
  assert.equal(cnt[0].value, "10");
});

test("attach on h1 of a name owned by h2 answers h2's endpoint, and exec works", { skip }, async () => {
  const [h1, h2] = cl.hosts;
  const r2 = await attachVia(h2, "dep-fw", "owned-by-h2");
  assert.equal(r2.status, 200, JSON.stringify(r2.body));
  assert.equal(new URL(r2.body.endpoint).origin, h2.url);
  const t0 = Date.now();
  const r1 = await attachVia(h1, "dep-fw", "owned-by-h2");
  figure("forwarded attach of an existing name ms", Date.now() - t0);
  assert.equal(r1.status, 200, JSON.stringify(r1.body));
  assert.equal(new URL(r1.body.endpoint).origin, h2.url);
  const c = new Client(h1, "dep-fw");
  c.handles.set("owned-by-h2", r1.body);
  const out = await c.sh("owned-by-h2", "echo hi-from-$(hostname)");
  assert.equal(out.exitCode, 0, JSON.stringify(out));
  assert.match(out.stdout, /hi-from-owned-by-h2/);
});
