// Benchmark: what held requests cost the daemon. One daemon, S sandboxes
// (`tiny`, no network) each running a quiet process (`sleep 3600`), and N
// requests held at once, each on a TCP connection of its own to
// 127.0.0.1: half long polls (waitMs 30000, asked again as soon as each is
// answered), half streams of those processes (a start frame, then a
// keepalive every 15 s). While they are held: how many are still open and
// answering, the resets and errors, the daemon's RSS, threads and open
// files (/proc/<pid>/status, /proc/<pid>/fd), and the latency of an exec
// of `true` in another sandbox (p50/p99 of 50, beside the same before
// anything is held). Then everything is closed and the sandboxes deleted.
//   node bench/held.mjs [--held 10000] [--sandboxes 20] [--bin PATH]
// The connections are plain sockets with a hand-written HTTP/1.1 request,
// so that ten thousand cost node little. Node cannot raise its own open
// file limit: start it from a shell with `ulimit -n` above N.
// Figures, not assertions: this machine is shared and noisy.
import net from "node:net";
import { readFileSync, readdirSync } from "node:fs";
import { resolve } from "node:path";

const arg = (k, d) => {
  const i = process.argv.indexOf(`--${k}`);
  return i > 0 ? process.argv[i + 1] : d;
};
const HELD = Number(arg("held", 10000));
const SANDBOXES = Number(arg("sandboxes", 20));
if (!(HELD >= 2 && SANDBOXES >= 1)) throw new Error("--held must be at least 2, --sandboxes at least 1");
if (arg("bin")) process.env.SANDBOXD_BIN = resolve(arg("bin"));
// The harness reads SANDBOXD_BIN when it is loaded.
const { Daemon, Client, freePort, sleep } = await import("../tests/integration/lib/daemon.mjs");

const WAIT_MS = 30000;
const OPEN_WIDTH = 256; // connections being opened at once
const T0 = Date.now();
const BUDGET_MS = 170000; // the whole run, at the defaults, ends within 3 minutes
const left = () => BUDGET_MS - (Date.now() - T0);
const now = () => performance.now();
const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];

function procStatus(pid) {
  const s = readFileSync(`/proc/${pid}/status`, "utf8");
  return {
    rssKiB: Number(/^VmRSS:\s+(\d+)/m.exec(s)[1]),
    threads: Number(/^Threads:\s+(\d+)/m.exec(s)[1]),
    fds: readdirSync(`/proc/${pid}/fd`).length,
  };
}
const softNofile = (pid) => Number(/^Max open files\s+(\d+|unlimited)/m.exec(readFileSync(`/proc/${pid}/limits`, "utf8"))[1]) || Infinity;

// What the connections saw, all of them together.
const seen = {
  open: 0, // connected and not closed by the other side
  resets: 0, // closed by the daemon or broken while held
  errors: new Map(), // error code -> count (connect failures included)
  emfile: 0,
  answers: 0, // poll answers (200)
  badAnswers: new Map(), // poll status -> count
  streamStarts: 0, // streams whose first body bytes (the start frame) came
};
const bump = (m, k) => m.set(k, (m.get(k) || 0) + 1);

// One held request on a socket of its own: `kind` "poll" (asked again on
// the same connection each time it is answered) or "stream".
class Held {
  constructor(kind, path, headers) {
    this.kind = kind;
    this.head = `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n` +
      Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join("") + "\r\n";
    this.buf = Buffer.alloc(0);
    this.closing = false;
    this.broken = false;
    this.polls = 0; // poll answers on this connection
    this.started = false;
  }

  open(port) {
    return new Promise((res) => {
      const s = net.connect({ host: "127.0.0.1", port });
      this.sock = s;
      let connected = false;
      s.setNoDelay(true);
      s.on("connect", () => {
        connected = true;
        seen.open++;
        s.write(this.head);
        res(true);
      });
      s.on("data", (d) => this.onData(d));
      s.on("error", (e) => {
        if (e.code === "EMFILE" || e.code === "ENFILE") seen.emfile++;
        if (!this.closing) bump(seen.errors, e.code || e.message);
        if (!connected) res(false);
      });
      s.on("close", () => {
        if (!connected) return res(false);
        seen.open--;
        if (!this.closing) {
          this.broken = true;
          seen.resets++;
        }
      });
    });
  }

