// Egress policies: what a nat sandbox may reach, by name and by network,
// changed live, kept across a daemon restart, and the log of what it was
// refused.
//
// "The internet" is a network namespace this test makes: a veth pair to
// the host, and on its loopback four addresses of the documentation
// ranges (which the daemon's fixed rules let sandboxes reach), each
// serving HTTP that answers with the address it was reached on. The
// daemon's DNS forwarder asks a resolver the test runs on 127.0.0.1,
// which maps the test's names to those addresses. No packet leaves this
// machine. Names and addresses are derived from the test's pid, so that
// two runs at once (both classes) do not collide; everything is removed
// by name at the end.
import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Daemon, Client, until, GVISOR } from "./lib/daemon.mjs";
import { fakeDns } from "./lib/dns.mjs";

const k = (process.pid % 120) + 1;
const NS = `sbdeg${process.pid}`;
const HOST_IF = `egh${process.pid % 1000000}`, PEER_IF = `egp${process.pid % 1000000}`;
const LINK = `10.253.${k}`; // a /30: .1 the host, .2 the namespace
const A = `203.0.113.${k}`, B = `198.51.100.${k}`, C = `198.19.${k}.7`, D = `203.0.113.${k + 128}`;
// Private addresses: blocked unless the operator opens their range (P's).
const P = `10.252.${k}.9`, Q = `10.251.${k}.9`;
const PORT = 8080;
const NAMES = {
  "a.egress.test": A,
  "b.egress.test": B,
  "x.w.egress.test": D,
  "bad.w.egress.test": D,
  "w.egress.test": D,
};

const ip = (...args) => execFileSync("ip", args, { stdio: ["ignore", "ignore", "pipe"] });
const quiet = (f) => { try { f(); } catch {} };
let server;

function outsideUp() {
  ip("netns", "add", NS);
  ip("link", "add", HOST_IF, "type", "veth", "peer", "name", PEER_IF);
  ip("link", "set", PEER_IF, "netns", NS);
  ip("addr", "add", `${LINK}.1/30`, "dev", HOST_IF);
  ip("link", "set", HOST_IF, "up");
  ip("-n", NS, "addr", "add", `${LINK}.2/30`, "dev", PEER_IF);
  ip("-n", NS, "link", "set", PEER_IF, "up");
  ip("-n", NS, "link", "set", "lo", "up");
  for (const a of [A, B, C, D, P, Q]) {
    ip("-n", NS, "addr", "add", `${a}/32`, "dev", "lo");
    ip("route", "add", `${a}/32`, "via", `${LINK}.2`, "dev", HOST_IF);
  }
  ip("-n", NS, "route", "add", "default", "via", `${LINK}.1`);
  // One server for the four addresses: it answers with the one it was
  // reached on.
  // And a resolver of its own on B:53 (bound there, so that its answers
  // come from B) that answers every A query with D: what a sandbox that
  // names another nameserver would get.
  const d = D.split(".").map(Number);
  const js = `require("http").createServer((q, s) => s.end(q.socket.localAddress.replace(/^::ffff:/, "")))` +
    `.listen(${PORT}, "0.0.0.0", () => console.log("up"));` +
    `const u = require("dgram").createSocket("udp4"); u.on("message", (q, r) => { let i = 12; while (i < q.length && q[i]) i += q[i] + 1;` +
    ` u.send(Buffer.concat([q.subarray(0, 2), Buffer.from([0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0]), q.subarray(12, i + 5),` +
    ` Buffer.from([0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, ${d.join(",")}])]), r.port, r.address); }); u.bind(53, "${B}");` +
    `require("net").createServer((c) => c.end("dns-over-tcp\\n")).listen(53, "${B}");`;
  server = spawn("ip", ["netns", "exec", NS, process.execPath, "-e", js], { stdio: ["ignore", "pipe", "inherit"] });
  return new Promise((r) => server.stdout.once("data", r));
}

function outsideDown() {
  if (server) quiet(() => process.kill(server.pid, "SIGKILL"));
  for (const a of [A, B, C, D, P, Q]) quiet(() => ip("route", "del", `${a}/32`));
  quiet(() => ip("link", "del", HOST_IF));
  quiet(() => ip("netns", "del", NS));
}

