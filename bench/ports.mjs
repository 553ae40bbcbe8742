// Benchmark: HTTP through {endpoint}/ports/8000/ against the same server
// reached directly from inside the sandbox (a client run there by exec).
// The server is python3's ThreadingHTTPServer in the debian image,
// answering a small body. Figures, no assertions.
//   node bench/ports.mjs [--requests 2000] [--concurrency 8]
//   SANDBOXD_TEST_CLASS=gvisor node bench/ports.mjs
import http from "node:http";
import { Daemon, Client, CLASS, HAVE_DEBIAN, sleep } from "../tests/integration/lib/daemon.mjs";

const arg = (k, d) => {
  const i = process.argv.indexOf(`--${k}`);
  return i > 0 ? Number(process.argv[i + 1]) : d;
};
const N = arg("requests", 2000);
const CONC = arg("concurrency", 8);
if (!HAVE_DEBIAN) {
  console.log("bench/ports: the debian image is not built");
  process.exit(0);
}

const SERVER = `
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
BODY = b"x" * 512
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    wbufsize = 1 << 16  # the head and the body in one write (no Nagle stall between them)
    def log_message(self, *a): pass
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", str(len(BODY))); self.end_headers()
        self.wfile.write(BODY); self.wfile.flush()
ThreadingHTTPServer(("127.0.0.1", 8000), H).serve_forever()
`;

// The same load from inside: sequential or CONC threads, a new connection
// per request (as the proxy's hop to the server is) and kept alive.
const CLIENT = `
import http.client, json, sys, threading, time
n, conc, keep = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "keep"
lat, lock = [], threading.Lock()
def worker(k):
    c = http.client.HTTPConnection("127.0.0.1", 8000) if keep else None
    mine = []
    for _ in range(k):
        t = time.perf_counter()
        conn = c or http.client.HTTPConnection("127.0.0.1", 8000)
        conn.request("GET", "/"); conn.getresponse().read()
        if not keep: conn.close()
        mine.append((time.perf_counter() - t) * 1000)
    with lock: lat.extend(mine)
t0 = time.perf_counter()
ts = [threading.Thread(target=worker, args=(n // conc,)) for _ in range(conc)]
[t.start() for t in ts]; [t.join() for t in ts]
print(json.dumps({"secs": time.perf_counter() - t0, "lat": lat}))
`;

const pct = (v, p) => {
  const s = [...v].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};
const line = (what, n, secs, lat) =>
  console.log(
    `${what.padEnd(44)} ${String(Math.round(n / secs)).padStart(6)} req/s   p50 ${pct(lat, 50).toFixed(2)} ms   p99 ${pct(lat, 99).toFixed(2)} ms`,
  );

function get(url, headers, agent) {
  return new Promise((resolve, reject) => {
    const t = performance.now();
    http
      .get(url, { headers, agent }, (res) => {
        res.resume();
        res.on("end", () => (res.statusCode === 200 ? resolve(performance.now() - t) : reject(new Error(`status ${res.statusCode}`))));
      })
      .on("error", reject);
  });
}

async function load(url, headers, conc, agentOf) {
  const lat = [];
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: conc }, async () => {
      const agent = agentOf();
      for (let i = 0; i < N / conc; i++) lat.push(await get(url, headers, agent));
      agent?.destroy?.();
    }),
  );
  return { secs: (performance.now() - t0) / 1000, lat };
}

const d = await new Daemon({ image: "debian" }).start();
try {
  const c = new Client(d);
  const h = await c.attach("bench");
  await c.data("bench", "PUT", "/files?path=/workspace/server.py", SERVER, true);
  await c.data("bench", "PUT", "/files?path=/workspace/client.py", CLIENT, true);
  await c.spawn("bench", ["python3", "/workspace/server.py"]);
  const url = `${h.endpoint}/ports/8000/`;
  for (let i = 0; i < 100; i++) {
    try {
      await get(url, h.headers);
      break;
    } catch {
      await sleep(100);
    }
  }
  console.log(`class ${CLASS}, ${N} GETs of 512 bytes each run, ${CONC} at once where said`);
  // Warm both paths.
  await load(url, h.headers, 1, () => new http.Agent({ keepAlive: true }));
  await c.exec("bench", ["python3", "/workspace/client.py", "200", "1", "keep"]);

  for (const conc of [1, CONC]) {
    const ka = await load(url, h.headers, conc, () => new http.Agent({ keepAlive: true, maxSockets: 1 }));
    line(`through /ports/, kept alive, ${conc} at once`, N, ka.secs, ka.lat);
    const fresh = await load(url, h.headers, conc, () => new http.Agent({ keepAlive: false }));
    line(`through /ports/, a connection each, ${conc} at once`, N, fresh.secs, fresh.lat);
    for (const mode of ["keep", "new"]) {
      const r = await c.exec("bench", ["python3", "/workspace/client.py", String(N), String(conc), mode], { timeoutMs: 600000 });
      const j = JSON.parse(r.stdout);
      line(`inside, direct, ${mode === "keep" ? "kept alive" : "a connection each"}, ${conc} at once`, N, j.secs, j.lat);
    }
  }
  // Connection set-up: a fresh client connection and the first answer,
  // against one more request on a warm connection (both through /ports/).
  const setup = [], warm = [];
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  for (let i = 0; i < 200; i++) {
    setup.push(await get(url, h.headers, new http.Agent({ keepAlive: false })));
    warm.push(await get(url, h.headers, agent));
  }
  agent.destroy();
  console.log(
    `connection set-up through /ports/: p50 ${(pct(setup, 50) - pct(warm, 50)).toFixed(2)} ms over a warm request ` +
      `(fresh p50 ${pct(setup, 50).toFixed(2)} ms, warm p50 ${pct(warm, 50).toFixed(2)} ms)`,
  );
} finally {
  await d.destroy();
}
