// Cluster mode against a real three-member etcd and three real sandboxd
// hosts, each in a network namespace of its own on a bridge this test makes
// (on loopback where it cannot), each with its own state and ranges. The checks
// of the issue, in its order; each prints its figures beside what it
// asserts. Durations are printed, never asserted, except the protocol
// bound the design states (a lost host is noticed within its TTL + 1 s).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Client } from "../integration/lib/daemon.mjs";
import { HAVE_ETCD, startCluster, stopCluster, sleep } from "./lib/cluster.mjs";

const TTL_MS = 5000;
let cl;
const skip = !HAVE_ETCD && "no etcd (scripts/test.sh installs etcd-server)";

before(async () => {
  if (skip) return;
  cl = await startCluster(3, { ttl: `${TTL_MS / 1000}s`, relayed: 1, netns: true,
    args: ["--max-per-deployment", "10"] });
  figure("hosts", cl.etcd.net ? `in network namespaces ${cl.etcd.net.ns.join(", ")} on bridge ${cl.etcd.net.bridge}`
    : "on loopback (no network namespaces here)");
});
after(async () => {
  figure("attaches answered 503 and retried, whole file", retried.n);
  if (cl) await stopCluster(cl);
});

const figure = (what, v) => console.log(`# figure: ${what}: ${v}`);

// An attach, with bounded retries of 503 (a host without a lease for a
// moment says so, and a client tries again); the retries are counted.
export const retried = { n: 0 };
async function attachVia(host, dep, name, acct = "acct-a") {
  const c = new Client(host, dep, acct);
  let r;
  for (let k = 0; k < 30; k++) {
    r = await c.control("POST", `/v1/sandboxes/${name}/attach`, {});
    if (r.status !== 503) return r;
    retried.n++;
    await sleep(200);
  }
  return r;
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
  // A list through any host answers every sandbox of the deployment, once
  // each, by name.
  for (const h of cl.hosts)
    for (const dep of deps) {
      const r = await new Client(h, dep).control("GET", "/v1/sandboxes");
      assert.equal(r.status, 200, JSON.stringify(r.body));
      const ps = (await placements(dep)).map((p) => p.name).sort();
      assert.deepEqual(r.body.sandboxes.map((s) => s.name), ps);
      assert.deepEqual(r.body.unreachable, []);
      assert.deepEqual(r.body.lost, []);
    }
});

test("a list through any host shows the names attached through every host; a stopped host is named unreachable", { skip }, async () => {
  const [h1, h2, h3] = cl.hosts;
  for (const [i, h] of cl.hosts.entries()) {
    const r = await attachVia(h, "dep-ls", `ls${i + 1}`);
    assert.equal(r.status, 200, JSON.stringify(r.body));
  }
  const owners = Object.fromEntries((await placements("dep-ls")).map((p) => [p.name, p.host]));
  figure("dep-ls owners", JSON.stringify(owners));
  assert.deepEqual(Object.keys(owners).sort(), ["ls1", "ls2", "ls3"]);
  for (const h of cl.hosts) {
    const r = await new Client(h, "dep-ls").control("GET", "/v1/sandboxes");
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.deepEqual(r.body.sandboxes.map((s) => s.name), ["ls1", "ls2", "ls3"], `via ${h.id}`);
    for (const s of r.body.sandboxes) assert.equal(s.state, "running", `${s.name} via ${h.id}`);
    assert.deepEqual(r.body.unreachable, []);
  }
  // Another deployment's list shows none of them.
  const other = await new Client(h2, "dep-ls-other").control("GET", "/v1/sandboxes");
  assert.deepEqual(other.body.sandboxes, []);
  // h3's daemon stopped (its lease lives on until its TTL): a list through
  // h1 answers what it has and names h3.
  const gone = owners.ls3;
  assert.equal(gone, "h3");
  await h3.stop("SIGKILL");
  try {
    const r = await new Client(h1, "dep-ls").control("GET", "/v1/sandboxes");
    assert.ok(await hostKey("h3"), "h3's lease lived through the list");
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.deepEqual(r.body.unreachable, ["h3"]);
    assert.deepEqual(r.body.sandboxes.map((s) => s.name), ["ls1", "ls2"]);
    assert.deepEqual(r.body.lost, []);
  } finally {
    await h3.start();
    await h3.waitServing();
  }
  const back = await new Client(h2, "dep-ls").control("GET", "/v1/sandboxes");
  assert.deepEqual(back.body.sandboxes.map((s) => s.name), ["ls1", "ls2", "ls3"]);
  assert.deepEqual(back.body.unreachable, []);
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

// Poll fn until it returns something truthy, at most ms.
async function until(fn, ms, what) {
  const t0 = Date.now();
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() - t0 > ms) throw new Error(`timed out: ${what}`);
    await sleep(50);
  }
}

