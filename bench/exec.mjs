// Benchmark: start-up and exec latency of sandboxd beside bwrap and runc on
// the same rootfs, measured in one run on this machine. Prints p50/p99.
//   node bench/exec.mjs [--image debian] [--n 200]
// Figures, not assertions: this machine is shared and noisy.
import { spawnSync, execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync, rmSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import http from "node:http";
import { Daemon, Client, IMAGES } from "../tests/integration/lib/daemon.mjs";

// A lean client for the timed calls: node's http with keep-alive, so what
// is measured is the server, not fetch's machinery (bwrap and runc are
// timed through spawnSync, which has its own overhead of about a ms).
const agent = new http.Agent({ keepAlive: true, maxSockets: 4 });
function post(url, headers, body) {
  return new Promise((resolve, reject) => {
    const data = JSON.stringify(body);
    const req = http.request(url, { method: "POST", agent, headers: { ...headers, "content-type": "application/json", "content-length": Buffer.byteLength(data) } }, (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () => {
        const text = Buffer.concat(chunks).toString();
        if (res.statusCode !== 200) reject(new Error(`${url}: ${res.statusCode} ${text}`));
        else resolve(JSON.parse(text));
      });
    });
    req.on("error", reject);
    req.end(data);
  });
}
async function attachAndTrue(d, tok, name) {
  const h = await post(`${d.url}/v1/sandboxes/${name}/attach`, { authorization: `Bearer ${tok}` }, {});
  const r = await post(`${h.endpoint}/exec`, h.headers, { command: ["true"] });
  if (r.exitCode !== 0) throw new Error("true failed");
  return h;
}

const arg = (k, d) => {
  const i = process.argv.indexOf(`--${k}`);
  return i > 0 ? process.argv[i + 1] : d;
};
const image = arg("image", "debian");
const N = Number(arg("n", "200"));
const NEW = Number(arg("new", "40"));
const rootfs = join(IMAGES, image, "rootfs");

const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};
const row = (what, xs) =>
  console.log(`${what.padEnd(44)} p50 ${pct(xs, 50).toFixed(2).padStart(8)} ms   p99 ${pct(xs, 99).toFixed(2).padStart(8)} ms   (n=${xs.length})`);
const now = () => Number(process.hrtime.bigint()) / 1e6;

async function timeIt(n, fn) {
  const xs = [];
  for (let i = 0; i < n; i++) {
    const t0 = now();
    await fn(i);
    xs.push(now() - t0);
  }
  return xs;
}

const common = ["--max-per-deployment", "1000", "--log-level", "warn"];
const d = await new Daemon({ image, args: common }).start();
const c = new Client(d, "bench", "bench");
console.log(`sandboxd bench: image ${image}, rootfs ${rootfs}`);

// 1. attach of a new name plus a first `true`: with the warm pool (default
// pool_size) at a steady pace (a new conversation every 100 ms), in a burst
// (back to back, which drains the pool), and with no pool (a full start).
const attachNew = (dd, cl, prefix) => timeIt(NEW, (i) => attachAndTrue(dd, cl.tok, `${prefix}-${i}`));
const paced = []; // the pause between attaches is not timed
for (let i = 0; i < NEW; i++) {
  await new Promise((r) => setTimeout(r, 100));
  const t0 = now();
  await attachAndTrue(d, c.tok, `paced-${i}`);
  paced.push(now() - t0);
}
const burst = await attachNew(d, c, "burst");
const d0 = await new Daemon({ image, args: [...common, "--pool-size", "0"] }).start();
const c0 = new Client(d0, "bench", "bench");
const coldPaced = []; // no pool, a new conversation every 100 ms (the pause is not timed)
for (let i = 0; i < NEW; i++) {
  await new Promise((r) => setTimeout(r, 100));
  const t0 = now();
  await attachAndTrue(d0, c0.tok, `cold-paced-${i}`);
  coldPaced.push(now() - t0);
}
const cold = await attachNew(d0, c0, "cold");
await d0.destroy();
// 2. warm exec of `true`
const hw = await attachAndTrue(d, c.tok, "warm");
const warm = await timeIt(N, async () => {
  if ((await post(`${hw.endpoint}/exec`, hw.headers, { command: ["true"] })).exitCode !== 0)
    throw new Error("true failed");
});

// 3. bwrap --unshare-all on the same rootfs, cold each time
let bw = null;
if (spawnSync("bwrap", ["--version"]).status === 0) {
  bw = await timeIt(N, () => {
    const r = spawnSync("bwrap", ["--unshare-all", "--die-with-parent", "--ro-bind", rootfs, "/",
      "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--chdir", "/", "true"]);
    if (r.status !== 0) throw new Error(`bwrap: ${r.stderr}`);
  });
}

// 4. runc run on the same rootfs
let rc = null;
if (spawnSync("runc", ["--version"]).status === 0) {
  const bundle = mkdtempSync(join(tmpdir(), "sandboxd-bench-runc-"));
  execFileSync("runc", ["spec"], { cwd: bundle });
  const spec = JSON.parse(execFileSync("cat", [join(bundle, "config.json")]).toString());
  spec.root = { path: rootfs, readonly: true };
  spec.process.args = ["true"];
  spec.process.terminal = false;
  writeFileSync(join(bundle, "config.json"), JSON.stringify(spec));
  rc = await timeIt(Math.min(N, 60), (i) => {
    const r = spawnSync("runc", ["run", "-b", bundle, `sandboxd-bench-${process.pid}-${i}`]);
    if (r.status !== 0) throw new Error(`runc: ${r.stderr}`);
  });
  rmSync(bundle, { recursive: true, force: true });
}

console.log();
row("sandboxd: attach new + first `true`, paced", paced);
row("sandboxd: attach new + first `true`, burst", burst);
row("sandboxd: attach new + first `true`, no pool, paced", coldPaced);
row("sandboxd: attach new + first `true`, no pool, back to back", cold);
row("sandboxd: exec `true` in a warm sandbox", warm);
if (bw) row("bwrap --unshare-all: `true` (cold)", bw);
if (rc) row("runc run: `true` (cold)", rc);
console.log();
for (const [what, xs] of [["paced", paced], ["burst", burst], ["no pool, paced", coldPaced], ["no pool, back to back", cold]]) {
  if (bw) console.log(`attach-new+first-exec (${what}) / bwrap cold  p50 ratio ${(pct(xs, 50) / pct(bw, 50)).toFixed(2)}`);
  if (rc) console.log(`attach-new+first-exec (${what}) / runc run    p50 ratio ${(pct(xs, 50) / pct(rc, 50)).toFixed(2)}`);
}
console.log(`warm exec p50 ${pct(warm, 50).toFixed(2)} ms (target < 2 ms)`);
await d.destroy();
