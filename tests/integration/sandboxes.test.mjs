// Named sandboxes end to end: attach, exec, isolation, persistence, errors.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { release } from "node:os";
import { Daemon, Client, sleep, HAVE_DEBIAN, GVISOR } from "./lib/daemon.mjs";

let d, c;
before(async () => {
  d = await new Daemon().start();
  c = new Client(d);
});
after(async () => d && (await d.destroy()));

test("exec runs argv in /workspace with the name as hostname", async () => {
  const r = await c.exec("basics", ["/bin/sh", "-c", "pwd; hostname; echo err >&2; exit 3"]);
  assert.equal(r.exitCode, 3);
  assert.equal(r.stdout, "/workspace\nbasics\n");
  assert.equal(r.stderr, "err\n");
  assert.equal(r.timedOut, false);
  assert.equal(r.truncated, false);
  assert.equal(typeof r.durationMs, "number");
});

test("cwd and env are honoured; a missing command is exit 127, not an error", async () => {
  const r = await c.exec("basics", ["/bin/sh", "-c", "pwd; echo $FOO"], { cwd: "/tmp", env: { FOO: "bar baz" } });
  assert.equal(r.stdout, "/tmp\nbar baz\n");
  const m = await c.exec("basics", ["/no/such/binary"]);
  assert.equal(m.exitCode, 127);
  assert.match(m.stderr, /no\/such\/binary/);
});

test("files persist across execs", async () => {
  await c.sh("persist", "echo kept > /workspace/a.txt && mkdir -p /workspace/d && echo x > /workspace/d/b");
  const r = await c.sh("persist", "cat /workspace/a.txt /workspace/d/b");
  assert.equal(r.stdout, "kept\nx\n");
});

test("attach returns a handle as the API describes", async () => {
  const h = await c.attach("handle-shape");
  assert.equal(h.name, "handle-shape");
  assert.equal(h.class, "default");
  assert.equal(h.state, "running");
  assert.equal(h.endpoint, `${d.url}/v1/sandboxes/handle-shape`);
  assert.match(h.headers.Authorization, /^Bearer \S+$/);
  assert.ok(Date.parse(h.expiresAt) > Date.now() + 10 * 60 * 1000);
  const g = await c.control("GET", "/v1/sandboxes/handle-shape");
  assert.equal(g.status, 200);
  assert.equal(g.body.state, "running");
  for (const k of ["createdAt", "lastActiveAt", "ceilingAt"]) assert.ok(Date.parse(g.body[k]), k);
  const l = await c.control("GET", "/v1/sandboxes");
  assert.ok(l.body.sandboxes.some((s) => s.name === "handle-shape"));
});

test("attach may name the image of a new sandbox; the handle, get and list say which", async (t) => {
  // This file's deployment is near its cap of 20: give the places back.
  t.after(async () => {
    for (const n of ["img-default", "img-debian"]) await c.control("DELETE", `/v1/sandboxes/${n}`);
  });
  const h = await c.attach("img-default");
  assert.equal(h.image, "tiny"); // the daemon's default image
  const none = await c.control("POST", "/v1/sandboxes/img-none/attach", { image: "no-such-image" });
  assert.equal(none.status, 404);
  assert.equal(none.body.error.code, "image_not_found");
  assert.equal((await c.control("GET", "/v1/sandboxes/img-none")).status, 404); // nothing made
  for (const bad of ["../tiny", "Tiny", "", 7]) {
    const r = await c.control("POST", "/v1/sandboxes/img-bad/attach", { image: bad });
    assert.equal(r.status, 400, JSON.stringify(bad));
  }
  if (!HAVE_DEBIAN) return;
  const r = await c.control("POST", "/v1/sandboxes/img-debian/attach", { image: "debian" });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.equal(r.body.image, "debian");
  c.handles.set("img-debian", r.body);
  const v = await c.sh("img-debian", "cat /etc/debian_version; test -x /usr/bin/python3 && echo py");
  assert.match(v.stdout, /^\d+\.\d+\npy\n$/);
  assert.equal((await c.control("GET", "/v1/sandboxes/img-debian")).body.image, "debian");
  const l = await c.control("GET", "/v1/sandboxes");
  assert.equal(l.body.sandboxes.find((s) => s.name === "img-debian").image, "debian");
  assert.equal(l.body.sandboxes.find((s) => s.name === "img-default").image, "tiny");
  // The same image, or none: the same sandbox; another: 409.
  assert.equal((await c.control("POST", "/v1/sandboxes/img-debian/attach", { image: "debian" })).status, 200);
  assert.equal((await c.control("POST", "/v1/sandboxes/img-debian/attach", {})).body.image, "debian");
  const other = await c.control("POST", "/v1/sandboxes/img-debian/attach", { image: "tiny" });
  assert.equal(other.status, 409);
  assert.equal(other.body.error.code, "invalid_state");
  assert.match(other.body.error.message, /image debian/);
});