let up, d, c;
before(async () => {
  await outsideUp();
  up = await fakeDns({ map: (n) => NAMES[n] ?? null, ttl: 30 });
  d = await new Daemon({ args: ["--network", "nat", "--pool-size", "0", "--gvisor-pool-size", "0",
    "--disk-limit", "64M", "--dns-upstream", `127.0.0.1:${up.port}`] }).start();
  c = new Client(d);
});
after(async () => {
  if (d) await d.destroy();
  if (up) up.close();
  outsideDown();
});

// What an HTTP GET from inside the sandbox gets: the body, or "refused".
// A name is resolved by the sandbox's nslookup through the forwarder (the
// tiny image's static busybox has no getaddrinfo to speak of), then
// reached by the address it was given.
async function fetchFrom(name, host) {
  let addr = host;
  if (!/^[\d.]+$/.test(host)) {
    const m = (await resolves(name, host)).match(/Name:[^]*?Address:\s*([\d.]+)/);
    if (!m) return "refused";
    addr = m[1];
  }
  const r = await c.sh(name, `printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 5 ${addr} ${PORT} 2>&1 || echo " failed"`, { timeoutMs: 30000 });
  const out = r.stdout.trim().split(/\r?\n/).pop();
  if (process.env.EGRESS_DEBUG) console.error(name, host, JSON.stringify(r));
  return /failed/.test(out) ? "refused" : out;
}
async function resolves(name, host) {
  const r = await c.sh(name, `nslookup ${host} 2>&1; echo rc=$?`, { timeoutMs: 30000 });
  return r.stdout;
}
async function attachWith(name, egress) {
  const r = await c.control("POST", `/v1/sandboxes/${name}/attach`, { network: "nat", egress });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  c.handles.set(name, r.body);
  return r.body;
}

test("with no policy, every server of the outside is reached", async () => {
  await attachWith("open");
  assert.equal(await fetchFrom("open", "a.egress.test"), A);
  assert.equal(await fetchFrom("open", B), B);
  const r = await c.data("open", "GET", "/network");
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.deepEqual(r.body.egress, { allow: null, deny: [] });
});

