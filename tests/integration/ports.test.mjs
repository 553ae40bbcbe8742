// Ports: an HTTP server inside the sandbox (python3 in the debian image),
// reached through {endpoint}/ports/8000/ and through preview shares. Every
// request goes to the daemon on loopback; the daemon reaches the server
// through the sandbox's own sandbox-init, never through a host port.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import net from "node:net";
import { createHash, randomBytes } from "node:crypto";
import { Daemon, Client, sleep, until, HAVE_DEBIAN } from "./lib/daemon.mjs";

const NO_DEBIAN = !HAVE_DEBIAN && "debian image not built";

// The server: echoes what it was sent, digests a (chunked or sized) body,
// answers chunked and slowly, and speaks just enough WebSocket to echo.
const SERVER = String.raw`
import hashlib, json, sys, time, base64, struct, socket
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def send_json(self, obj, status=200):
        b = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)
    def body_chunks(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b""): pass
                    return
                left = size
                while left:
                    d = self.rfile.read(min(left, 1 << 16)); left -= len(d); yield d
                self.rfile.readline()
        else:
            left = int(self.headers.get("Content-Length", "0"))
            while left:
                d = self.rfile.read(min(left, 1 << 16)); left -= len(d); yield d
    def do_GET(self):
        p = self.path
        if p.startswith("/echo"):
            return self.send_json({"path": p, "hostname": socket.gethostname(), "headers": {k.lower(): v for k, v in self.headers.items()}})
        if p == "/chunked":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(5):
                d = ("part %d\n" % i).encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(d), d)); self.wfile.flush(); time.sleep(0.2)
            self.wfile.write(b"0\r\n\r\n")
            return
        if p == "/slow":
            time.sleep(1)
            return self.send_json({"slow": True})
        if p == "/silent":
            time.sleep(60)
            return
        if p == "/garbage":
            self.wfile.write(b"SPDY/9 200 whatever\r\n\r\n"); self.wfile.flush()
            self.close_connection = True
            return
        if p == "/ws":
            key = self.headers["Sec-WebSocket-Key"]
            acc = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
            self.send_response(101)
            self.send_header("Upgrade", "websocket")
            self.send_header("Connection", "Upgrade")
            self.send_header("Sec-WebSocket-Accept", acc)
            self.end_headers(); self.wfile.flush()
            while True:
                h = self.rfile.read(2)
                if len(h) < 2: return
                op, n = h[0] & 15, h[1] & 127
                if n == 126: n = struct.unpack(">H", self.rfile.read(2))[0]
                elif n == 127: n = struct.unpack(">Q", self.rfile.read(8))[0]
                mask = self.rfile.read(4)
                data = bytes(b ^ mask[i % 4] for i, b in enumerate(self.rfile.read(n)))
                if op == 8:
                    self.wfile.write(b"\x88\x00"); self.wfile.flush(); return
                out = b"echo:" + data
                hdr = bytes([0x80 | op]) + (bytes([len(out)]) if len(out) < 126 else b"\x7e" + struct.pack(">H", len(out)))
                self.wfile.write(hdr + out); self.wfile.flush()
        self.send_json({"error": "no such page"}, 404)
    def do_POST(self):
        h = hashlib.sha256(); n = 0
        for d in self.body_chunks():
            h.update(d); n += len(d)
        self.send_json({"sha256": h.hexdigest(), "bytes": n, "path": self.path})

ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
`;

let d, c, h;

async function startServer(client, name, port = 8000) {
  if (!client.handles.has(name)) await client.attach(name);
  const put = await client.data(name, "PUT", `/files?path=/workspace/server.py`, SERVER, true);
  assert.ok(put.status === 200 || put.status === 204, JSON.stringify(put.body));
  await client.spawn(name, ["python3", "/workspace/server.py", String(port)]);
  // Up once it answers through the proxy (a 502 until it listens).
  await until(async () => (await req(client.handles.get(name), "GET", `/ports/${port}/echo`)).status === 200, 30000);
}

// One request through node:http (streamed, and not checked by the
// contract's fetch validator: these are the sandbox's own answers).
function req(handle, method, path, { headers = {}, body, auth = true, url } = {}) {
  return new Promise((resolve, reject) => {
    const u = new URL(url ?? handle.endpoint + path);
    const r = http.request(u, { method, headers: { ...(auth ? handle.headers : {}), ...headers } }, (res) => {
      const chunks = [];
      const times = [];
      res.on("data", (d) => { chunks.push(d); times.push(chunks.length); });
      res.on("end", () => {
        const buf = Buffer.concat(chunks);
        let json = null;
        try { json = JSON.parse(buf.toString()); } catch {}
        resolve({ status: res.statusCode, headers: res.headers, body: buf, json, pieces: chunks.length });
      });
      res.on("error", reject);
    });
    r.on("error", reject);
    if (typeof body === "function") body(r);
    else r.end(body);
  });
}

