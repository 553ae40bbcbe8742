// Benchmark: what sandboxd costs as it grows, in one run on this machine.
//   - a burst of concurrent new names (default pool; and with no pool);
//   - idle sandboxes (`tiny`, no network): host memory (MemAvailable) and
//     host disk each, extrapolated to --target sandboxes;
//   - list, a daemon restart (recovery until every record answers) and
//     delete of them all, per sandbox;
//   - long polls held at once by one daemon: its memory per held request,
//     and how many were served.
//   node bench/scale.mjs [--burst 50] [--idle 200] [--polls 1000] [--target 20000]
// Figures, not assertions: this machine is shared and noisy.
import { readFileSync, readdirSync, statSync, lstatSync } from "node:fs";
import { join } from "node:path";
import http from "node:http";
import { Daemon, Client, sleep, until } from "../tests/integration/lib/daemon.mjs";

const arg = (k, d) => {
  const i = process.argv.indexOf(`--${k}`);
  return i > 0 ? Number(process.argv[i + 1]) : d;
};
const BURST = arg("burst", 50);
const IDLE = arg("idle", 200);
const POLLS = arg("polls", 1000);
const TARGET = arg("target", 20000);
const now = () => performance.now();
const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];
const memAvailableKiB = () => Number(/MemAvailable:\s+(\d+)/.exec(readFileSync("/proc/meminfo", "utf8"))[1]);
const rssKiB = (pid) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))[1]);
const mib = (kib) => (kib / 1024).toFixed(1);

// Disk blocks in use beneath a dir (st_blocks: sparse files count what they hold).
function diskKiB(dir) {
  let kib = 0;
  const walk = (p) => {
    const st = lstatSync(p);
    kib += st.blocks / 2;
    if (st.isDirectory()) for (const e of readdirSync(p)) walk(join(p, e));
  };
  walk(dir);
  return kib;
}

async function pool(n, f, width) {
  let next = 0;
  const out = new Array(n);
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < n) {
      const i = next++;
      out[i] = await f(i);
    }
  }));
  return out;
}

async function burst(label, args) {
  const d = await new Daemon({ args: ["--network", "none", "--max-per-deployment", "16384", ...args] }).start();
  const c = new Client(d);
  try {
    await c.sh("warm-up", "true");
    await sleep(2000); // the pool (if any) fills
    const t0 = now();
    await Promise.all(Array.from({ length: BURST }, (_, i) => c.sh(`burst-${i}`, "true")));
    const wall = now() - t0;
    console.log(`burst of ${BURST} new names + first exec, ${label}: ${wall.toFixed(0)} ms wall (${(BURST / (wall / 1000)).toFixed(0)}/s)`);
  } finally {
    await d.destroy();
  }
}

async function idle() {
  const d = await new Daemon({ args: ["--network", "none", "--pool-size", "0", "--max-per-deployment", "16384", "--max-sandboxes", String(Math.max(IDLE + 8, 1024))] }).start();
  const c = new Client(d);
  try {
    await c.sh("first", "true");
    await sleep(1000);
    const mem0 = memAvailableKiB();
    const disk0 = diskKiB(join(d.state, "sandboxes"));
    const t0 = now();
    await pool(IDLE, (i) => c.sh(`idle-${i}`, "true"), 2);
    const createMs = now() - t0;
    await sleep(3000);
    const mem = (mem0 - memAvailableKiB()) / IDLE;
    const disk = (diskKiB(join(d.state, "sandboxes")) - disk0) / IDLE;
    console.log(`${IDLE} idle sandboxes (tiny, no network): made at ${(IDLE / (createMs / 1000)).toFixed(0)}/s, ` +
      `${mem.toFixed(0)} KiB of host memory and ${disk.toFixed(0)} KiB of host disk each`);
    console.log(`  extrapolated to ${TARGET}: ${mib(mem * TARGET)} MiB of memory, ${mib(disk * TARGET)} MiB of disk`);

    const listMs = [];
    for (let i = 0; i < 20; i++) {
      const t = now();
      const r = await c.control("GET", "/v1/sandboxes");
      if (r.status !== 200) throw new Error(`list: ${r.status}`);
      listMs.push(now() - t);
    }
    const n = IDLE + 1;
    console.log(`list of ${n}: p50 ${pct(listMs, 50).toFixed(1)} ms (${((pct(listMs, 50) * 1000) / n).toFixed(1)} µs per record)`);

    const tr = now();
    await d.restart();
    await until(async () => (await c.control("GET", `/v1/sandboxes/idle-${IDLE - 1}`)).status === 200, 60000);
    const restartMs = now() - tr;
    console.log(`restart (SIGTERM, start, every record answering): ${restartMs.toFixed(0)} ms ` +
      `(${((restartMs * 1000) / n).toFixed(0)} µs per sandbox)`);

    const td = now();
    await pool(n, (i) => c.control("DELETE", `/v1/sandboxes/${i === IDLE ? "first" : `idle-${i}`}`), 8);
    const delMs = now() - td;
    console.log(`delete of ${n}, 8 at a time: ${delMs.toFixed(0)} ms (${(delMs / n).toFixed(2)} ms per sandbox)`);
  } finally {
    await d.destroy();
  }
}

// Long polls (waitMs 30000) on a process that prints nothing, all held at
// once; then the process prints and every poll is answered.
async function polls() {
  const d = await new Daemon({ args: ["--network", "none", "--pool-size", "0",
    "--max-connections", String(POLLS + 64), "--max-connections-per-ip", String(POLLS + 64)] }).start();
  const c = new Client(d);
  try {
    const h = await c.attach("held");
    const sp = await c.data("held", "POST", "/processes", { command: ["sh", "-c", "read x; echo done"], stdin: true });
    const id = sp.body.processId;
    await sleep(500);
    const rss0 = rssKiB(d.proc.pid);
    const agent = new http.Agent({ keepAlive: false, maxSockets: Infinity });
    let answered = 0, failed = 0;
    const url = new URL(`${h.endpoint}/processes/${id}?waitMs=30000`);
    const all = Array.from({ length: POLLS }, () => new Promise((resolve) => {
      const req = http.get(url, { agent, headers: h.headers }, (res) => {
        res.resume();
        res.on("end", () => { if (res.statusCode === 200) answered++; else failed++; resolve(); });
      });
      req.on("error", () => { failed++; resolve(); });
    }));
    await sleep(Math.min(20000, 2000 + POLLS * 2));
    const rss = rssKiB(d.proc.pid);
    const threads = readdirSync(`/proc/${d.proc.pid}/task`).length;
    await c.data("held", "POST", `/processes/${id}/stdin?close=true`, Buffer.from("go\n"), true);
    await Promise.all(all);
    console.log(`${POLLS} long polls held at once: daemon RSS +${mib(rss - rss0)} MiB ` +
      `(${((rss - rss0) / POLLS).toFixed(1)} KiB each), ${threads} threads; ${answered} answered, ${failed} failed`);
  } finally {
    await d.destroy();
  }
}

console.log("sandboxd scale bench");
await burst("default pool", []);
await burst("no pool", ["--pool-size", "0"]);
await idle();
await polls();
