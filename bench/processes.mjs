// Benchmark: background processes. Spawn-to-first-output latency (spawn,
// then one long poll that returns with the first byte) and poll throughput
// (MiB/s of output moved through GET .../processes/{id} from a process
// writing as fast as it can), beside the same output read by exec.
//   node bench/processes.mjs [--image tiny] [--n 100] [--mib 256]
import { Daemon, Client } from "../tests/integration/lib/daemon.mjs";

const arg = (k, d) => {
  const i = process.argv.indexOf(`--${k}`);
  return i > 0 ? process.argv[i + 1] : d;
};
const N = Number(arg("n", "100"));
const MIB = Number(arg("mib", "256"));
const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];
const now = () => Number(process.hrtime.bigint()) / 1e6;

const d = await new Daemon({ image: arg("image", "tiny"), args: ["--log-level", "warn"] }).start();
const c = new Client(d, "bench", "bench");
await c.attach("procs");

// 1. spawn -> first output
const lat = [];
for (let i = 0; i < N; i++) {
  const t0 = now();
  const p = (await c.data("procs", "POST", "/processes", { command: ["echo", "hi"] })).body;
  let ch;
  do ch = (await c.data("procs", "GET", `/processes/${p.processId}?waitMs=5000`)).body;
  while (ch.stdout === "" && ch.state === "running");
  lat.push(now() - t0);
  await c.data("procs", "DELETE", `/processes/${p.processId}`);
}

// 2. poll throughput: the writer never waits for the reader, so a reader
// that keeps up reads everything; report what was read and what dropped.
const p = (await c.data("procs", "POST", "/processes", {
  command: ["/bin/sh", "-c", `head -c ${MIB << 20} /dev/zero | tr '\\0' x`],
})).body;
let from = 0, dropped = 0, read = 0;
const t0 = now();
for (;;) {
  const ch = (await c.data("procs", "GET", `/processes/${p.processId}?stdoutFrom=${from}&waitMs=1000`)).body;
  read += ch.stdout.length;
  dropped += ch.stdoutDropped;
  from = ch.stdoutNext;
  if (ch.state === "exited" && ch.stdout === "") break;
}
const secs = (now() - t0) / 1000;

console.log(`spawn -> first output        p50 ${pct(lat, 50).toFixed(2)} ms   p99 ${pct(lat, 99).toFixed(2)} ms   (n=${N})`);
console.log(`poll throughput              ${(read / 1048576 / secs).toFixed(1)} MiB/s read (${(read / 1048576).toFixed(0)} MiB in ${secs.toFixed(2)} s, ${(dropped / 1048576).toFixed(1)} MiB dropped of ${MIB} MiB written)`);
await d.destroy();