  onData(d) {
    this.buf = this.buf.length ? Buffer.concat([this.buf, d]) : d;
    if (this.kind === "stream") {
      // Frames are not decoded: body bytes after a 200 head (the start
      // frame's chunk) mean it answers; what follows is dropped.
      if (this.started || this.refused) return void (this.buf = Buffer.alloc(0));
      const end = this.buf.indexOf("\r\n\r\n");
      if (end < 0) return;
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(this.buf.toString("latin1", 0, 16))?.[1]);
      if (status !== 200) {
        this.refused = true;
        bump(seen.badAnswers, `stream ${status}`);
      } else if (this.buf.length > end + 4) {
        this.started = true;
        seen.streamStarts++;
        this.buf = Buffer.alloc(0);
      }
      return;
    }
    for (;;) {
      const end = this.buf.indexOf("\r\n\r\n");
      if (end < 0) return;
      const head = this.buf.subarray(0, end).toString("latin1");
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1]);
      const len = /\r\ncontent-length:\s*(\d+)/i.exec(head);
      if (!len) { // the answers here carry their length; anything else is noted and left
        bump(seen.badAnswers, `${status} without Content-Length`);
        this.buf = Buffer.alloc(0);
        return;
      }
      const total = end + 4 + Number(len[1]);
      if (this.buf.length < total) return;
      this.buf = this.buf.subarray(total);
      if (status === 200) seen.answers++;
      else bump(seen.badAnswers, status);
      this.polls++;
      if (!this.closing) this.sock.write(this.head);
    }
  }

  close() {
    this.closing = true;
    this.sock?.destroy();
  }
}

async function pool(n, f, width) {
  let next = 0;
  await Promise.all(Array.from({ length: Math.min(width, n) }, async () => {
    while (next < n) await f(next++);
  }));
}

async function requestsTotal(d) {
  const text = await (await fetch(`${d.url}/metrics`)).text();
  return Number(/^sandboxd_http_requests_total (\d+)$/m.exec(text)?.[1] ?? NaN);
}

async function execLatency(c, name, n) {
  const ms = [];
  for (let i = 0; i < n && left() > 20000; i++) {
    const t = now();
    const r = await c.exec(name, ["true"]);
    ms.push(now() - t);
    if (r.exitCode !== 0) throw new Error(`exec true in ${name}: ${JSON.stringify(r)}`);
  }
  return ms;
}

const nodeLimit = softNofile("self");
if (HELD + 256 > nodeLimit) {
  console.log(`bench: node may open ${nodeLimit} files (ulimit -n) and --held ${HELD} needs about ${HELD + 256}: ` +
    `node cannot raise its own limit; start it from a shell with a higher \`ulimit -n\`, or ask for fewer.`);
  process.exit(2);
}

const cap = String(HELD + 256);
const d = new Daemon({ args: ["--network", "none", "--pool-size", "0", "--max-per-deployment", String(SANDBOXES + 8),
  "--max-connections", cap, "--max-connections-per-ip", cap] });