test("an allowed name and network are reached; the rest, raw IPs included, is refused; deny beats allow", async () => {
  const policy = { allow: ["a.egress.test", `198.19.${k}.0/24`, "*.w.egress.test"], deny: ["bad.w.egress.test"] };
  await attachWith("s", policy);
  assert.equal(await fetchFrom("s", "a.egress.test"), A);
  assert.equal(await fetchFrom("s", C), C); // the allowed network, by address
  // Not listed: the name is refused by the forwarder, the address by nftables.
  assert.match(await resolves("s", "b.egress.test"), /REFUSED|can't resolve|rc=1/i);
  assert.ok(!up.seen.includes("b.egress.test"), "a refused name was asked upstream");
  assert.equal(await fetchFrom("s", "b.egress.test"), "refused");
  assert.equal(await fetchFrom("s", B), "refused");
  // The wildcard: names under it, not the apex; a denied one under it.
  assert.equal(await fetchFrom("s", "x.w.egress.test"), D);
  assert.equal(await fetchFrom("s", "w.egress.test"), "refused");
  assert.match(await resolves("s", "bad.w.egress.test"), /REFUSED|can't resolve|rc=1/i);
  const r = await c.data("s", "GET", "/network");
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.deepEqual(r.body.egress, { allow: ["a.egress.test", `198.19.${k}.0/24`, "*.w.egress.test"], deny: ["bad.w.egress.test"] });
});

test("a policy changed live applies to new connections at once", async () => {
  await attachWith("live", { allow: ["a.egress.test"] });
  assert.equal(await fetchFrom("live", "a.egress.test"), A);
  assert.equal(await fetchFrom("live", "b.egress.test"), "refused");
  const r = await c.data("live", "PUT", "/network", { allow: ["b.egress.test", `${C}/32`] });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.deepEqual(r.body.egress.allow, ["b.egress.test", `${C}/32`]);
  assert.equal(await fetchFrom("live", "b.egress.test"), B);
  assert.equal(await fetchFrom("live", C), C);
  // A's pin went with the old policy: neither its name nor its address.
  assert.equal(await fetchFrom("live", A), "refused");
  assert.equal(await fetchFrom("live", "a.egress.test"), "refused");
  // Deny-only: everything public but what is denied.
  const r2 = await c.data("live", "PUT", "/network", { deny: [`${B}/32`] });
  assert.equal(r2.status, 200, JSON.stringify(r2.body));
  assert.equal(await fetchFrom("live", A), A);
  assert.equal(await fetchFrom("live", B), "refused");
  // And back to none.
  const r3 = await c.data("live", "PUT", "/network", {});
  assert.equal(r3.status, 200, JSON.stringify(r3.body));
  assert.equal(await fetchFrom("live", B), B);
});

test("the egress log shows denied connections and DNS refusals; /metrics counts them", async () => {
  await attachWith("logged", { allow: ["a.egress.test"] });
  assert.equal(await fetchFrom("logged", "a.egress.test"), A);
  assert.equal(await fetchFrom("logged", B), "refused");
  await resolves("logged", "b.egress.test");
  let events = [];
  await until(async () => {
    const r = await c.data("logged", "GET", "/network/log");
    assert.equal(r.status, 200, JSON.stringify(r.body));
    events = r.body.events;
    return events.some((e) => e.type === "connection" && e.address === B);
  });
  const conn = events.find((e) => e.type === "connection" && e.address === B);
  assert.equal(conn.port, PORT);
  assert.equal(conn.protocol, "tcp");
  assert.equal(conn.allowed, false);
  assert.ok(events.some((e) => e.type === "dns" && e.name === "b.egress.test" && e.allowed === false), JSON.stringify(events));
  const ok = events.find((e) => e.type === "dns" && e.name === "a.egress.test" && e.allowed);
  assert.ok(ok, JSON.stringify(events));
  assert.deepEqual(ok.addresses, [A]);
  // Another sandbox's log holds none of it.
  const other = await c.data("open", "GET", "/network/log");
  assert.ok(!other.body.events.some((e) => e.address === B && e.type === "connection"), JSON.stringify(other.body));
  const m = await (await fetch(`${d.url}/metrics`)).text();
  assert.ok(Number(m.match(/^sandboxd_egress_denied_connections_total (\d+)$/m)[1]) >= 1, m);
  assert.ok(Number(m.match(/^sandboxd_egress_dns_total\{verdict="refused"\} (\d+)$/m)[1]) >= 1, m);
  assert.ok(Number(m.match(/^sandboxd_egress_dns_total\{verdict="allowed"\} (\d+)$/m)[1]) >= 1, m);
});

test("hostile policies are 400 naming the entry", async () => {
  const bad = [
    [{ allow: ["1.2.3.4/33"] }, /1\.2\.3\.4\/33/],
    [{ allow: ["10.0.0.1/8"] }, /host bits/],
    [{ deny: ["exa mple.com"] }, /exa mple\.com/],
    [{ allow: ["2001:db8::/32"] }, /IPv6/],
    [{ allow: ["*."] }, /\*\./],
    [{ allow: ["a".repeat(300) + ".com"] }, /longer than/],
    [{ allow: Array.from({ length: 257 }, (_, i) => `n${i}.example.com`) }, /more than 256/],
    [{ allow: "a.example.com" }, /array/],
    [{ allow: [7] }, /allow\[0\]/],
    [{ allowed: [] }, /unknown member/],
  ];
  for (const [policy, msg] of bad) {
    const r = await c.data("open", "PUT", "/network", policy);
    assert.equal(r.status, 400, JSON.stringify(policy).slice(0, 80));
    assert.match(r.body.error.message, msg);
    const a = await c.control("POST", "/v1/sandboxes/hostile/attach", { egress: policy });
    assert.equal(a.status, 400, JSON.stringify(a.body));
  }
  // Nothing was changed by them.
  assert.deepEqual((await c.data("open", "GET", "/network")).body.egress, { allow: null, deny: [] });
  // A sandbox without a network has nothing to restrict.
  const n = await c.control("POST", "/v1/sandboxes/none/attach", { network: "none", egress: { allow: [] } });
  assert.equal(n.status, 400, JSON.stringify(n.body));
});

test("a policy survives a daemon restart and is in force for the sandbox it adopted", async () => {
  await attachWith("kept", { allow: ["b.egress.test"] });
  assert.equal(await fetchFrom("kept", "b.egress.test"), B);
  await d.restart("SIGKILL");
  c = new Client(d);
  const r = await c.data("kept", "GET", "/network");
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.deepEqual(r.body.egress, { allow: ["b.egress.test"], deny: [] });
  assert.equal(await fetchFrom("kept", A), "refused");
  assert.equal(await fetchFrom("kept", "b.egress.test"), B);
  // One without a policy still reaches everything.
  assert.equal(await fetchFrom("open", A), A);
});

test("the daemon's table holds the egress map and logs to its NFLOG group", () => {
  const inst = readFileSync(join(d.state, "instance-id"), "utf8").trim();
  const t = execFileSync("nft", ["list", "table", "inet", `sandboxd-${inst}`]).toString();
  assert.match(t, /map egress4/);
  assert.match(t, /log group \d+/);
});

test("a private range is reached only where the operator opens it, and a policy still applies there", async () => {
  assert.equal(await fetchFrom("open", P), "refused");
  const d2 = await new Daemon({ args: ["--network", "nat", "--pool-size", "0", "--gvisor-pool-size", "0",
    "--disk-limit", "64M", "--dns-upstream", `127.0.0.1:${up.port}`, "--net-open-ranges", `10.252.${k}.0/24`] }).start();
  const saved = c;
  try {
    c = new Client(d2);
    await attachWith("lan");
    assert.equal(await fetchFrom("lan", P), P);
    assert.equal(await fetchFrom("lan", Q), "refused"); // the rest of 10/8 stays closed
    const r = await c.data("lan", "PUT", "/network", { deny: [`${P}/32`] });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(await fetchFrom("lan", P), "refused");
    // Two daemons at once: two tables, each logging to an NFLOG group of its own.
    const group = (D) => {
      const inst = readFileSync(join(D.state, "instance-id"), "utf8").trim();
      return execFileSync("nft", ["list", "table", "inet", `sandboxd-${inst}`]).toString().match(/log group (\d+)/)[1];
    };
    assert.notEqual(group(d), group(d2));
  } finally {
    c = saved;
    await d2.destroy();
  }
  // A bad range keeps the daemon from starting.
  const bad = new Daemon({ args: ["--network", "nat", "--net-open-ranges", "10.0.0.1/8"] });
  await assert.rejects(bad.start(), /net_open_ranges/);
  await bad.destroy();
});

test("a fork keeps the policy of the sandbox it is made from", async () => {
  await attachWith("origin", { allow: ["a.egress.test"], deny: [`${C}/32`] });
  if (GVISOR) {
    const ck = await c.data("origin", "POST", "/checkpoint", { keepRunning: true });
    assert.equal(ck.status, 200, JSON.stringify(ck.body));
  }
  const f = await c.data("origin", "POST", "/fork", { name: "forked" });
  assert.equal(f.status, 200, JSON.stringify(f.body));
  c.handles.set("forked", f.body);
  const r = await c.data("forked", "GET", "/network");
  assert.deepEqual(r.body.egress, { allow: ["a.egress.test"], deny: [`${C}/32`] });
  assert.equal(await fetchFrom("forked", B), "refused");
  assert.equal(await fetchFrom("forked", "a.egress.test"), A);
});

test("with a policy, DNS to any other resolver is answered by the policy's forwarder", async () => {
  // Without a policy, the outside's own resolver answers (D for any name).
  assert.match(await resolves("open", `b.egress.test ${B}`), new RegExp(`Address:\\s*${D.replace(/\./g, "\\.")}`));
  // With a deny-only policy: the query to B:53 is the forwarder's, which
  // refuses the denied name and answers the others from its upstream.
  await attachWith("forced", { deny: ["b.egress.test"] });
  assert.match(await resolves("forced", `b.egress.test ${B}`), /REFUSED|can't resolve|rc=1/i);
  assert.match(await resolves("forced", `a.egress.test ${B}`), new RegExp(`Name:[^]*Address:\\s*${A.replace(/\./g, "\\.")}`));
  // And no DNS over TCP to port 53 (the forwarder has none): B's TCP
  // port 53 answers the sandbox without a policy only.
  const tcp53 = async (name) => (await c.sh(name, `nc -w 3 ${B} 53 </dev/null 2>&1; echo rc=$?`)).stdout;
  assert.match(await tcp53("open"), /dns-over-tcp/);
  assert.doesNotMatch(await tcp53("forced"), /dns-over-tcp/);
  assert.equal(await fetchFrom("forced", B), B); // the rest of B is still reached
});
