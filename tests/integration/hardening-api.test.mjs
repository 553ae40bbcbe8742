// The HTTP and file API under a hostile tenant and a careless operator:
// downloads of files that shrink, deep paths, slowloris, uploads cut by a
// SIGKILL, what a 204 promises, credentials of vanished sandboxes, error
// codes, races with delete, and malformed requests.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import { spawn, spawnSync } from "node:child_process";
import { readFileSync, existsSync, rmSync } from "node:fs";
import { join } from "node:path";
import { tmpdir } from "node:os";
import { Daemon, Client, sleep, until } from "./lib/daemon.mjs";

let d, c;
before(async () => {
  d = await new Daemon({ args: ["--pool-size", "0"] }).start();
  c = new Client(d);
});
after(async () => d && (await d.destroy()));

const q = (p) => encodeURIComponent(p);
const put = (name, path, body) => c.data(name, "PUT", `/files?path=${q(path)}`, body, true);

// CPU seconds the daemon has used so far (utime + stime of all its threads).
function cpuSeconds(pid) {
  const f = readFileSync(`/proc/${pid}/stat`, "utf8");
  const rest = f.slice(f.lastIndexOf(")") + 2).split(" ");
  return (Number(rest[11]) + Number(rest[12])) / 100;
}

// Send raw bytes, collect the answer until the server closes (or ms pass).
function raw(port, text, { local, ms = 5000 } = {}) {
  return new Promise((res) => {
    const s = net.connect({ port, host: "127.0.0.1", localAddress: local });
    let out = "";
    const done = () => {
      clearTimeout(t);
      s.destroy();
      res(out);
    };
    const t = setTimeout(done, ms);
    s.on("data", (b) => (out += b.toString("latin1")));
    s.on("close", done);
    s.on("error", done);
    s.write(text);
  });
}

test("a download of a file that shrinks while it streams ends, and nothing spins after it", async () => {
  await c.sh("shrink", "truncate -s 20G /workspace/big");
  const h = c.handles.get("shrink");
  const ac = new AbortController();
  const killer = setTimeout(() => ac.abort(), 60000);
  const r = await fetch(`${h.endpoint}/files?path=${q("/workspace/big")}`, { headers: h.headers, signal: ac.signal });
  assert.equal(r.status, 200);
  assert.equal(r.headers.get("content-length"), String(20 * 2 ** 30));
  const reader = r.body.getReader();
  let got = 0;
  while (got < 8 << 20) got += (await reader.read()).value.length;
  assert.equal((await c.sh("shrink", "truncate -s 0 /workspace/big")).exitCode, 0);
  let ended = "eof";
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      got += value.length;
    }
  } catch (e) {
    ended = ac.signal.aborted ? "aborted" : "cut";
  }
  clearTimeout(killer);
  assert.equal(ended, "cut", "the response must end early, not hang");
  assert.ok(got < 20 * 2 ** 30);
  // The connection's thread is gone, not spinning: the idle daemon uses
  // (far) less than a core while we wait.
  const t0 = cpuSeconds(d.proc.pid);
  await sleep(2000);
  assert.ok(cpuSeconds(d.proc.pid) - t0 < 1, "the daemon keeps using CPU after the download ended");
  assert.match(d.log, /download cut at byte \d+ of 21474836480: the file shrank/);
});

test("a file that grows while it streams is sent up to its length when opened", async () => {
  await c.sh("grow", "head -c 4194304 /dev/zero > /workspace/g");
  const h = c.handles.get("grow");
  const r = await fetch(`${h.endpoint}/files?path=${q("/workspace/g")}`, { headers: h.headers });
  await c.sh("grow", "head -c 1048576 /dev/zero >> /workspace/g");
  assert.equal(Buffer.from(await r.arrayBuffer()).length, 4194304);
});