test("two sandboxes see neither each other's files nor processes", async () => {
  await c.sh("iso-a", "echo secret > /workspace/only-a; sleep 300 >/dev/null 2>&1 &");
  const b = await c.sh("iso-b", "ls /workspace; ls /proc | grep -c '^[0-9]'; ps -o pid,args");
  assert.doesNotMatch(b.stdout, /only-a/);
  assert.doesNotMatch(b.stdout, /sleep 300/);
  if (GVISOR) {
    // A kernel of its own each: their boot ids differ, and neither is the
    // host's; namespace ids mean nothing across kernels.
    const boot = "cat /proc/sys/kernel/random/boot_id";
    const [ba, bb] = [(await c.sh("iso-a", boot)).stdout, (await c.sh("iso-b", boot)).stdout];
    assert.notEqual(ba, bb);
    assert.notEqual(ba, readFileSync("/proc/sys/kernel/random/boot_id", "utf8"));
    // The workload's PID 1 is the guard of its pid namespace, not sandbox-init.
    const p1 = await c.sh("iso-b", "cat /proc/1/comm");
    assert.equal(p1.stdout, "sandbox-guard\n");
    return;
  }
  const nsline = "for n in pid mnt net user ipc uts; do readlink /proc/self/ns/$n; done";
  const ns = (await c.sh("iso-a", nsline)).stdout.trim().split("\n");
  const nsb = (await c.sh("iso-b", nsline)).stdout.trim().split("\n");
  assert.equal(ns.length, 6);
  ns.forEach((line, i) => assert.notEqual(line, nsb[i]));
  // PID 1 is sandbox-init in both.
  const p1 = await c.sh("iso-b", "cat /proc/1/cmdline | tr '\\0' ' '");
  assert.match(p1.stdout, /sandbox-init/);
});

// The interfaces a sandbox has, from /proc/net/dev (gVisor's /sys has no
// class/net).
const IFACES = "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | sort | tr '\\n' ' '";

test("the sandbox runs in its own namespaces, as root of its own user namespace", async () => {
  const r = await c.sh("nsinfo", "cat /proc/self/uid_map; uname -r; id -u");
  const lines = r.stdout.trim().split("\n");
  const [inside, outside, count] = lines[0].trim().split(/\s+/).map(Number);
  assert.equal(inside, 0);
  assert.equal(lines.at(-1), "0", "root inside");
  if (GVISOR) {
    // Its own kernel: the ids are that kernel's, not mapped onto the host's.
    assert.notEqual(lines[1], release(), "not the host's kernel");
  } else {
    assert.ok(outside >= 65536, `mapped to host uid ${outside}`);
    assert.equal(count, 65536);
    assert.equal(lines[1], release());
  }
  // Its own network namespace: loopback, and under nat its own eth0.
  for (const ifname of (await c.sh("nsinfo", IFACES)).stdout.trim().split(" ")) assert.ok(["lo", "eth0"].includes(ifname), ifname);
});

