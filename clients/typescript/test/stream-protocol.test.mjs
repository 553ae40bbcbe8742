// The client's side of the process stream's framing, reconnects and
// timeouts, against a scripted loopback server: what a real daemon does not
// do on demand (split frames at every byte, cut a body mid-frame, send an
// oversized or unknown frame, answer 401 or 404 on a reconnect).

import assert from "node:assert/strict";
import { createServer } from "node:http";
import { createHash } from "node:crypto";
import { pipeline } from "node:stream/promises";
import { Writable } from "node:stream";
import { after, before, beforeEach, describe, it } from "node:test";
import { ProcessStream, SandboxClient, SandboxRequestError, SandboxUnavailableError } from "@sandboxd/client";

const STREAM_TYPE = "application/vnd.sandboxd.stream";
const enc = new TextEncoder();

/** One frame: 16-byte head (type, three zero bytes, u32 length, u64 offset), then the payload. */
function frame(type, payload = new Uint8Array(0), offset = 0) {
  const body = typeof payload === "string" ? enc.encode(payload) : payload;
  const out = Buffer.alloc(16 + body.length);
  out[0] = type;
  out.writeUInt32BE(body.length, 4);
  out.writeBigUInt64BE(BigInt(offset), 8);
  out.set(body, 16);
  return out;
}
const status = (extra = {}) => ({
  processId: "p1",
  command: ["x"],
  state: "running",
  startedAt: "2026-01-01T00:00:00.000Z",
  ...extra,
});
const exited = (extra = {}) => status({ state: "exited", exitCode: 0, exitedAt: "2026-01-01T00:00:01.000Z", ...extra });
const start = (from = {}) =>
  frame(1, JSON.stringify({ ...status(), stdoutFrom: 0, stderrFrom: 0, stdoutDropped: 0, stderrDropped: 0, ...from }));
const exit = (next) => frame(4, JSON.stringify({ ...exited(), ...next }));
const out = (text, offset) => frame(2, text, offset);
const err = (text, offset) => frame(3, text, offset);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

