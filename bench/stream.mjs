// Benchmark: output throughput of process streams, in one run on this
// machine, beside what the sandbox's own pipes move:
//   (a) the in-sandbox pipe: `head -c N /dev/zero | wc -c`, timed inside
//       the sandbox (and `| tr '\0' x |` in between, the poll's writer);
//   (b) one lossless process read through the SDK's stream() and through a
//       plain fetch reader (frames decoded, bytes counted);
//   (c) 8 streams at once: 8 processes in one sandbox, and 8 sandboxes;
//   (d) a `waitMs` poll loop over a spawned writer (not lossless: what it
//       does not keep up with is dropped, and counted).
// Each row: MiB/s (bytes over the time from spawn to exit), the ratio to
// the in-sandbox pipe, and the bytes dropped. The 8-stream rows move N/4
// per process (2N in all).
//   node bench/stream.mjs [--bytes 256M] [--class ns|gvisor] [--image debian]
//   SANDBOXD_BIN_OLD=<older sandboxd> node bench/stream.mjs   also polls against that binary
// Figures, not assertions: this machine is shared and noisy. Build the SDK
// first (cd clients/typescript && npm run build).
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import http from "node:http";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Daemon, Client, IMAGES } from "../tests/integration/lib/daemon.mjs";
import { SandboxClient } from "../clients/typescript/dist/index.js";

const arg = (k, d) => {
  const i = process.argv.indexOf(`--${k}`);
  return i > 0 ? process.argv[i + 1] : d;
};
const size = (s) => {
  const m = /^(\d+(?:\.\d+)?)([KMG]?)i?B?$/i.exec(String(s));
  if (!m) throw new Error(`--bytes: not a size: ${s}`);
  return Math.round(Number(m[1]) * { "": 1, K: 1024, M: 1024 ** 2, G: 1024 ** 3 }[m[2].toUpperCase()]);
};
const N = size(arg("bytes", "256M"));
const CLS = arg("class", "ns");
const image = arg("image", existsSync(join(IMAGES, "debian/image.json")) ? "debian" : "tiny");
const ONLY_POLL = process.argv.includes("--only-poll");
const CONCURRENT = 8;
const PER = Math.max(1, Math.floor(N / 4)); // bytes per process of the concurrent rows (2N in all)
const MiB = 1024 * 1024;
const now = () => Number(process.hrtime.bigint()) / 1e6;

const d = await new Daemon({ image, args: ["--log-level", "warn", "--default-class", CLS, "--max-per-deployment", "100"] }).start();
const c = new Client(d, "bench", "bench");

// node's http with keep-alive for the poll loop: what is timed is the server.
const agent = new http.Agent({ keepAlive: true, maxSockets: 16 });
function getJson(url, headers) {
  return new Promise((resolve, reject) => {
    http
      .get(url, { agent, headers }, (res) => {
        const chunks = [];
        res.on("data", (b) => chunks.push(b));
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString();
          if (res.statusCode !== 200) reject(new Error(`${url}: ${res.statusCode} ${text}`));
          else resolve(JSON.parse(text));
        });
      })
      .on("error", reject);
  });
}

