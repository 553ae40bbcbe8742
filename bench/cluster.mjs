// Benchmark: cluster mode beside one host, measured in the same run.
// Three real sandboxd hosts on a real three-member etcd (all on loopback,
// each host reaching etcd through a relay that counts its traffic), and
// one daemon in single-host mode with the same settings.
//   node bench/cluster.mjs [--n 30] [--parallel 12]
// Prints: attach latency of a new name and of an existing one (owned by
// the host asked, and owned by another host: forwarded), placements per
// second across the three hosts, and etcd calls and bytes per attach.
import { Daemon, Client } from "../tests/integration/lib/daemon.mjs";
import { startCluster, stopCluster } from "../tests/cluster/lib/cluster.mjs";

const arg = (k, d) => {
  const i = process.argv.indexOf(`--${k}`);
  return i > 0 ? process.argv[i + 1] : d;
};
const N = Number(arg("n", "30"));
const PAR = Number(arg("parallel", "12"));
const common = ["--max-per-deployment", "0", "--network", "none", "--disk-limit", "0",
  "--pool-size", "0"];
const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];
const fmt = (xs) => `p50 ${pct(xs, 50)} ms, p90 ${pct(xs, 90)} ms`;

async function timed(c, name) {
  const t = performance.now();
  const r = await c.control("POST", `/v1/sandboxes/${name}/attach`, {});
  if (r.status !== 200) throw new Error(`${name}: ${r.status} ${JSON.stringify(r.body)}`);
  return Math.round(performance.now() - t);
}

async function series(c, names) {
  const v = [];
  for (const n of names) v.push(await timed(c, n));
  return v;
}

// count attaches of new names, PAR at once, round-robin over clients.
async function throughput(clients, prefix, count) {
  let i = 0;
  const t0 = performance.now();
  const worker = async () => {
    while (i < count) {
      const k = i++;
      await timed(clients[k % clients.length], `${prefix}${k}`);
    }
  };
  await Promise.all(Array.from({ length: PAR }, worker));
  return count / ((performance.now() - t0) / 1000);
}

const names = (p) => Array.from({ length: N }, (_, i) => `${p}${i}`);

// ---- one host ----
const single = await new Daemon({ args: common }).start();
const sc = new Client(single, "bench", "bench");
const sNew = await series(sc, names("s-"));
const sOld = await series(sc, names("s-"));
const sRate = await throughput([sc], "st-", 3 * N);
const spreadS = Array.from({ length: PAR }, (_, k) => new Client(single, `bench-${k}`, `acct-${k}`));
const sRateSpread = await throughput(spreadS, "sp-", 3 * N);
await single.destroy();

// ---- three hosts ----
const cl = await startCluster(3, { relayed: "all", args: common });
try {
  const [h1, h2] = cl.hosts;
  const c1 = new Client(h1, "bench", "bench"), c2 = new Client(h2, "bench", "bench");
  const traffic = () => cl.etcd.relays.reduce((a, r) => ({ conns: a.conns + r.conns, bytes: a.bytes + r.bytes }),
    { conns: 0, bytes: 0 });
  // Lease renewals run meanwhile: counted too, as a host pays them.
  let t = traffic();
  const cNew = await series(c1, names("c-"));
  let u = traffic();
  const perNew = { conns: (u.conns - t.conns) / N, bytes: (u.bytes - t.bytes) / N };
  t = u;
  const cOld = await series(c1, names("c-"));
  u = traffic();
  const perOld = { conns: (u.conns - t.conns) / N, bytes: (u.bytes - t.bytes) / N };
  t = u;
  const cFwd = await series(c2, names("c-")); // owned by h1, asked of h2
  u = traffic();
  const perFwd = { conns: (u.conns - t.conns) / N, bytes: (u.bytes - t.bytes) / N };
  const clients = cl.hosts.map((h) => new Client(h, "bench", "bench"));
  const cRate = await throughput(clients, "ct-", 3 * N);
  // A deployment and an account per worker: no two placements race for
  // one counter.
  const spread = Array.from({ length: PAR }, (_, k) => new Client(cl.hosts[k % 3], `bench-${k}`, `acct-${k}`));
  const cRateSpread = await throughput(spread, "cp-", 3 * N);

  console.log(`attach, new name      one host: ${fmt(sNew)}   cluster: ${fmt(cNew)}`);
  console.log(`attach, existing      one host: ${fmt(sOld)}   cluster: ${fmt(cOld)}`);
  console.log(`attach, existing on another host (forwarded)     cluster: ${fmt(cFwd)}`);
  console.log(`placements/s, ${PAR} at once, one deployment: one host ${sRate.toFixed(1)}   three hosts ${cRate.toFixed(1)}`);
  console.log(`placements/s, ${PAR} at once, ${PAR} deployments: one host ${sRateSpread.toFixed(1)}   three hosts ${cRateSpread.toFixed(1)}`);
  const tr = (x) => `${x.conns.toFixed(1)} calls, ${Math.round(x.bytes)} bytes`;
  console.log(`etcd traffic per attach: new ${tr(perNew)}; existing ${tr(perOld)}; forwarded ${tr(perFwd)}`);
} finally {
  await stopCluster(cl);
}