test("paths as deep as their length allows: 55 levels in 118 bytes, ~2000 in 4000", async () => {
  const short = "r/" + "d/".repeat(57) + "xy";
  assert.equal(short.length, 118);
  assert.equal((await put("deep", short, "shallow")).status, 204);
  const long = "e/".repeat(1999) + "y";
  assert.ok(long.length >= 3999 && long.length <= 4000, String(long.length));
  assert.equal((await put("deep", long, "deepest")).status, 204);
  const g = await c.data("deep", "GET", `/files?path=${q(long)}`);
  assert.equal(g.status, 200);
  assert.equal(g.body, "deepest");
  assert.equal((await c.sh("deep", `cat /workspace/${short}`)).stdout, "shallow");
  // Past the limit: a clear 400 naming it, not a crash.
  const over = await put("deep", "f/".repeat(2100) + "z", "x");
  assert.equal(over.status, 400);
  assert.match(over.body.error.message, /4084|4095/);
  assert.equal((await fetch(`${d.url}/healthz`)).status, 200);
});

test("doubled slashes and . in a path are normalized before directories are made", async () => {
  assert.equal((await put("slash", "/workspace/q//a/./b.txt", "ok")).status, 204);
  assert.equal((await c.sh("slash", "cat /workspace/q/a/b.txt")).stdout, "ok");
  assert.equal((await put("slash", "/workspace//n/..//m/c.txt", "up")).status, 204);
  assert.equal((await c.sh("slash", "cat /workspace/m/c.txt")).stdout, "up");
});