async function spawn(name, command, extra = {}) {
  const r = await c.data(name, "POST", "/processes", { command, ...extra });
  if (r.status !== 200) throw new Error(`spawn: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}
const kill = (name, id) => c.data(name, "DELETE", `/processes/${id}`);

/** (d) A waitMs poll loop over a writer that never waits for it. */
async function pollRate(name, bytes) {
  const h = await c.attach(name);
  const t0 = now();
  const p = await spawn(name, ["/bin/sh", "-c", `head -c ${bytes} /dev/zero | tr '\\0' x`]);
  let from = 0;
  let read = 0;
  let dropped = 0;
  for (;;) {
    const ch = await getJson(`${h.endpoint}/processes/${p.processId}?stdoutFrom=${from}&waitMs=1000`, h.headers);
    read += Buffer.byteLength(ch.stdout);
    dropped += ch.stdoutDropped;
    from = ch.stdoutNext;
    if (ch.state === "exited" && ch.stdout === "") break;
  }
  const ms = now() - t0;
  await kill(name, p.processId);
  return { bytes: read, ms, dropped, written: from };
}

if (ONLY_POLL) {
  // The child run of an older binary (SANDBOXD_BIN): the poll row alone.
  await c.attach("poll");
  const r = await pollRate("poll", N);
  console.log(`POLL-RESULT ${JSON.stringify(r)}`);
  await d.destroy();
  process.exit(0);
}

/** (a) The in-sandbox pipe rate: ns, timed by the sandbox's own clock. */
async function pipeNs(name, pipe) {
  const line = `start=$(date +%s%N); ${pipe} | wc -c >/dev/null; end=$(date +%s%N); echo $((end-start))`;
  const r = await c.sh(name, line);
  const ns = Number(r.stdout.trim());
  if (r.exitCode === 0 && Number.isFinite(ns) && ns > 0) return ns / 1e6;
  // No nanosecond date (busybox): the server's duration of the pipe,
  // less that of an empty one (the process start).
  const full = await c.sh(name, `${pipe} | wc -c >/dev/null`);
  const empty = await c.sh(name, `${pipe.replace(/head -c \d+/, "head -c 0")} | wc -c >/dev/null`);
  return Math.max(1, full.durationMs - empty.durationMs);
}

/**
 * A plain reader of a stream: fetch, frames decoded by hand, payload bytes
 * counted without being kept. Answers { bytes, dropped, exit }.
 */
async function plainStream(h, id) {
  const res = await fetch(`${h.endpoint}/processes/${id}/stream?stdoutFrom=0&stderrFrom=0`, { headers: h.headers });
  if (res.status !== 200) throw new Error(`stream: ${res.status} ${await res.text()}`);
  const reader = res.body.getReader();
  let head = Buffer.alloc(0); // an incomplete frame head
  let left = 0; // payload bytes of the current frame still to come
  let type = 0;
  let json = []; // the payload of a start or exit frame
  let bytes = 0;
  let dropped = 0;
  let exit;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    let buf = Buffer.from(value.buffer, value.byteOffset, value.byteLength);
    while (buf.length) {
      if (left === 0 && head.length < 16) {
        const take = Math.min(16 - head.length, buf.length);
        head = Buffer.concat([head, buf.subarray(0, take)]);
        buf = buf.subarray(take);
        if (head.length < 16) break;
        type = head[0];
        left = head.readUInt32BE(4);
        json = [];
        head = Buffer.alloc(0);
        if (left > 0) continue;
      }
      const take = Math.min(left, buf.length);
      if (type === 2 || type === 3) bytes += take;
      else if (type === 1 || type === 4) json.push(buf.subarray(0, take));
      buf = buf.subarray(take);
      left -= take;
      if (left === 0) {
        if (type === 1) {
          const s = JSON.parse(Buffer.concat(json).toString());
          dropped += s.stdoutDropped + s.stderrDropped;
        } else if (type === 4) exit = JSON.parse(Buffer.concat(json).toString());
        else if (type === 5) throw new Error(`stream error frame`);
        head = Buffer.alloc(0);
      }
    }
  }
  if (!exit) throw new Error("the stream ended without its exit frame");
  return { bytes, dropped, exit };
}

/** One lossless `head -c bytes /dev/zero`, read by `how` (sdk | plain). */
async function oneStream(sdk, name, bytes, how) {
  const command = ["head", "-c", String(bytes), "/dev/zero"];
  if (how === "plain") {
    const h = await c.attach(name);
    const p = await spawn(name, command, { lossless: true });
    const r = await plainStream(h, p.processId);
    await kill(name, p.processId);
    return { bytes: r.bytes, dropped: r.dropped };
  }
  const p = await sdk.spawn(name, { command, lossless: true });
  const s = sdk.stream(name, p.processId);
  let got = 0;
  for await (const chunk of s) got += chunk.data.length;
  await s.exit;
  // Best effort, as run() reaps: an exited record may already be gone (the
  // sandbox keeps 64 MiB of exited output, a lossless one up to 32 MiB).
  await sdk.kill(name, p.processId).catch(() => {});
  return { bytes: got, dropped: s.start.stdoutDropped + s.start.stderrDropped };
}

async function timed(fn) {
  const t0 = now();
  const rs = [].concat(await fn());
  const ms = now() - t0;
  return { ms, bytes: rs.reduce((a, r) => a + r.bytes, 0), dropped: rs.reduce((a, r) => a + r.dropped, 0) };
}

const sdk = new SandboxClient({ identityToken: c.tok, timeoutSeconds: 30 });
const names = Array.from({ length: CONCURRENT }, (_, i) => `stream-${i}`);
for (const n of ["pipe", "poll", ...names]) await c.attach(n);
await c.sh("pipe", "true");
for (const n of names) await sdk.exec(n, { command: ["true"] });

const rows = [];
const pipe = await pipeNs("pipe", `head -c ${N} /dev/zero`);
const pipeTr = await pipeNs("pipe", `head -c ${N} /dev/zero | tr '\\0' x`);
const pipeRate = N / MiB / (pipe / 1000);
const pipeTrRate = N / MiB / (pipeTr / 1000);
rows.push(["(a) in-sandbox pipe: head | wc", N, pipe, undefined, pipeRate]);
rows.push(["(a) in-sandbox pipe: head | tr | wc", N, pipeTr, undefined, pipeTrRate]);

// Warm each path once with a small stream, then measure each twice, in
// alternating order, and keep the faster (the machine is noisy).
await oneStream(sdk, names[0], MiB, "sdk");
await oneStream(sdk, names[0], MiB, "plain");
const best = {};
for (const order of [["sdk", "plain"], ["plain", "sdk"]]) {
  for (const how of order) {
    const r = await timed(() => oneStream(sdk, names[0], N, how));
    if (!best[how] || r.ms < best[how].ms) best[how] = r;
  }
}
for (const how of ["sdk", "plain"]) {
  const r = best[how];
  rows.push([`(b) 1 stream, ${how === "sdk" ? "SDK stream()" : "plain fetch reader"}, best of 2`, r.bytes, r.ms, r.dropped, pipeRate]);
}
{
  const r = await timed(() => Promise.all(names.map(() => oneStream(sdk, names[0], PER, "sdk"))));
  rows.push([`(c) ${CONCURRENT} streams, 1 sandbox (SDK, total)`, r.bytes, r.ms, r.dropped, pipeRate]);
}
{
  const r = await timed(() => Promise.all(names.map((n) => oneStream(sdk, n, PER, "sdk"))));
  rows.push([`(c) ${CONCURRENT} streams, ${CONCURRENT} sandboxes (SDK, total)`, r.bytes, r.ms, r.dropped, pipeRate]);
}
{
  const r = await pollRate("poll", N);
  rows.push(["(d) poll loop (waitMs), this binary", r.bytes, r.ms, r.dropped, pipeTrRate]);
}
if (process.env.SANDBOXD_BIN_OLD) {
  const child = spawnSync(
    process.execPath,
    [fileURLToPath(import.meta.url), "--only-poll", "--bytes", String(N), "--class", CLS, "--image", image],
    // An older daemon answers an older contract: not checked against this one.
    { env: { ...process.env, SANDBOXD_BIN: process.env.SANDBOXD_BIN_OLD, SANDBOXD_CONTRACT: "off" },
      encoding: "utf8", maxBuffer: 1 << 20 },
  );
  const line = (child.stdout || "").split("\n").find((l) => l.startsWith("POLL-RESULT "));
  if (line) {
    const r = JSON.parse(line.slice("POLL-RESULT ".length));
    rows.push(["(d) poll loop (waitMs), SANDBOXD_BIN_OLD", r.bytes, r.ms, r.dropped, pipeTrRate]);
  } else {
    console.error(`the SANDBOXD_BIN_OLD run failed (${child.status}):\n${child.stderr}`);
  }
}

await d.destroy();

const f = (x, w, p = 1) => (x === undefined ? "-" : x.toFixed(p)).padStart(w);
console.log(`\nsandboxd stream bench: class ${CLS}, image ${image}, ${(N / MiB).toFixed(0)} MiB per stream` +
  ` (${(PER / MiB).toFixed(0)} MiB each in the ${CONCURRENT}-stream rows)`);
console.log(`${"".padEnd(46)}${"MiB".padStart(8)}${"s".padStart(8)}${"MiB/s".padStart(10)}${"x pipe".padStart(9)}${"dropped".padStart(12)}`);
for (const [what, bytes, ms, dropped, ref] of rows) {
  const rate = bytes / MiB / (ms / 1000);
  console.log(
    `${what.padEnd(46)}${f(bytes / MiB, 8, 0)}${f(ms / 1000, 8, 2)}${f(rate, 10)}${f(rate / ref, 9, 2)}${(dropped === undefined ? "-" : String(dropped)).padStart(12)}`,
  );
}
console.log("x pipe: against `head | wc`, the poll rows against `head | tr | wc` (their writer). dropped: bytes.");
