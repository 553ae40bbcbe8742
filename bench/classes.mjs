// Benchmark: the two sandbox classes side by side, in one run on this
// machine: `ns` (namespaces, the host's kernel) and `gvisor` (gVisor's
// user-space kernel per sandbox). Per class: attach of a new name plus a
// first `true` (no pool, and pooled at a steady pace), warm exec of `true`,
// python start, memory per idle sandbox (PSS of every process of its
// cgroup), a 100 MiB file written and read back, and where the class can,
// checkpoint, restore and fork.
//   node bench/classes.mjs [--image debian] [--n 100] [--new 10] [--idle 5]
// Figures, not assertions: this machine is shared and noisy.
import { readFileSync, readdirSync, existsSync } from "node:fs";
import { join } from "node:path";
import http from "node:http";
import { Daemon, Client, IMAGES } from "../tests/integration/lib/daemon.mjs";

const arg = (k, d) => {
  const i = process.argv.indexOf(`--${k}`);
  return i > 0 ? process.argv[i + 1] : d;
};
const image = arg("image", existsSync(join(IMAGES, "debian/image.json")) ? "debian" : "tiny");
const N = Number(arg("n", "100"));
const NEW = Number(arg("new", "10"));
const IDLE = Number(arg("idle", "5"));
const MIB = 100;
const classes = (arg("classes", "ns,gvisor")).split(",");

const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];
const now = () => Number(process.hrtime.bigint()) / 1e6;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// node's http with keep-alive: what is timed is the server.
const agent = new http.Agent({ keepAlive: true, maxSockets: 4 });
function request(url, method, headers, body) {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : Buffer.isBuffer(body) ? body : Buffer.from(JSON.stringify(body));
    const h = { ...headers };
    if (data) {
      h["content-length"] = data.length;
      if (!Buffer.isBuffer(body) || !h["content-type"]) h["content-type"] = h["content-type"] || "application/json";
    }
    const req = http.request(url, { method, agent, headers: h }, (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () => {
        const buf = Buffer.concat(chunks);
        if (res.statusCode >= 300) reject(new Error(`${method} ${url}: ${res.statusCode} ${buf}`));
        else resolve(buf);
      });
    });
    req.on("error", reject);
    req.end(data);
  });
}
const post = async (url, headers, body) => JSON.parse((await request(url, "POST", headers, body)).toString());

async function attach(d, tok, name, cls) {
  return post(`${d.url}/v1/sandboxes/${name}/attach`, { authorization: `Bearer ${tok}` }, { class: cls });
}
async function exec(h, command) {
  const r = await post(`${h.endpoint}/exec`, h.headers, { command });
  if (r.exitCode !== 0) throw new Error(`${command.join(" ")}: exit ${r.exitCode} ${r.stderr}`);
  return r;
}

// PSS of every process of the daemon's sandboxes, by cgroup (sb-<id>).
function sandboxPss(d) {
  const inst = readFileSync(join(d.state, "instance-id"), "utf8").trim();
  for (const h of ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"]) {
    const dir = join(h, "sandboxd", inst);
    if (!existsSync(dir)) continue;
    const out = new Map();
    for (const sb of readdirSync(dir).filter((n) => n.startsWith("sb-"))) {
      let kb = 0;
      const procs = readFileSync(join(dir, sb, "cgroup.procs"), "utf8").split("\n").filter(Boolean);
      for (const pid of procs) {
        try {
          const m = /^Pss:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, "utf8"));
          if (m) kb += Number(m[1]);
        } catch {}
      }
      out.set(sb, kb);
    }
    return out;
  }
  return new Map();
}