// What host itself holds of dep: its list asked as another host's list
// asks it (one hop, its own records only).
async function ownList(h, dep) {
  const c = new Client(h, dep);
  const r = await fetch(`${h.url}/v1/sandboxes`, {
    headers: { authorization: `Bearer ${c.tok}`, "x-sandboxd-forwarded": "1" } });
  return { status: r.status, body: await r.json().catch(() => null) };
}

async function hostKey(id) {
  return (await cl.etcd.list(`${cl.hosts[0].prefix}hosts/${id}`)).length > 0;
}

async function execWith(handle, line) {
  try {
    const r = await fetch(`${handle.endpoint}/exec`, {
      method: "POST", headers: { ...handle.headers, "content-type": "application/json" },
      body: JSON.stringify({ command: ["/bin/sh", "-c", line] }), signal: AbortSignal.timeout(5000),
    });
    return { status: r.status, body: await r.json().catch(() => null) };
  } catch (e) {
    return { status: 0, error: String(e) };
  }
}

test("SIGKILL of h2's daemon and a restart within the TTL changes nothing", { skip }, async () => {
  const [h1, h2] = cl.hosts;
  const r = await attachVia(h2, "dep-kill", "survivor");
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.equal((await execWith(r.body, "echo kept > /tmp/mark")).status, 200);
  const before = await placements("dep-kill");
  const t0 = Date.now();
  await h2.stop("SIGKILL");
  await h2.start();
  const back = await until(async () => (await execWith(r.body, "cat /tmp/mark")).status === 200 && Date.now(),
    3 * TTL_MS, "h2 serving again");
  figure("h2 killed and serving again after ms", back - t0);
  assert.ok(back - t0 < TTL_MS + 15000);
  const out = await execWith(r.body, "cat /tmp/mark");
  assert.equal(out.body.stdout, "kept\n");
  assert.deepEqual(await placements("dep-kill"), before); // same owner, same incarnation
  const via1 = await attachVia(h1, "dep-kill", "survivor");
  assert.equal(new URL(via1.body.endpoint).origin, h2.url);
  assert.equal(via1.body.recreated, undefined);
});