before(async () => {
  if (!HAVE_DEBIAN) return;
  // The answer's head may take 4 s (504 after); preview hosts are
  // <port>-<token>.preview.test, reached with a Host header (no DNS).
  d = await new Daemon({ image: "debian", args: ["--port-timeout", "4s", "--preview-domain", "preview.test"] }).start();
  c = new Client(d);
  await startServer(c, "web");
  h = c.handles.get("web");
});

after(async () => {
  if (d) await d.destroy();
});

test("GET reaches the server; the credential is not passed on; X-Forwarded-* set", { skip: NO_DEBIAN }, async () => {
  const r = await req(h, "GET", "/ports/8000/echo/a%20b?x=1&y=2", {
    headers: { "x-forwarded-for": "6.6.6.6", "x-custom": "kept", cookie: "app=1" },
  });
  assert.equal(r.status, 200);
  assert.equal(r.json.path, "/echo/a%20b?x=1&y=2");
  const hd = r.json.headers;
  assert.equal(hd.authorization, undefined, "the credential reached the server");
  const cred = Object.values(h.headers).join(" ").split(" ").pop();
  assert.ok(cred.length > 20 && !JSON.stringify(hd).includes(cred), "the credential reached the server");
  assert.equal(hd["x-custom"], "kept");
  assert.equal(hd.cookie, "app=1");
  assert.equal(hd["x-forwarded-for"], "127.0.0.1", "a client's own X-Forwarded-For is replaced");
  assert.equal(hd["x-forwarded-proto"], "http");
  assert.equal(hd["x-forwarded-host"], new URL(d.url).host);
  assert.equal(hd["x-forwarded-prefix"], "/v1/sandboxes/web/ports/8000");
  assert.equal(hd.host, "localhost:8000");
});

test("without or with a foreign credential: 401; a bad port: 400; no slash: 308", { skip: NO_DEBIAN }, async () => {
  assert.equal((await req(h, "GET", "/ports/8000/echo", { auth: false })).status, 401);
  const other = new Client(d, "dep-b", "acct-b");
  const oh = await other.attach("web");
  // dep-b's sandbox "web" is another sandbox: its credential is not this one's.
  const r = await req(h, "GET", "/ports/8000/echo", { auth: false, headers: oh.headers });
  assert.equal(r.status, 502, "dep-b's own web has no server: its port is unreachable, never dep-a's");
  assert.equal(r.json.error.code, "port_unreachable");
  for (const p of ["0", "65536", "http", "080", "-1"]) {
    const b = await req(h, "GET", `/ports/${p}/`);
    assert.equal(b.status, 400, p);
    assert.equal(b.json.error.code, "invalid_argument");
  }
  const s = await req(h, "GET", "/ports/8000?q=1");
  assert.equal(s.status, 308);
  assert.equal(s.headers.location, "/v1/sandboxes/web/ports/8000/?q=1");
});

test("nothing listening: 502 port_unreachable, counted", { skip: NO_DEBIAN }, async () => {
  const r = await req(h, "GET", "/ports/8999/");
  assert.equal(r.status, 502);
  assert.equal(r.json.error.code, "port_unreachable");
  const m = await (await fetch(`${d.url}/metrics`)).text();
  assert.match(m, /sandboxd_port_connections_total\{result="unreachable"\} [1-9]/);
  assert.match(m, /sandboxd_port_connections_total\{result="opened"\} [1-9]/);
});

test("a 50 MiB POST streams through (chunked and sized); the server's digest matches", { skip: NO_DEBIAN }, async () => {
  const piece = randomBytes(1 << 20);
  const want = createHash("sha256");
  for (let i = 0; i < 50; i++) want.update(piece);
  const digest = want.digest("hex");
  // 50 MiB written a MiB at a time as the socket drains.
  const fifty = (w) => {
    let i = 0;
    const next = () => {
      while (i < 50) {
        i++;
        if (!w.write(piece)) return w.once("drain", next);
      }
      w.end();
    };
    next();
  };
  // Chunked.
  const r = await req(h, "POST", "/ports/8000/upload", {
    body: fifty,
  });
  assert.equal(r.status, 200, r.body.toString());
  assert.equal(r.json.bytes, 50 << 20);
  assert.equal(r.json.sha256, digest);
  // Sized.
  const s = await req(h, "POST", "/ports/8000/upload", {
    headers: { "content-length": String(50 << 20) },
    body: fifty,
  });
  assert.equal(s.status, 200);
  assert.equal(s.json.sha256, digest);
});