// The identity token is minted before the daemon runs: the harness mints
// with a synchronous child, which would stop node draining the daemon's
// output were it done while the daemon runs.
d.port = await freePort();
const c = new Client(d);
const names = Array.from({ length: SANDBOXES }, (_, i) => `held-${i}`);
const held = [];
const rows = [];
let failed = false;
try {
  await d.start();
  const pid = d.proc.pid;
  console.log(`sandboxd held-requests bench: ${HELD} held (${Math.ceil(HELD / 2)} long polls, ${Math.floor(HELD / 2)} streams) ` +
    `over ${SANDBOXES} sandboxes; daemon may open ${softNofile(pid)} files`);
  const procs = new Map();
  await pool(SANDBOXES, async (i) => {
    await c.sh(names[i], "true");
    procs.set(names[i], (await c.spawn(names[i], ["sleep", "3600"])).processId);
  }, 4);
  await c.sh("held-probe", "true");
  const idle = procStatus(pid);
  const execIdle = await execLatency(c, "held-probe", 50);
  const base = procStatus(pid);

  for (let i = 0; i < HELD; i++) {
    const name = names[i % SANDBOXES];
    const h = c.handles.get(name);
    const path = `${new URL(h.endpoint).pathname}/processes/${procs.get(name)}`;
    held.push(i % 2 === 0 ? new Held("poll", `${path}?waitMs=${WAIT_MS}`, h.headers) : new Held("stream", `${path}/stream`, h.headers));
  }
  const req0 = await requestsTotal(d);
  const tOpen = now();
  let stopOpening = false;
  await pool(HELD, async (i) => {
    if (stopOpening) return;
    await held[i].open(d.port);
    if (seen.emfile && !stopOpening) {
      stopOpening = true;
      console.log(`bench: EMFILE after ${i} connections: node's open file limit (ulimit -n ${nodeLimit}) is reached; ` +
        "node cannot raise it itself: start it from a shell with a higher `ulimit -n`. Measuring what is open.");
    }
  }, OPEN_WIDTH);
  const connectMs = now() - tOpen;
  const isOpen = (h) => h.sock && !h.broken && !h.sock.destroyed && !h.sock.connecting;
  const opened = held.filter(isOpen).length;
  // Every open request's head has reached the daemon (it counts them as
  // they come); the connections it closes meanwhile are not waited for.
  let arrived = 0;
  const tArrive = Date.now();
  while (Date.now() - tArrive < Math.min(60000, left() - 60000)) {
    arrived = (await requestsTotal(d)) - req0 - 1;
    if (arrived >= held.filter(isOpen).length) break;
    await sleep(250);
  }
  const inMs = now() - tOpen;
  const firstPollAt = Date.now();
  let peak = procStatus(pid);
  const sampler = setInterval(() => {
    try {
      const s = procStatus(pid);
      peak = { rssKiB: Math.max(peak.rssKiB, s.rssKiB), threads: Math.max(peak.threads, s.threads), fds: Math.max(peak.fds, s.fds) };
    } catch {}
  }, 500);
  const heldNow = procStatus(pid);
  const execHeld = await execLatency(c, "held-probe", 50);
  // Hold on until every poll has been answered once and asked again.
  while (Date.now() - firstPollAt < WAIT_MS + 5000 && left() > 45000) await sleep(500);
  clearInterval(sampler);
  const polls = held.filter((h) => h.kind === "poll");
  const streams = held.filter((h) => h.kind === "stream");
  const open = (xs) => xs.filter(isOpen).length;
  const answering = polls.filter((h) => !h.broken && h.polls > 0).length + streams.filter((h) => !h.broken && h.started).length;
  const atEnd = procStatus(pid);
  const openPolls = open(polls), openStreams = open(streams);
  const heldMs = Date.now() - firstPollAt;

  for (const h of held) h.close();
  await sleep(2000);
  const after = procStatus(pid);
  // How long the daemon takes to let go of what the closed requests held.
  const tClosed = Date.now();
  let settled = null;
  while (Date.now() - tClosed < Math.min(WAIT_MS + 5000, left() - 15000)) {
    if (procStatus(pid).threads <= base.threads + 2) {
      settled = Date.now() - tClosed + 2000;
      break;
    }
    await sleep(250);
  }
  const last = procStatus(pid);

  const mib = (k) => (k / 1024).toFixed(1);
  const errors = [...seen.errors].map(([k, v]) => `${k} ${v}`).join(", ") || "none";
  const bad = [...seen.badAnswers].map(([k, v]) => `${k} x${v}`).join(", ") || "none";
  rows.push(
    ["connections opened", `${opened} of ${HELD} open ${(connectMs / 1000).toFixed(1)} s on; ${arrived} heads counted by the daemon ${(inMs / 1000).toFixed(1)} s on`],
    ["open at the end (polls / streams)", `${openPolls} / ${openStreams} of ${polls.length} / ${streams.length}`],
    ["held and answering", `${answering} (polls answered and asked again, streams with their start frame)`],
    ["poll answers (200) / streams started", `${seen.answers} / ${seen.streamStarts}; other answers: ${bad}`],
    ["resets (closed by the daemon)", String(seen.resets)],
    ["socket errors (of those and of connects)", errors],
    ["daemon RSS, MiB: idle / held / peak / closed", `${mib(idle.rssKiB)} / ${mib(heldNow.rssKiB)} / ${mib(peak.rssKiB)} / ${mib(after.rssKiB)}` +
      ` (+${((peak.rssKiB - base.rssKiB) / Math.max(1, opened)).toFixed(1)} KiB a held request)`],
    ["daemon threads: idle / held / peak / closed", `${idle.threads} / ${heldNow.threads} / ${peak.threads} / ${after.threads}`],
    ["daemon open files: idle / held / peak / closed", `${idle.fds} / ${heldNow.fds} / ${peak.fds} / ${after.fds}`],
    ["exec `true`, ms p50 / p99: idle", execIdle.length ? `${pct(execIdle, 50).toFixed(1)} / ${pct(execIdle, 99).toFixed(1)} (${execIdle.length})` : "not run"],
    ["exec `true`, ms p50 / p99: held", execHeld.length ? `${pct(execHeld, 50).toFixed(1)} / ${pct(execHeld, 99).toFixed(1)} (${execHeld.length})` : "not run (out of time)"],
    ["after the close", settled === null ? `threads ${last.threads}, open files ${last.fds} ${((Date.now() - tClosed + 2000) / 1000).toFixed(0)} s on (not back to idle)`
      : `threads back to ${last.threads}, open files ${last.fds}, ${(settled / 1000).toFixed(1)} s after it`],
    ["held for", `${(heldMs / 1000).toFixed(0)} s (threads then ${atEnd.threads}, RSS ${mib(atEnd.rssKiB)} MiB)`],
  );
} catch (e) {
  failed = true;
  console.log(`bench: ${e.stack || e}`);
} finally {
  for (const h of held) h.close();
  if (rows.length) {
    const w = Math.max(...rows.map((r) => r[0].length));
    for (const [k, v] of rows) console.log(`  ${k.padEnd(w)}  ${v}`);
  }
  try {
    for (const name of [...names, "held-probe"]) await c.control("DELETE", `/v1/sandboxes/${name}`);
  } catch (e) {
    console.log(`bench: deleting the sandboxes: ${e.message}`);
  }
  // The sandboxes are gone: destroy() need not mint a token (it would
  // with a synchronous child) to find them.
  d.minted.clear();
  await d.destroy().catch((e) => {
    failed = true;
    console.log(`bench: ${e.message.split("\n")[0]}`);
  });
}
process.exit(failed ? 1 : 0);