test("loss of h2 is detected within TTL + 1 s; the next attach answers recreated host_lost; old credentials refused", { skip }, async () => {
  const [h1, h2, h3] = cl.hosts;
  const old = await attachVia(h2, "dep-lost", "lost-one");
  assert.equal(old.status, 200);
  assert.equal(new URL(old.body.endpoint).origin, h2.url);
  assert.ok(await hostKey("h2"));
  const killed = h2.killSandboxes();
  const t0 = Date.now();
  await h2.stop("SIGKILL");
  await until(async () => !(await hostKey("h2")), 3 * TTL_MS, "h2's lease to go");
  const detect = Date.now() - t0;
  figure("sandbox cgroups killed", killed);
  figure("loss of h2 detected after ms (TTL " + TTL_MS + ")", detect);
  assert.ok(detect <= TTL_MS + 1000, `detected after ${detect} ms`);
  // Before the next attach, a list names it as lost, on h2.
  const lb = await new Client(h3, "dep-lost").control("GET", "/v1/sandboxes");
  assert.equal(lb.status, 200, JSON.stringify(lb.body));
  assert.deepEqual(lb.body.sandboxes, []);
  assert.deepEqual(lb.body.lost, [{ name: "lost-one", class: "default", host: "h2" }]);
  assert.deepEqual(lb.body.unreachable, []);
  const t1 = Date.now();
  const re = await attachVia(h1, "dep-lost", "lost-one");
  figure("re-homing attach ms", Date.now() - t1);
  assert.equal(re.status, 200, JSON.stringify(re.body));
  assert.equal(re.body.recreated, "host_lost");
  assert.notEqual(new URL(re.body.endpoint).origin, h2.url);
  const p = (await placements("dep-lost"))[0];
  assert.equal(p.host, "h1");
  assert.equal(p.generation, 2);
  // The old credential: its host is gone, and the new host refuses it.
  assert.equal((await execWith(old.body, "true")).status, 0);
  const stale = await execWith({ ...old.body, endpoint: re.body.endpoint }, "true");
  assert.equal(stale.status, 401, JSON.stringify(stale));
  assert.equal((await execWith(re.body, "true")).status, 200);
  // get and list say so too, on any host.
  const g = await new Client(h3, "dep-lost").control("GET", "/v1/sandboxes/lost-one");
  assert.equal(g.status, 200, JSON.stringify(g.body));
  assert.equal(g.body.recreated, "host_lost");
  const l = await new Client(h1, "dep-lost").control("GET", "/v1/sandboxes");
  assert.equal(l.body.sandboxes.find((s) => s.name === "lost-one").recreated, "host_lost");
  // h2 back: its copy of the name is gone.
  await h2.start();
  await h2.waitServing();
  const l2 = await until(async () => {
    const r = await ownList(h2, "dep-lost");
    return r.status === 200 && r.body;
  }, 3 * TTL_MS, "h2 list");
  assert.deepEqual(l2.sandboxes.map((s) => s.name), []);
});

test("a partition of h2 past its TTL never has one name served by two incarnations; healed, h2's stale copy goes", { skip }, async () => {
  const [h1, h2] = cl.hosts;
  const old = await until(async () => {
    const r = await attachVia(h2, "dep-part", "split");
    return r.status !== 503 && r;
  }, 3 * TTL_MS, "h2 serving");
  assert.equal(old.status, 200, JSON.stringify(old.body));
  assert.equal(new URL(old.body.endpoint).origin, h2.url);
  // h2 keeps answering its clients; only its link to etcd is cut.
  const t0 = Date.now();
  for (const r of cl.etcd.relays) r.cut();
  let lastOld = 0, firstNew = Infinity, oldOk = 0, newOk = 0, stop = false;
  const prober = (async () => {
    while (!stop && Date.now() - t0 < 6 * TTL_MS) {
      const sent = Date.now();
      const r = await execWith(old.body, "true");
      if (r.status === 200) { lastOld = Date.now(); oldOk++; }
      void sent;
      await sleep(50);
    }
  })();
  await until(async () => !(await hostKey("h2")), 3 * TTL_MS, "h2's lease to go");
  const detect = Date.now() - t0;
  const re = await attachVia(h1, "dep-part", "split");
  assert.equal(re.status, 200, JSON.stringify(re.body));
  assert.equal(re.body.recreated, "host_lost");
  for (let i = 0; i < 10; i++) {
    const sent = Date.now();
    if ((await execWith(re.body, "true")).status === 200) { firstNew = Math.min(firstNew, sent); newOk++; }
  }
  await sleep(500);
  stop = true;
  await prober;
  figure("partition: lease gone after ms", detect);
  figure("partition: old incarnation's last success before the cut ended ms", lastOld - t0);
  figure("partition: old served / new served", `${oldOk} / ${newOk}`);
  assert.ok(newOk > 0);
  assert.ok(lastOld < firstNew, `old served at ${lastOld - t0} ms, new from ${firstNew - t0} ms`);
  // During the cut h2's data plane says it is unavailable.
  const during = await execWith(old.body, "true");
  assert.equal(during.status, 503, JSON.stringify(during));
  // Healed: h2 takes a new lease, and its copy of "split" goes.
  const t1 = Date.now();
  for (const r of cl.etcd.relays) r.heal();
  await until(async () => (await execWith(old.body, "true")).status === 401 ||
    (await execWith(old.body, "true")).status === 404, 4 * TTL_MS, "h2's stale copy to go");
  figure("healed: stale copy gone after ms", Date.now() - t1);
  await h2.waitServing();
  assert.deepEqual((await ownList(h2, "dep-part")).body.sandboxes.map((s) => s.name), []);
  // Through h2, the cluster's list shows the name once: h1's.
  const l = await new Client(h2, "dep-part").control("GET", "/v1/sandboxes");
  assert.deepEqual(l.body.sandboxes.map((s) => [s.name, s.recreated]), [["split", "host_lost"]]);
});