test("a chunked answer arrives in its parts; a slow one arrives", { skip: NO_DEBIAN }, async () => {
  const r = await req(h, "GET", "/ports/8000/chunked");
  assert.equal(r.status, 200);
  assert.equal(r.body.toString(), "part 0\npart 1\npart 2\npart 3\npart 4\n");
  assert.ok(r.pieces >= 2, `the parts were held and sent as one (${r.pieces} piece)`);
  const s = await req(h, "GET", "/ports/8000/slow");
  assert.equal(s.status, 200);
  assert.deepEqual(s.json, { slow: true });
});

// A WebSocket client by hand: the upgrade, masked frames out, frames in.
function wsConnect(handle, path, extraHeaders = {}, url) {
  return new Promise((resolve, reject) => {
    const u = new URL(url ?? handle.endpoint + path);
    const key = randomBytes(16).toString("base64");
    const r = http.request(u, {
      headers: { ...extraHeaders, connection: "Upgrade", upgrade: "websocket", "sec-websocket-key": key, "sec-websocket-version": "13" },
    });
    r.on("upgrade", (res, sock, head) => {
      const accept = createHash("sha1").update(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest("base64");
      resolve({ res, sock, head, acceptOk: res.headers["sec-websocket-accept"] === accept });
    });
    r.on("response", (res) => reject(new Error(`no upgrade: ${res.statusCode}`)));
    r.on("error", reject);
    r.end();
  });
}

function wsFrame(text, op = 1) {
  const data = Buffer.from(text);
  const mask = randomBytes(4);
  const len = data.length < 126 ? Buffer.from([0x80 | data.length]) : Buffer.from([0x80 | 126, data.length >> 8, data.length & 255]);
  const masked = Buffer.from(data.map((b, i) => b ^ mask[i % 4]));
  return Buffer.concat([Buffer.from([0x80 | op]), len, mask, masked]);
}

// Read frames from sock until n text frames came; their payloads.
function wsRead(sock, head, n) {
  return new Promise((resolve, reject) => {
    let buf = head;
    const out = [];
    const parse = () => {
      while (buf.length >= 2) {
        let len = buf[1] & 127, off = 2;
        if (len === 126) { if (buf.length < 4) return; len = buf.readUInt16BE(2); off = 4; }
        if (buf.length < off + len) return;
        out.push(buf.subarray(off, off + len).toString());
        buf = buf.subarray(off + len);
        if (out.length === n) { sock.off("data", onData); return resolve(out); }
      }
    };
    const onData = (d) => { buf = Buffer.concat([buf, d]); parse(); };
    sock.on("data", onData);
    sock.on("error", reject);
    sock.on("close", () => reject(new Error(`closed after ${out.length} frames`)));
    parse();
  });
}

test("an answer that never comes: 504; one that is not HTTP: 502", { skip: NO_DEBIAN }, async () => {
  const r = await req(h, "GET", "/ports/8000/silent");
  assert.equal(r.status, 504);
  assert.equal(r.json.error.code, "upstream_timeout");
  const g = await req(h, "GET", "/ports/8000/garbage");
  assert.equal(g.status, 502);
  assert.equal(g.json.error.code, "bad_gateway");
  // The server is still there for the next request.
  assert.equal((await req(h, "GET", "/ports/8000/echo")).status, 200);
});

test("a WebSocket echoes through the proxy", { skip: NO_DEBIAN }, async () => {
  const ws = await wsConnect(h, "/ports/8000/ws", h.headers);
  assert.equal(ws.res.statusCode, 101);
  assert.ok(ws.acceptOk, "Sec-WebSocket-Accept is the server's");
  const reading = wsRead(ws.sock, ws.head, 3);
  ws.sock.write(wsFrame("one"));
  ws.sock.write(wsFrame("two"));
  ws.sock.write(wsFrame("x".repeat(1000)));
  assert.deepEqual(await reading, ["echo:one", "echo:two", "echo:" + "x".repeat(1000)]);
  ws.sock.write(wsFrame("", 8));
  ws.sock.destroy();
});

test("a share URL works without the credential, only for its port, and is revoked", { skip: NO_DEBIAN }, async () => {
  const r = await c.data("web", "POST", "/ports/8000/share", { ttl: "1h", public: true });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  const sh = r.body;
  assert.match(sh.token, /^[0-9a-f]{48}$/);
  assert.equal(sh.pathUrl, `${d.url}/v1/preview/${sh.token}/`);
  assert.equal(sh.url, `http://8000-${sh.token}.preview.test/`);
  assert.equal(sh.hostUrl, sh.url);
  // The host form: any path of that host is the sandbox's.
  const host = new URL(sh.url).host;
  const hf = await req(null, "GET", "", { url: `${d.url}/echo/v1/sandboxes?z=1`, auth: false, headers: { host } });
  assert.equal(hf.status, 200);
  assert.equal(hf.json.path, "/echo/v1/sandboxes?z=1");
  assert.equal(hf.json.headers["x-forwarded-host"], host);
  assert.equal(hf.json.headers["x-forwarded-prefix"], undefined);
  // Another port in the host than the share's: none.
  const wrong = await req(null, "GET", "", { url: `${d.url}/echo`, auth: false, headers: { host: `8001-${sh.token}.preview.test` } });
  assert.equal(wrong.status, 404);
  assert.equal(wrong.json.error.code, "share_not_found");
  const g = await req(null, "GET", "", { url: `${sh.pathUrl}echo/x?y=1`, auth: false });
  assert.equal(g.status, 200);
  assert.equal(g.json.path, "/echo/x?y=1");
  assert.equal(g.json.headers["x-forwarded-prefix"], `/v1/preview/${sh.token}`);
  // A WebSocket through the share.
  const ws = await wsConnect(null, "", {}, `${sh.pathUrl}ws`);
  const reading = wsRead(ws.sock, ws.head, 1);
  ws.sock.write(wsFrame("shared"));
  assert.deepEqual(await reading, ["echo:shared"]);
  ws.sock.destroy();
  // Listed; a token altered in one digit is none.
  const l = await c.data("web", "GET", "/ports/shares");
  assert.equal(l.status, 200);
  assert.ok(l.body.shares.some((s) => s.id === sh.id && s.port === 8000));
  const bad = sh.token.slice(0, -1) + (sh.token.endsWith("0") ? "1" : "0");
  assert.equal((await req(null, "GET", "", { url: `${d.url}/v1/preview/${bad}/echo`, auth: false })).status, 404);
  // Revoked: 404 at once.
  assert.equal((await c.data("web", "DELETE", `/ports/8000/share/${sh.id}`)).status, 204);
  const after = await req(null, "GET", "", { url: `${sh.pathUrl}echo`, auth: false });
  const gone = await req(null, "GET", "", { url: `${d.url}/echo`, auth: false, headers: { host } });
  assert.equal(gone.status, 404);
  assert.equal(gone.json.error.code, "share_not_found");
  assert.equal(after.status, 404);
  assert.equal(after.json.error.code, "share_not_found");
  assert.equal((await c.data("web", "DELETE", `/ports/8000/share/${sh.id}`)).status, 404);
  // A token is a secret: the daemon's log never holds one.
  assert.ok(!d.log.includes(sh.token), "a share token was logged");
  assert.match(d.log, /GET \/v1\/preview\/<token>\/echo/);
});

test("a share expires", { skip: NO_DEBIAN }, async () => {
  const r = await c.data("web", "POST", "/ports/8000/share", { ttl: "2s", public: true });
  assert.equal(r.status, 201);
  const exp = Date.parse(r.body.expiresAt);
  assert.equal((await req(null, "GET", "", { url: `${r.body.pathUrl}echo`, auth: false })).status, 200);
  await until(() => Date.now() > exp + 200, 10000);
  const g = await req(null, "GET", "", { url: `${r.body.pathUrl}echo`, auth: false });
  assert.equal(g.status, 401);
  assert.equal(g.json.error.code, "share_expired");
  for (const ttl of ["0s", "31d", "soon", -1, true])
    assert.equal((await c.data("web", "POST", "/ports/8000/share", { ttl })).status, 400, String(ttl));
});

test("a share that is not public takes its deployment's identity token, and strips it", { skip: NO_DEBIAN }, async () => {
  const r = await c.data("web", "POST", "/ports/8000/share", { ttl: "1h" });
  assert.equal(r.status, 201);
  assert.equal(r.body.public, false);
  const url = `${r.body.pathUrl}echo`;
  assert.equal((await req(null, "GET", "", { url, auth: false })).status, 401);
  const foreign = d.token("dep-b", "acct-b");
  assert.equal((await req(null, "GET", "", { url, auth: false, headers: { authorization: `Bearer ${foreign}` } })).status, 401);
  const own = d.token("dep-a", "acct-a");
  const g = await req(null, "GET", "", { url, auth: false, headers: { authorization: `Bearer ${own}` } });
  assert.equal(g.status, 200);
  assert.equal(g.json.headers.authorization, undefined, "the identity token reached the server");
});

test("a share of one sandbox never reaches another's port; a sandbox deleted ends its shares", { skip: NO_DEBIAN }, async () => {
  await startServer(c, "other");
  const mine = await c.data("web", "POST", "/ports/8000/share", { public: true });
  const theirs = await c.data("other", "POST", "/ports/8000/share", { public: true });
  const a = await req(null, "GET", "", { url: `${mine.body.pathUrl}echo`, auth: false });
  const b = await req(null, "GET", "", { url: `${theirs.body.pathUrl}echo`, auth: false });
  assert.equal(a.status, 200);
  assert.equal(b.status, 200);
  // Each reached its own server: the one of its sandbox's hostname.
  assert.equal(a.json.hostname, (await c.sh("web", "hostname")).stdout.trim());
  assert.equal(b.json.hostname, (await c.sh("other", "hostname")).stdout.trim());
  assert.notEqual(a.json.hostname, b.json.hostname);
  // Another sandbox's name of the same deployment: attach it again after
  // delete, and the old share does not reach the new incarnation.
  assert.equal((await c.control("DELETE", "/v1/sandboxes/other")).status, 204);
  c.handles.delete("other");
  await startServer(c, "other");
  const gone = await req(null, "GET", "", { url: `${theirs.body.pathUrl}echo`, auth: false });
  assert.equal(gone.status, 404, "a share reached a later sandbox of the same name");
  assert.equal((await c.control("DELETE", "/v1/sandboxes/other")).status, 204);
  c.handles.delete("other");
});

test("shares survive a restart of the daemon; an open WebSocket does not hold the stop up", { skip: NO_DEBIAN }, async () => {
  const r = await c.data("web", "POST", "/ports/8000/share", { public: true });
  assert.equal(r.status, 201);
  const ws = await wsConnect(h, "/ports/8000/ws", h.headers);
  const closed = new Promise((res) => ws.sock.on("close", res));
  ws.sock.on("error", () => {});
  await d.restart(); // throws when the daemon does not exit cleanly
  await closed; // the relay ended with the daemon

  const g = await req(null, "GET", "", { url: `${r.body.pathUrl}echo`, auth: false });
  assert.equal(g.status, 200);
});

test("a suspended sandbox wakes on a request to its port", { skip: NO_DEBIAN }, async () => {
  assert.equal((await c.control("POST", "/v1/sandboxes/web/stop")).status, 204);
  assert.equal((await c.control("GET", "/v1/sandboxes/web")).body.state, "suspended");
  const r = await req(h, "GET", "/ports/8000/echo");
  assert.equal(r.status, 200);
  assert.equal((await c.control("GET", "/v1/sandboxes/web")).body.state, "running");
});

test("a sandbox without a network is reached too", { skip: NO_DEBIAN }, async () => {
  const r = await c.control("POST", "/v1/sandboxes/offline/attach", { network: "none" });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  c.handles.set("offline", r.body);
  await startServer(c, "offline", 8080);
  const g = await req(c.handles.get("offline"), "GET", "/ports/8080/echo");
  assert.equal(g.status, 200);
  assert.equal((await c.control("DELETE", "/v1/sandboxes/offline")).status, 204);
});

test("a request body over max_file: 413, chunked or sized", { skip: NO_DEBIAN }, async () => {
  const small = await new Daemon({ image: "debian", args: ["--max-file", "1M"] }).start();
  try {
    const sc = new Client(small);
    await startServer(sc, "capped");
    const sh = sc.handles.get("capped");
    const two = Buffer.alloc(2 << 20, 7);
    const chunked = await req(sh, "POST", "/ports/8000/upload", { body: (w) => { w.write(two.subarray(0, 1 << 20)); w.end(two.subarray(1 << 20)); } });
    assert.equal(chunked.status, 413);
    assert.equal(chunked.json.error.code, "too_large");
    const sized = await req(sh, "POST", "/ports/8000/upload", { headers: { "content-length": String(two.length) }, body: two });
    assert.equal(sized.status, 413);
    const fits = await req(sh, "POST", "/ports/8000/upload", { body: two.subarray(0, 1000) });
    assert.equal(fits.status, 200);
    assert.equal(fits.json.bytes, 1000);
  } finally {
    await small.destroy();
  }
});