const common = ["--max-per-deployment", "1000", "--log-level", "warn", "--memory-limit", "1G"];
const results = {};
for (const cls of classes) {
  const r = (results[cls] = {});
  // 1. no pool: a full start
  const d0 = await new Daemon({ image, args: [...common, "--pool-size", "0", "--gvisor-pool-size", "0"] }).start();
  const c0 = new Client(d0, "bench", "bench");
  r.cold = [];
  for (let i = 0; i < NEW; i++) {
    const t0 = now();
    await exec(await attach(d0, c0.tok, `cold-${i}`, cls), ["true"]);
    r.cold.push(now() - t0);
  }
  // 2. idle memory, after the starts settled
  const idle = [];
  for (let i = 0; i < IDLE; i++) idle.push(await attach(d0, c0.tok, `idle-${i}`, cls));
  for (const h of idle) await exec(h, ["true"]);
  await sleep(2000);
  const pss = [...sandboxPss(d0).values()];
  r.pss = pss.length ? pss.reduce((a, b) => a + b, 0) / pss.length / 1024 : NaN;
  // 3. warm exec, python, files
  const h = idle[0];
  await exec(h, ["true"]);
  r.warm = [];
  for (let i = 0; i < N; i++) {
    const t0 = now();
    await exec(h, ["true"]);
    r.warm.push(now() - t0);
  }
  if (image === "debian") {
    r.python = [];
    for (let i = 0; i < Math.min(N, 20); i++) {
      const t0 = now();
      await exec(h, ["python3", "-c", "pass"]);
      r.python.push(now() - t0);
    }
  }
  const blob = Buffer.alloc(MIB << 20, 7);
  const q = `?path=${encodeURIComponent("/workspace/blob")}`;
  r.put = [];
  r.get = [];
  for (let i = 0; i < 3; i++) {
    let t0 = now();
    await request(`${h.endpoint}/files${q}`, "PUT", { ...h.headers, "content-type": "application/octet-stream" }, blob);
    r.put.push(now() - t0);
    t0 = now();
    const back = await request(`${h.endpoint}/files${q}`, "GET", h.headers);
    r.get.push(now() - t0);
    if (back.length !== blob.length) throw new Error("file round trip lost bytes");
  }
  // 4. checkpoints (where the class can), of an idle sandbox holding only
  // the image: keep running, stop + restore, fork
  const hc = idle[1];
  const ck = await request(`${hc.endpoint}/checkpoint`, "POST", hc.headers, {}).then(() => true, () => false);
  if (ck) {
    r.ckpt = [];
    r.restore = [];
    r.fork = [];
    for (let i = 0; i < 5; i++) {
      let t0 = now();
      const info = JSON.parse((await request(`${hc.endpoint}/checkpoint`, "POST", hc.headers, {})).toString());
      r.ckpt.push(now() - t0);
      r.ckptBytes = info.sizeBytes;
      await request(`${hc.endpoint}/checkpoint`, "POST", hc.headers, { keepRunning: false });
      t0 = now();
      await exec(hc, ["true"]); // restores it
      r.restore.push(now() - t0);
      t0 = now();
      const f = await post(`${hc.endpoint}/fork`, hc.headers, { name: `fork-${i}` });
      await exec(f, ["true"]);
      r.fork.push(now() - t0);
    }
  }
  await d0.destroy();
  // 5. pooled, at a steady pace (a new conversation every 200 ms)
  const pool = cls === "gvisor" ? ["--pool-size", "0", "--gvisor-pool-size", "4"] : ["--pool-size", "4", "--gvisor-pool-size", "0"];
  const d1 = await new Daemon({ image, args: [...common, ...pool] }).start();
  const c1 = new Client(d1, "bench", "bench");
  await sleep(cls === "gvisor" ? 3000 : 1000); // the pool fills
  r.pooled = [];
  for (let i = 0; i < NEW; i++) {
    await sleep(cls === "gvisor" ? 600 : 200);
    const t0 = now();
    await exec(await attach(d1, c1.tok, `pooled-${i}`, cls), ["true"]);
    r.pooled.push(now() - t0);
  }
  await d1.destroy();
}

const f = (x) => (x === undefined || Number.isNaN(x) ? "-" : x.toFixed(2));
const p50 = (xs) => (xs ? pct(xs, 50) : undefined);
console.log(`\nsandboxd classes bench: image ${image}; p50 (p99) in ms, n per row as given`);
const rows = [
  ["attach new + first `true`, no pool", "cold"],
  ["attach new + first `true`, pooled (paced)", "pooled"],
  ["exec `true`, warm", "warm"],
  ["exec `python3 -c pass`, warm", "python"],
  [`PUT ${MIB} MiB file`, "put"],
  [`GET ${MIB} MiB file`, "get"],
  ["checkpoint, keep running", "ckpt"],
  ["restore (first exec after a stopping checkpoint)", "restore"],
  ["fork + its first `true`", "fork"],
];
console.log(`${"".padEnd(44)}${classes.map((c) => c.padStart(22)).join("")}`);
for (const [what, k] of rows) {
  const cells = classes.map((c) => {
    const xs = results[c][k];
    return (xs ? `${f(pct(xs, 50))} (${f(pct(xs, 99))})` : "-").padStart(22);
  });
  console.log(`${what.padEnd(44)}${cells.join("")}`);
}
console.log(`${"checkpoint size, MiB".padEnd(44)}${classes.map((c) => (results[c].ckptBytes ? f(results[c].ckptBytes / 1048576) : "-").padStart(22)).join("")}`);
console.log(`${"memory per idle sandbox, PSS MiB".padEnd(44)}${classes.map((c) => f(results[c].pss).padStart(22)).join("")}`);
if (results.ns && results.gvisor) {
  const ratio = (k) => f(p50(results.gvisor[k]) / p50(results.ns[k]));
  console.log(`\ngvisor / ns, p50: warm exec ${ratio("warm")}x (target <= 5x), no-pool attach ${ratio("cold")}x, pooled attach ${ratio("pooled")}x`);
  console.log(`gvisor pooled attach + first exec p50 ${f(p50(results.gvisor.pooled))} ms (target < 10 ms); idle PSS ${f(results.gvisor.pss)} MiB (target <= 32)`);
}