test("h2's link down past its TTL: its names re-homed; link up, its stale copies are gone", { skip }, async (t) => {
  if (!cl.etcd.net) return t.skip("hosts on loopback: no link to take down");
  const [h1, h2] = cl.hosts;
  const old = await attachVia(h2, "dep-link", "cut");
  assert.equal(old.status, 200, JSON.stringify(old.body));
  assert.equal(new URL(old.body.endpoint).origin, h2.url);
  const t0 = Date.now();
  cl.etcd.net.link(1, false);
  try {
    await until(async () => !(await hostKey("h2")), 3 * TTL_MS, "h2's lease to go");
    figure("link down: lease gone after ms", Date.now() - t0);
    const re = await attachVia(h1, "dep-link", "cut");
    assert.equal(re.status, 200, JSON.stringify(re.body));
    assert.equal(re.body.recreated, "host_lost");
    assert.equal((await execWith(re.body, "true")).status, 200);
  } finally {
    cl.etcd.net.link(1, true);
  }
  const t1 = Date.now();
  await until(async () => [401, 404].includes((await execWith(old.body, "true")).status), 4 * TTL_MS,
    "h2's stale copy to go");
  figure("link up: stale copy gone after ms", Date.now() - t1);
  await h2.waitServing();
  const l = await ownList(h2, "dep-link");
  assert.deepEqual(l.body.sandboxes.map((x) => x.name), []);
});

test("an etcd leader kill during 200 attaches: a stall about an election, no duplicate, no lost placement", { skip }, async () => {
  const deps = Array.from({ length: 20 }, (_, i) => `dep-l${i}`);
  const names = Array.from({ length: 200 }, (_, i) => ({ dep: deps[i % 20], name: `m${i}` }));
  const lat = [];
  let i = 0;
  const t0 = Date.now();
  let killedAt = 0;
  const worker = async () => {
    while (i < names.length) {
      const n = names[i++];
      const h = cl.hosts[i % 3];
      const s = Date.now();
      let r;
      for (let k = 0; k < 40; k++) { // bounded retries of 503 (no leader yet)
        r = await attachVia(h, n.dep, n.name);
        if (r.status !== 503) break;
        await sleep(100);
      }
      lat.push({ at: s - t0, ms: Date.now() - s });
      assert.equal(r.status, 200, `${n.dep}/${n.name}: ${JSON.stringify(r.body)}`);
    }
  };
  const killer = (async () => {
    while (i < 40) await sleep(20);
    const leader = await cl.etcd.leader();
    assert.ok(leader, "a leader");
    killedAt = Date.now() - t0;
    await cl.etcd.kill(leader);
    figure("etcd leader killed at ms", `${killedAt} (${leader.name})`);
  })();
  await Promise.all([worker(), worker(), worker(), worker(), killer]);
  const total = Date.now() - t0;
  lat.sort((a, b) => a.ms - b.ms);
  figure("200 attaches took ms", total);
  figure("attach latency ms p50 / p99 / max (the stall)",
    `${lat[100].ms} / ${lat[197].ms} / ${lat[199].ms}`);
  let seen = 0;
  for (const dep of deps) {
    const ps = await placements(dep);
    const set = new Set(ps.map((p) => p.name));
    assert.equal(set.size, ps.length, `${dep}: a duplicate`);
    assert.equal(ps.length, 10, `${dep}: ${ps.length} placements`);
    seen += ps.length;
    const cnt = await cl.etcd.list(`${cl.hosts[0].prefix}count/dep/${dep}`);
    assert.equal(cnt[0].value, "10");
  }
  assert.equal(seen, 200);
});