test("network is chosen per sandbox at creation: nat by default, or none", async () => {
  const nat = await c.control("POST", "/v1/sandboxes/net-default/attach", {});
  assert.equal(nat.body.network, "nat");
  const none = await c.control("POST", "/v1/sandboxes/net-none/attach", { network: "none" });
  assert.equal(none.status, 200);
  assert.equal(none.body.network, "none");
  assert.equal((await c.sh("net-default", IFACES)).stdout, "eth0 lo ");
  assert.equal((await c.sh("net-none", IFACES)).stdout, "lo ");
  assert.equal((await c.control("GET", "/v1/sandboxes/net-none")).body.network, "none");
  // Attaching again with the same (or no) network is fine; another is a conflict.
  assert.equal((await c.control("POST", "/v1/sandboxes/net-none/attach", { network: "none" })).status, 200);
  assert.equal((await c.control("POST", "/v1/sandboxes/net-none/attach", {})).status, 200);
  const clash = await c.control("POST", "/v1/sandboxes/net-none/attach", { network: "nat" });
  assert.equal(clash.status, 409);
  assert.equal(clash.body.error.code, "invalid_state");
  assert.equal((await c.control("POST", "/v1/sandboxes/net-bad/attach", { network: "host" })).status, 400);
});

test("exec timeout kills the whole process group and reports timedOut", async () => {
  const t0 = Date.now();
  const r = await c.exec("timeout", ["/bin/sh", "-c", "sleep 100 & sleep 100"], { timeoutMs: 500 });
  assert.equal(r.timedOut, true);
  assert.ok(Date.now() - t0 < 10000);
  await sleep(200);
  const ps = await c.sh("timeout", "ps -o args | grep -c '^sleep 100' || true");
  assert.equal(ps.stdout.trim(), "0");
});

test("3 MiB of output keeps exactly 1 MiB per stream and says truncated", async () => {
  const r = await c.sh("bigout", "head -c 3145728 /dev/zero | tr '\\0' a; head -c 3145728 /dev/zero | tr '\\0' b >&2");
  assert.equal(r.truncated, true);
  assert.equal(r.stdout.length, 1 << 20);
  assert.equal(r.stderr.length, 1 << 20);
  assert.equal(r.exitCode, 0);
});

test("20 concurrent execs in one sandbox all finish", async () => {
  await c.attach("concurrent");
  const rs = await Promise.all(
    Array.from({ length: 20 }, (_, i) => c.exec("concurrent", ["/bin/sh", "-c", `sleep 0.3; echo ${i}`])),
  );
  rs.forEach((r, i) => assert.equal(r.stdout, `${i}\n`));
});

test("a hung command in one sandbox does not delay another", async () => {
  await c.attach("hung");
  await c.attach("lively");
  let hungDone = false;
  const hung = c.exec("hung", ["/bin/sleep", "5"], { timeoutMs: 4000 }).then((r) => { hungDone = true; return r; });
  await sleep(100);
  for (let i = 0; i < 5; i++) await c.exec("lively", ["/bin/true"]);
  // All five answered while the other sandbox's command still hung.
  assert.equal(hungDone, false, "the execs waited for the hung command");
  assert.equal((await hung).timedOut, true);
});

test("concurrent first attaches of one name settle on one sandbox", async () => {
  const hs = await Promise.all(Array.from({ length: 8 }, () => c.control("POST", "/v1/sandboxes/race/attach", {})));
  hs.forEach((h) => assert.equal(h.status, 200));
  await c.sh("race", "echo one > /workspace/f");
  for (const h of hs) {
    const r = await fetch(`${h.body.endpoint}/exec`, {
      method: "POST", headers: h.body.headers, body: JSON.stringify({ command: ["cat", "/workspace/f"] }),
    });
    assert.equal((await r.json()).stdout, "one\n");
  }
  const l = await c.control("GET", "/v1/sandboxes");
  assert.equal(l.body.sandboxes.filter((s) => s.name === "race").length, 1);
});

