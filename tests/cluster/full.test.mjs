// A full host places a new name on the better of two other hosts it
// samples (the one with more free slots), and the attach answers that
// host's endpoint. Real etcd, three real hosts; h1 holds two sandboxes.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Client } from "../integration/lib/daemon.mjs";
import { HAVE_ETCD, startCluster, stopCluster, sleep } from "./lib/cluster.mjs";

let cl;
const skip = !HAVE_ETCD && "no etcd (scripts/test.sh installs etcd-server)";

before(async () => {
  if (skip) return;
  cl = await startCluster(3, { hostArgs: { 0: ["--max-sandboxes", "2"] } });
});
after(async () => {
  if (cl) await stopCluster(cl);
});

test("a full host places new names on other hosts, which serve them", { skip }, async () => {
  const [h1] = cl.hosts;
  const c = new Client(h1, "dep-full");
  const origins = [];
  for (let i = 0; i < 6; i++) {
    const r = await c.control("POST", `/v1/sandboxes/f${i}/attach`, {});
    assert.equal(r.status, 200, `f${i}: ${JSON.stringify(r.body)}`);
    origins.push(new URL(r.body.endpoint).origin);
    c.handles.set(`f${i}`, r.body);
  }
  const byHost = Object.fromEntries(cl.hosts.map((h) => [h.url, h.id]));
  const where = origins.map((o) => byHost[o]);
  console.log(`# figure: placed on ${where.join(" ")}`);
  assert.deepEqual(where.slice(0, 2), ["h1", "h1"]);
  for (const w of where.slice(2)) assert.notEqual(w, "h1");
  const ps = await cl.etcd.list(`${h1.prefix}place/dep-full/`);
  assert.equal(ps.length, 6);
  assert.equal(ps.filter((kv) => JSON.parse(kv.value).host === "h1").length, 2);
  const out = await c.sh("f5", "echo ok");
  assert.equal(out.stdout, "ok\n");
  // h1's record says it is full (published with a renewal of its lease).
  let free;
  for (let k = 0; k < 100 && free !== 0; k++) {
    const hosts = await cl.etcd.list(`${h1.prefix}hosts/`);
    free = JSON.parse(hosts.find((kv) => kv.key.endsWith("/h1")).value).free;
    if (free !== 0) await sleep(100);
  }
  assert.equal(free, 0);
});

test("a name placed on another host that fails to come up there loses its placement", { skip }, async () => {
  const [h1] = cl.hosts;
  const c = new Client(h1, "dep-full");
  // h1 is full (the test before): the name is placed on another host, and
  // that host has no such image.
  const r = await c.control("POST", "/v1/sandboxes/f-bad/attach", { image: "no-such-image" });
  assert.equal(r.status, 404, JSON.stringify(r.body));
  assert.equal(r.body.error.code, "image_not_found");
  const ps = await cl.etcd.list(`${h1.prefix}place/dep-full/`);
  assert.deepEqual(ps.map((kv) => kv.key.split("/").pop()).sort(), ["f0", "f1", "f2", "f3", "f4", "f5"]);
  const cnt = await cl.etcd.list(`${h1.prefix}count/dep/dep-full`);
  assert.equal(cnt[0].value, "6");
});