describe("process stream protocol (scripted server)", () => {
  let server;
  let url;
  /** (req, res, query) => void, per test: answers GET .../processes/p1/stream. */
  let onStream;
  /** Other data-plane routes, per test. */
  let onData;
  let requests;
  let attaches;

  before(async () => {
    server = createServer((req, res) => {
      const u = new URL(req.url, "http://x");
      if (req.method === "POST" && /^\/v1\/sandboxes\/[^/]+\/attach$/.test(u.pathname)) {
        attaches++;
        res.setHeader("content-type", "application/json");
        res.end(
          JSON.stringify({
            name: "sb",
            class: "ns",
            state: "running",
            endpoint: `${url}/d`,
            headers: { "x-credential": `c${attaches}` },
            expiresAt: new Date(Date.now() + 3_600_000).toISOString(),
          }),
        );
        return;
      }
      requests.push({ method: req.method, path: u.pathname, query: Object.fromEntries(u.searchParams), headers: req.headers });
      if (req.method === "GET" && u.pathname === "/d/processes/p1/stream") return onStream(req, res, u.searchParams);
      return onData(req, res, u);
    });
    await new Promise((r) => server.listen(0, "127.0.0.1", r));
    url = `http://127.0.0.1:${server.address().port}`;
  });
  after(() => {
    server.closeAllConnections();
    server.close();
  });
  beforeEach(() => {
    requests = [];
    attaches = 0;
    onData = (_req, res) => {
      res.statusCode = 404;
      res.end(JSON.stringify({ error: { code: "not_found", message: "no route" } }));
    };
  });

  const client = (opts = {}) => new SandboxClient({ identityToken: "x.e30.x", serverUrl: url, ...opts });
  const streamHead = (res) => {
    res.writeHead(200, { "content-type": STREAM_TYPE });
    res.flushHeaders();
  };
  const collect = async (stream) => {
    const chunks = [];
    for await (const c of stream) chunks.push({ ...c, text: Buffer.from(c.data).toString() });
    return chunks;
  };

  it("frames split at every byte and many in one write parse alike; unknown types and keepalives are skipped", async () => {
    const body = Buffer.concat([
      start(),
      out("hello ", 0),
      frame(6), // keepalive
      frame(42, "from a newer server", 7), // unknown type: skipped
      err("oops", 0),
      out("world", 6),
      exit({ stdoutNext: 11, stderrNext: 4 }),
    ]);
    for (const split of ["bytes", "whole"]) {
      onStream = async (_req, res) => {
        streamHead(res);
        if (split === "whole") return res.end(body);
        for (let i = 0; i < body.length; i++) {
          res.write(body.subarray(i, i + 1));
          if (i % 7 === 0) await sleep(0);
        }
        res.end();
      };
      const s = client().stream("sb", "p1");
      assert.ok(s instanceof ProcessStream);
      assert.equal(s.start, undefined);
      const chunks = await collect(s);
      assert.deepEqual(
        chunks.map((c) => [c.stream, c.offset, c.text]),
        [
          ["stdout", 0, "hello "],
          ["stderr", 0, "oops"],
          ["stdout", 6, "world"],
        ],
        split,
      );
      assert.equal(s.stdoutNext, 11);
      assert.equal(s.stderrNext, 4);
      const x = await s.exit;
      assert.equal(x.state, "exited");
      assert.equal(x.exitCode, 0);
      assert.equal(x.stdoutNext, 11);
      assert.equal(s.start.state, "running");
      assert.equal(s.start.stdoutDropped, 0);
    }
    assert.equal(requests[0].query.stdoutFrom, "0");
    assert.equal(requests[0].query.stderrFrom, "0");
    assert.match(requests[0].headers.accept, /application\/vnd\.sandboxd\.stream/);
  });

  it("a body cut without the exit is reconnected from the next offsets; drops sum over start frames", async () => {
    let n = 0;
    onStream = (_req, res, q) => {
      n++;
      streamHead(res);
      if (n === 1) {
        res.write(Buffer.concat([start({ stdoutDropped: 3, stdoutFrom: 3 }), out("abc", 3), err("E", 0)]));
        // cut inside a frame
        res.end(out("defgh", 6).subarray(0, 19));
        return;
      }
      if (n === 2) {
        assert.equal(q.get("stdoutFrom"), "6");
        assert.equal(q.get("stderrFrom"), "1");
        // The connection breaks (reset) rather than ending.
        res.write(Buffer.concat([start({ stdoutFrom: 6, stderrFrom: 1, stdoutDropped: 2 }), out("def", 6)]));
        setTimeout(() => res.socket.destroy(), 20);
        return;
      }
      assert.equal(q.get("stdoutFrom"), "9");
      res.end(Buffer.concat([start({ stdoutFrom: 9, stderrFrom: 1 }), out("gh", 9), exit({ stdoutNext: 11, stderrNext: 1 })]));
    };
    const s = client().stream("sb", "p1", { stdoutFrom: 0 });
    const chunks = await collect(s);
    assert.equal(n, 3);
    assert.equal(chunks.filter((c) => c.stream === "stdout").map((c) => c.text).join(""), "abcdefgh");
    assert.deepEqual(chunks.filter((c) => c.stream === "stdout").map((c) => c.offset), [3, 6, 9]);
    assert.equal(s.start.stdoutDropped, 5);
    assert.equal(s.start.stdoutFrom, 9);
    assert.equal((await s.exit).stdoutNext, 11);
  });

  it("a frame over 8 MiB is a protocol error, not retried", async () => {
    let n = 0;
    onStream = (_req, res) => {
      n++;
      streamHead(res);
      const head = Buffer.alloc(16);
      head[0] = 2;
      head.writeUInt32BE(8 * 1024 * 1024 + 1, 4);
      res.end(Buffer.concat([start(), head]));
    };
    const s = client().stream("sb", "p1");
    const e = await collect(s).catch((x) => x);
    assert.ok(e instanceof SandboxRequestError, String(e));
    assert.equal(e.status, 502);
    assert.equal(e.code, "invalid_response");
    await assert.rejects(s.exit, (x) => x === e);
    assert.equal(n, 1);
  });

  it("an error frame is thrown with its code; 404 for process_not_found", async () => {
    let n = 0;
    onStream = (_req, res) => {
      n++;
      streamHead(res);
      res.end(Buffer.concat([start(), out("x", 0), frame(5, JSON.stringify({ error: { code: "process_not_found", message: "gone" } }))]));
    };
    const s = client().stream("sb", "p1");
    const seen = [];
    const e = await (async () => {
      for await (const c of s) seen.push(c);
    })().catch((x) => x);
    assert.equal(seen.length, 1);
    assert.ok(e instanceof SandboxRequestError, String(e));
    assert.equal(e.status, 404);
    assert.equal(e.code, "process_not_found");
    assert.equal(e.message, "gone");
    assert.equal(n, 1);
  });

  it("a 404 on a reconnect is thrown; a 401 re-attaches once", async () => {
    let n = 0;
    onStream = (req, res) => {
      n++;
      if (n === 1) {
        streamHead(res);
        return res.end(Buffer.concat([start(), out("a", 0)]));
      }
      if (n === 2) {
        assert.equal(req.headers["x-credential"], "c1");
        res.writeHead(401, { "content-type": "application/json" });
        return res.end(JSON.stringify({ error: { code: "credential_stale", message: "attach again" } }));
      }
      assert.equal(req.headers["x-credential"], "c2");
      res.writeHead(404, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { code: "process_not_found", message: "no such process" } }));
    };
    const s = client().stream("sb", "p1");
    const e = await collect(s).catch((x) => x);
    assert.ok(e instanceof SandboxRequestError, String(e));
    assert.equal(e.status, 404);
    assert.equal(e.code, "process_not_found");
    assert.equal(n, 3);
    assert.equal(attaches, 2);
  });

  it("the first connection's failure is thrown at once; reconnect: false throws on a cut", async () => {
    onStream = (_req, res) => res.socket.destroy();
    const t0 = Date.now();
    await assert.rejects(collect(client().stream("sb", "p1")), SandboxUnavailableError);
    assert.ok(Date.now() - t0 < 2_000);

    let n = 0;
    onStream = (_req, res) => {
      n++;
      streamHead(res);
      res.end(Buffer.concat([start(), out("a", 0)]));
    };
    const s = client().stream("sb", "p1", { reconnect: false });
    await assert.rejects(collect(s), SandboxUnavailableError);
    assert.equal(n, 1);
    assert.equal(s.stdoutNext, 1);
  });

  it("the client timeout bounds the answer's head, not the stream", async () => {
    onStream = async (_req, res) => {
      streamHead(res);
      res.write(start());
      for (let i = 0; i < 5; i++) {
        await sleep(500);
        res.write(out(String(i), i));
      }
      res.end(exit({ stdoutNext: 5, stderrNext: 0 }));
    };
    const s = client({ timeoutSeconds: 1 }).stream("sb", "p1");
    const chunks = await collect(s);
    assert.equal(chunks.map((c) => c.text).join(""), "01234");

    onStream = () => {}; // never answers
    const t0 = Date.now();
    const e = await collect(client({ timeoutSeconds: 1 }).stream("sb", "p1")).catch((x) => x);
    assert.ok(e instanceof SandboxUnavailableError, String(e));
    assert.match(e.message, /no answer within 1000 ms/);
    assert.ok(Date.now() - t0 < 3_000);
  });

  it("a signal ends the iterator with its reason and closes the connection", async () => {
    let closed;
    const gone = new Promise((r) => (closed = r));
    onStream = (req, res) => {
      streamHead(res);
      res.write(Buffer.concat([start(), out("a", 0)]));
      res.on("close", closed);
    };
    const ac = new AbortController();
    const s = client().stream("sb", "p1", { signal: ac.signal });
    const seen = [];
    const why = new Error("enough");
    const e = await (async () => {
      for await (const c of s) {
        seen.push(c);
        setTimeout(() => ac.abort(why), 50);
      }
    })().catch((x) => x);
    assert.equal(e, why);
    assert.equal(seen.length, 1);
    await gone;
    await assert.rejects(s.exit, (x) => x === why);
  });

  it("leaving the loop closes the connection; a stream iterates once", async () => {
    let closed;
    const gone = new Promise((r) => (closed = r));
    onStream = (_req, res) => {
      streamHead(res);
      res.write(Buffer.concat([start(), out("a", 0), out("b", 1)]));
      res.on("close", closed);
    };
    const s = client().stream("sb", "p1");
    for await (const c of s) {
      assert.equal(c.offset, 0);
      break;
    }
    await gone;
    await assert.rejects(s.exit, (x) => x.name === "AbortError");
    assert.throws(() => s[Symbol.asyncIterator](), TypeError);
  });

  it("toReadable gives one stream's bytes, ends at the exit, is destroyed on failure", async () => {
    const bytes = Buffer.alloc(300_000);
    for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 7) & 0xff;
    onStream = (_req, res) => {
      streamHead(res);
      res.write(start());
      for (let off = 0; off < bytes.length; off += 65_536) {
        res.write(frame(2, bytes.subarray(off, off + 65_536), off));
        res.write(err("noise", off / 65_536 * 5));
      }
      res.end(exit({ stdoutNext: bytes.length, stderrNext: 25 }));
    };
    const hash = createHash("sha256");
    await pipeline(client().readable("sb", "p1"), hash);
    assert.equal(hash.digest("hex"), createHash("sha256").update(bytes).digest("hex"));

    const errs = [];
    await pipeline(
      client().readable("sb", "p1", { stream: "stderr", from: 0 }),
      new Writable({
        write(c, _e, cb) {
          errs.push(c);
          cb();
        },
      }),
    );
    assert.equal(Buffer.concat(errs).toString(), "noise".repeat(5));

    onStream = (_req, res) => {
      streamHead(res);
      res.end(Buffer.concat([start(), out("a", 0), frame(5, JSON.stringify({ error: { code: "sandbox_not_found", message: "deleted" } }))]));
    };
    const e = await pipeline(client().readable("sb", "p1"), new Writable({ write: (_c, _e, cb) => cb() })).catch((x) => x);
    assert.ok(e instanceof SandboxRequestError, String(e));
    assert.equal(e.code, "sandbox_not_found");
    assert.equal(e.status, 404);
  });

  it("run decodes UTF-8 split across frames, calls onOutput per frame, reaps", async () => {
    const euro = enc.encode("€"); // 3 bytes
    onData = async (req, res, u) => {
      if (req.method === "POST" && u.pathname === "/d/processes") {
        let text = "";
        for await (const c of req) text += c;
        const body = JSON.parse(text);
        assert.equal(body.lossless, true);
        res.setHeader("content-type", "application/json");
        return res.end(JSON.stringify({ ...status(), lossless: true }));
      }
      if (req.method === "DELETE" && u.pathname === "/d/processes/p1") {
        res.statusCode = 204;
        return res.end();
      }
      res.statusCode = 404;
      res.end();
    };
    onStream = async (_req, res) => {
      streamHead(res);
      res.write(start());
      res.write(out(Buffer.from([0x61, euro[0]]), 0));
      await sleep(10);
      res.write(out(Buffer.from([euro[1]]), 2));
      await sleep(10);
      res.write(out(Buffer.from([euro[2], 0x62]), 3));
      res.write(err("e", 0));
      res.end(exit({ stdoutNext: 5, stderrNext: 1, exitCode: 3 }));
    };
    const seen = [];
    const r = await client().run("sb", { command: ["x"] }, { onOutput: (c) => seen.push(c) });
    assert.equal(r.stdout, "a€b");
    assert.equal(r.stderr, "e");
    assert.equal(r.exitCode, 3);
    assert.equal(r.state, "exited");
    assert.equal(r.stdoutNext, 5);
    assert.equal(r.stdoutDropped, 0);
    assert.equal(r.killed, false);
    assert.deepEqual(
      seen.map((c) => [c.stdout, c.stderr, c.stdoutNext, c.stderrNext]),
      [
        ["a", "", 2, 0],
        ["€b", "", 5, 0],
        ["", "e", 5, 1],
      ],
    );
    assert.ok(requests.some((q) => q.method === "DELETE" && q.path === "/d/processes/p1"));
  });

  it("pty sizes are checked before anything is sent", async () => {
    const sandboxes = client();
    for (const pty of [{ cols: 0, rows: 24 }, { cols: 80, rows: 4097 }, { cols: 80.5, rows: 24 }, { cols: 80 }, null]) {
      const e = await sandboxes.spawn("sb", { command: ["sh"], pty }).catch((x) => x);
      assert.ok(e instanceof SandboxRequestError, `${JSON.stringify(pty)}: ${e}`);
      assert.equal(e.status, 400);
      assert.equal(e.code, "invalid_argument");
    }
    for (const [cols, rows] of [[0, 1], [1, 0], [4097, 1], [1, Number.NaN], ["80", 24]]) {
      const e = await sandboxes.resize("sb", "p1", cols, rows).catch((x) => x);
      assert.ok(e instanceof SandboxRequestError && e.status === 400, `${cols}x${rows}: ${e}`);
    }
    assert.equal(attaches, 0);
    assert.equal(requests.length, 0);
    assert.throws(() => sandboxes.stream("sb", "bad/id"), SandboxRequestError);
    assert.throws(() => sandboxes.stream("sb", "p1", { stdoutFrom: -1 }), SandboxRequestError);
  });
});