test("a deployment cannot reach another's sandbox", async () => {
  await c.sh("private", "echo mine > /workspace/x");
  const other = new Client(d, "dep-b", "acct-a");
  assert.equal((await other.control("GET", "/v1/sandboxes/private")).status, 404);
  assert.equal((await other.control("DELETE", "/v1/sandboxes/private")).status, 404);
  assert.equal((await other.control("POST", "/v1/sandboxes/private/stop")).status, 404);
  const l = await other.control("GET", "/v1/sandboxes");
  assert.deepEqual(l.body.sandboxes.filter((s) => s.name === "private"), []);
  // Its own "private" is a different, empty sandbox.
  const r = await other.sh("private", "ls /workspace");
  assert.equal(r.stdout, "");
  // A credential names its sandbox: B's reaches only B's "private", and a
  // credential used on another name's endpoint is refused.
  const ha = c.handles.get("private");
  const hb = other.handles.get("private");
  const r1 = await fetch(`${ha.endpoint}/exec`, {
    method: "POST", headers: hb.headers, body: JSON.stringify({ command: ["ls", "/workspace"] }),
  });
  assert.equal((await r1.json()).stdout, "");
  await c.attach("private-2");
  const r2 = await fetch(`${c.handles.get("private-2").endpoint}/exec`, {
    method: "POST", headers: ha.headers, body: JSON.stringify({ command: ["true"] }),
  });
  assert.equal(r2.status, 401);
  // And the identity token is no data-plane credential.
  const r3 = await fetch(`${ha.endpoint}/exec`, {
    method: "POST", headers: { authorization: `Bearer ${c.tok}` }, body: JSON.stringify({ command: ["true"] }),
  });
  assert.equal(r3.status, 401);
});

test("delete drops the sandbox and its files; the next attach is empty", async () => {
  await c.sh("gone", "echo x > /workspace/f");
  assert.equal((await c.control("DELETE", "/v1/sandboxes/gone")).status, 204);
  assert.equal((await c.control("GET", "/v1/sandboxes/gone")).status, 404);
  assert.equal((await c.control("DELETE", "/v1/sandboxes/gone")).status, 404);
  c.handles.delete("gone");
  const r = await c.sh("gone", "ls -A /workspace");
  assert.equal(r.stdout, "");
});

test("bad input gets its error and the daemon keeps serving", async () => {
  const tok = { authorization: `Bearer ${c.tok}` };
  const expect = async (p, status, code) => {
    const r = await p;
    assert.equal(r.status, status);
    const b = await r.json();
    assert.equal(b.error.code, code);
    assert.equal(typeof b.error.message, "string");
  };
  await expect(fetch(`${d.url}/v1/sandboxes/-bad/attach`, { method: "POST", headers: tok }), 400, "invalid_argument");
  await expect(fetch(`${d.url}/v1/sandboxes/${"a".repeat(129)}/attach`, { method: "POST", headers: tok }), 400, "invalid_argument");
  await expect(fetch(`${d.url}/v1/sandboxes/ok/attach`, { method: "POST", headers: tok, body: "{nope" }), 400, "invalid_argument");
  await expect(fetch(`${d.url}/v1/sandboxes/nope-404`, { headers: tok }), 404, "sandbox_not_found");
  await expect(fetch(`${d.url}/v1/sandboxes`), 401, "unauthenticated");
  await expect(fetch(`${d.url}/v1/sandboxes`, { headers: { authorization: "Bearer x.y.z" } }), 401, "unauthenticated");
  await expect(fetch(`${d.url}/v1/sandboxes`, { headers: { authorization: `Bearer ${c.tok.slice(0, -3)}AAA` } }), 401, "unauthenticated");
  await expect(fetch(`${d.url}/v1/sandboxes/ok/attach`, { method: "POST", headers: tok, body: JSON.stringify({ class: "gpu" }) }), 409, "unsupported_class");
  await expect(fetch(`${d.url}/v1/sandboxes/ok/attach`, { method: "POST", headers: tok, body: "x".repeat(17 << 20) }), 413, "too_large");
  const h = await c.attach("badexec");
  const post = (body) => fetch(`${h.endpoint}/exec`, { method: "POST", headers: h.headers, body });
  await expect(post("not json"), 400, "invalid_argument");
  await expect(post(JSON.stringify({ command: [] })), 400, "invalid_argument");
  await expect(post(JSON.stringify({ command: "ls" })), 400, "invalid_argument");
  await expect(post(JSON.stringify({ command: ["ls", 3] })), 400, "invalid_argument");
  await expect(post(JSON.stringify({ command: ["ls"], env: { "A=B": "x" } })), 400, "invalid_argument");
  await expect(post(JSON.stringify({ command: ["ls"], timeoutMs: -1 })), 400, "invalid_argument");
  await expect(post(JSON.stringify({ command: ["a\u0000b"] })), 400, "invalid_argument");
  await expect(fetch(`${h.endpoint}/exec`, { method: "POST", body: "{}" }), 401, "unauthenticated");
  await expect(fetch(`${h.endpoint}/nope`, { method: "POST", headers: h.headers, body: "{}" }), 404, "not_found");
  assert.equal((await fetch(`${d.url}/healthz`)).status, 200);
  assert.equal((await c.exec("badexec", ["true"])).exitCode, 0);
});