test("slowloris: a trickled request head is cut at its deadline; /healthz answers throughout", async () => {
  const s = await new Daemon({
    args: ["--pool-size", "0", "--max-connections", "64", "--max-connections-per-ip", "16",
      "--request-head-timeout", "2s"],
  }).start();
  const socks = [];
  let closed = 0;
  let dripping = true;
  try {
    for (let i = 0; i < 80; i++) {
      const sock = net.connect({ port: s.port, host: "127.0.0.1", localAddress: "127.0.0.2" });
      sock.on("error", () => {});
      sock.on("close", () => closed++);
      sock.on("connect", () => sock.write("GET /healthz HTTP/1.1\r\nHost: x\r\n"));
      socks.push(sock);
    }
    const drip = (async () => {
      while (dripping) {
        for (const sock of socks) if (!sock.destroyed) sock.write("X");
        await sleep(500);
      }
    })();
    await sleep(800);
    for (let i = 0; i < 3; i++) {
      const r = await fetch(`${s.url}/healthz`, { signal: AbortSignal.timeout(5000) });
      assert.equal(r.status, 200);
      await sleep(700);
    }
    // Every flooding connection is closed by the server within a bound,
    // although each keeps sending a byte every half second.
    await until(() => closed === 80, 15000);
    dripping = false;
    await drip;
    assert.match(s.log, /closed a connection from 127\.0\.0\.2: its request head took over 2000 ms/);
    // A client that sends its head at once is not cut, and keep-alive
    // connections idle between requests are left alone.
    const ok = await raw(s.port, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert.match(ok, /^HTTP\/1\.1 200/);
  } finally {
    dripping = false;
    for (const sock of socks) sock.destroy();
    await s.destroy();
  }
});

test("an upload cut by a SIGKILL of the daemon leaves no temporary file in the sandbox", async () => {
  const k = await new Daemon({ args: ["--pool-size", "0"] }).start();
  const kc = new Client(k);
  try {
    await kc.sh("cut", "mkdir -p /workspace/up /tmp/up");
    const h = kc.handles.get("cut");
    // Bodies that go on until the daemon is killed (at most 256 MiB).
    const ac = new AbortController();
    const start = (path) => {
      let sent = 0;
      const req = new Request(`${h.endpoint}/files?path=${q(path)}`, {
        method: "PUT",
        headers: h.headers,
        duplex: "half",
        signal: ac.signal,
        body: new ReadableStream({
          async pull(ctl) {
            if (ac.signal.aborted || (sent += 1 << 20) > 256 << 20) return ctl.close();
            ctl.enqueue(new Uint8Array(1 << 20));
            await sleep(50);
          },
        }),
      });
      return fetch(req).catch(() => "cut");
    };
    const ups = [start("/workspace/up/f"), start("/tmp/up/g")];
    const temps = () => kc.sh("cut", "ls -a /workspace/up /tmp/up | grep -c '^.sandboxd-upload-' || true");
    await until(async () => (await temps()).stdout.trim() === "2", 20000);
    await k.stop("SIGKILL");
    ac.abort();
    await Promise.all(ups);
    await k.start();
    // The restarted daemon finds the sandbox's agent alive and sweeps.
    assert.equal((await temps()).stdout.trim(), "0");
    assert.match(k.log, /name=cut: removed 2 unfinished upload\(s\) of an earlier run/);
    assert.equal((await kc.sh("cut", "df -k /workspace | tail -1")).exitCode, 0);
  } finally {
    await k.destroy();
  }
});

test("a 204 for a PUT means the file was fsynced before the rename and its directory after", async (t) => {
  const strace = spawnSync("strace", ["-V"]);
  if (strace.status !== 0) return t.skip("strace is not installed");
  await c.sh("sync", "mkdir -p /workspace/s");
  const out = join(tmpdir(), `sandboxd-strace-${process.pid}.txt`);
  const st = spawn("strace", ["-f", "-qq", "-e", "trace=fsync,fdatasync,rename,renameat,renameat2",
    "-o", out, "-p", String(d.proc.pid)], { stdio: "ignore" });
  try {
    await sleep(1500); // attached to every thread
    assert.equal((await put("sync", "/workspace/s/file", "durable")).status, 204);
    await sleep(300);
  } finally {
    st.kill("SIGINT");
    await new Promise((r) => st.on("exit", r));
  }
  const lines = readFileSync(out, "utf8").split("\n").filter((l) => /fsync|rename/.test(l));
  rmSync(out, { force: true });
  const iRename = lines.findIndex((l) => /rename.*sandboxd-upload-.*"file"/.test(l));
  assert.ok(iRename > 0, lines.join("\n"));
  assert.ok(lines.slice(0, iRename).some((l) => /fsync\(\d+\)\s+= 0/.test(l)), "fsync of the file before the rename");
  assert.ok(lines.slice(iRename + 1).some((l) => /fsync\(\d+\)\s+= 0/.test(l)), "fsync of the directory after it");
});

test("error codes tell a missing file, process and sandbox apart, without errno text", async () => {
  const f = await c.data("codes", "GET", `/files?path=${q("/workspace/none")}`);
  assert.equal(f.status, 404);
  assert.equal(f.body.error.code, "file_not_found");
  const p = await c.data("codes", "GET", "/processes/p-missing");
  assert.equal(p.status, 404);
  assert.equal(p.body.error.code, "process_not_found");
  const s = await c.control("GET", "/v1/sandboxes/never-made");
  assert.equal(s.status, 404);
  assert.equal(s.body.error.code, "sandbox_not_found");
  assert.equal(s.body.error.message, "sandbox 'never-made' does not exist");
  const del = await c.control("DELETE", "/v1/sandboxes/never-made");
  assert.equal(del.body.error.code, "sandbox_not_found");
  const list = await c.data("codes", "GET", `/files/list?path=${q("/workspace/none")}`);
  assert.equal(list.body.error.code, "file_not_found");
});

test("a credential of a deleted sandbox gets 401 credential_stale, never a 404", async () => {
  const h = await c.attach("stale");
  await c.sh("stale", "true");
  assert.equal((await c.control("DELETE", "/v1/sandboxes/stale")).status, 204);
  for (const [m, path, body] of [["POST", "/exec", { command: ["true"] }], ["GET", "/processes"],
    ["GET", "/files?path=x"], ["PUT", "/files?path=x"]]) {
    const r = await fetch(`${h.endpoint}${path}`, {
      method: m, headers: h.headers, body: body ? JSON.stringify(body) : m === "PUT" ? "x" : undefined,
    });
    assert.equal(r.status, 401, `${m} ${path}`);
    assert.equal((await r.json()).error.code, "credential_stale");
  }
});

test("attach and exec racing a delete of the same name get 404 or a new sandbox, never a 5xx", async () => {
  const seen = new Map();
  for (let round = 0; round < 12; round++) {
    const name = `race-${round % 3}`;
    const h = await c.attach(name);
    const calls = [
      fetch(`${h.endpoint}/exec`, { method: "POST", headers: h.headers, body: JSON.stringify({ command: ["sleep", "0.2"] }) }),
      c.control("DELETE", `/v1/sandboxes/${name}`),
      c.control("POST", `/v1/sandboxes/${name}/attach`, {}),
      fetch(`${h.endpoint}/files?path=${q("/workspace/x")}`, { method: "PUT", headers: h.headers, body: "x" }),
      fetch(`${h.endpoint}/processes`, { headers: h.headers }),
    ];
    for (const r of await Promise.all(calls)) {
      const body = typeof r.json === "function" ? await r.text() : JSON.stringify(r.body);
      const key = `${r.status}`;
      seen.set(key, (seen.get(key) || 0) + 1);
      assert.ok(r.status < 500, `got ${r.status}: ${body}`);
    }
  }
  assert.ok(seen.has("204"), JSON.stringify([...seen]));
});

test("malformed requests: NUL in a path or id, ambiguous body lengths, long names, read-only files", async () => {
  const h = await c.attach("bad");
  const hdr = h.headers.Authorization;
  // %00 in the path query: a 400, and nothing named "a" is written.
  const nul = await fetch(`${h.endpoint}/files?path=a%00b`, { method: "PUT", headers: h.headers, body: "x" });
  assert.equal(nul.status, 400);
  assert.equal((await c.sh("bad", "ls /workspace")).stdout, "");
  // %00 as a process id: never the list of processes.
  await c.data("bad", "POST", "/processes", { command: ["sleep", "5"] });
  const pid = await fetch(`${h.endpoint}/processes/%00`, { headers: h.headers });
  assert.equal(pid.status, 400);
  assert.equal((await pid.json()).processes, undefined);
  // Two different Content-Lengths; a Content-Length with chunked.
  const path = `/v1/sandboxes/bad/files?path=cl`;
  const two = await raw(d.port, `PUT ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: ${hdr}\r\n` +
    "Content-Length: 3\r\nContent-Length: 5\r\n\r\nabcde");
  assert.match(two, /^HTTP\/1\.1 400/);
  const both = await raw(d.port, `PUT ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: ${hdr}\r\n` +
    "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n");
  assert.match(both, /^HTTP\/1\.1 400/);
  assert.equal((await c.sh("bad", "ls /workspace")).stdout, "");
  // A name over 255 bytes says so.
  const long = await put("bad", "n".repeat(300), "x");
  assert.equal(long.status, 400);
  assert.match(long.body.error.message, /at most 255 bytes/);
});

test("files sandboxd binds read-only into a sandbox cannot be replaced through the file API", async () => {
  const h = await c.attach("ro");
  const before = (await c.sh("ro", "cat /etc/resolv.conf")).stdout;
  const r = await put("ro", "/etc/resolv.conf", "nameserver 192.0.2.1\n");
  assert.equal(r.status, 403);
  assert.equal(r.body.error.code, "permission_denied");
  assert.match(r.body.error.message, /read-only/);
  assert.equal((await c.sh("ro", "cat /etc/resolv.conf")).stdout, before);
  assert.equal((await c.sh("ro", "ls -a /etc | grep -c sandboxd-upload || true")).stdout.trim(), "0");
  assert.ok(h);
});

test("a suspended sandbox's record has no ceilingAt", async () => {
  await c.attach("susp");
  assert.ok((await c.control("GET", "/v1/sandboxes/susp")).body.ceilingAt);
  assert.equal((await c.control("POST", "/v1/sandboxes/susp/stop")).status, 204);
  const g = await c.control("GET", "/v1/sandboxes/susp");
  assert.equal(g.body.state, "suspended");
  assert.equal(g.body.ceilingAt, undefined);
});