test("sandboxes and their files outlive a daemon restart (SIGTERM and SIGKILL)", async () => {
  await c.sh("survivor", "echo before > /workspace/f");
  await d.restart("SIGTERM");
  let r = await c.sh("survivor", "cat /workspace/f; echo again >> /workspace/f");
  assert.equal(r.stdout, "before\n");
  await d.restart("SIGKILL");
  r = await c.sh("survivor", "cat /workspace/f");
  assert.equal(r.stdout, "before\nagain\n");
  const g = await c.control("GET", "/v1/sandboxes/survivor");
  assert.equal(g.body.state, "running");
});

test("SIGTERM waits shutdown_grace for requests in flight, then leaves; the command goes on", async () => {
  const dd = await new Daemon({ args: ["--shutdown-grace", "1s", "--pool-size", "0"] }).start();
  try {
    const cc = new Client(dd);
    await cc.attach("inflight");
    // An exec without a deadline, still running when SIGTERM comes.
    const pending = cc.exec("inflight", ["/bin/sh", "-c", "sleep 2; echo done > /workspace/f; sleep 60"]).catch((e) => e);
    await sleep(300);
    const t0 = Date.now();
    await dd.stop("SIGTERM");
    assert.ok(Date.now() - t0 < 8000, `took ${Date.now() - t0} ms to stop`);
    assert.match(dd.log, /requests still running after 1000 ms/);
    await pending;
    await dd.start();
    await sleep(2000);
    assert.equal((await cc.sh("inflight", "cat /workspace/f")).stdout, "done\n");
  } finally {
    await dd.destroy();
  }
});

test("/metrics speaks Prometheus text and holds no secret", async () => {
  const r = await fetch(`${d.url}/metrics`);
  assert.equal(r.status, 200);
  const text = await r.text();
  assert.match(text, /^sandboxd_http_requests_total \d+$/m);
  assert.match(text, /^sandboxd_sandboxes\{state="running"\} \d+$/m);
  assert.ok(!text.includes(c.tok));
});

test("the doc's python3 and node examples", { skip: !HAVE_DEBIAN && "debian image not built" }, async () => {
  const dd = await new Daemon({ image: "debian" }).start();
  try {
    const cc = new Client(dd);
    const r = await cc.exec("thread-42", ["python3", "-c", "print(2 + 2)"]);
    assert.equal(r.stdout, "4\n");
    const n = await cc.exec("thread-42", ["node", "--version"], { cwd: "/workspace", env: { NODE_ENV: "production" }, timeoutMs: 5000 });
    assert.equal(n.exitCode, 0);
    assert.match(n.stdout, /^v\d+\./);
    const w = await cc.exec("thread-42", ["/bin/sh", "-c", "ls -1 | wc -l"]);
    assert.equal(w.exitCode, 0);
  } finally {
    await dd.destroy();
  }
});
