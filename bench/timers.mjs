// Benchmark: how close to their time lifecycle timers fire with many
// sandboxes. N sandboxes are attached, each touched once, then left idle;
// each one's suspension is read from the daemon's log line and compared
// with its last activity + idle_timeout.
//   node bench/timers.mjs [--n 200] [--idle 3]
import { Daemon, Client, sleep } from "../tests/integration/lib/daemon.mjs";

const arg = (k, d) => {
  const i = process.argv.indexOf(`--${k}`);
  return i > 0 ? process.argv[i + 1] : d;
};
const N = Number(arg("n", "200"));
const IDLE = Number(arg("idle", "3"));
const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];

const d = await new Daemon({
  args: ["--idle-timeout", `${IDLE}s`, "--max-per-deployment", String(N + 10), "--disk-limit", "0",
    "--network", "none", "--pool-size", "0", "--pids-limit", "64"],
}).start();
const c = new Client(d, "bench", "bench");
const last = new Map();
const t0 = Date.now();
for (let i = 0; i < N; i++) {
  await c.attach(`t-${i}`);
  await c.exec(`t-${i}`, ["true"]);
  last.set(`t-${i}`, Date.now());
}
const made = Date.now() - t0;
// Wait for every suspension line, then read them.
const deadline = Date.now() + (IDLE + 30) * 1000;
let lines = [];
while (Date.now() < deadline) {
  lines = d.log.split("\n").filter((l) => / to=suspended why=idle/.test(l));
  if (lines.length >= N) break;
  await sleep(200);
}
const late = [];
for (const l of lines) {
  const name = l.match(/name=(\S+)/)[1];
  const at = Date.parse(l.split(" ")[0]);
  late.push(at - (last.get(name) + IDLE * 1000));
}
console.log(`${N} sandboxes made in ${(made / 1000).toFixed(1)} s; ${lines.length} suspended by their idle timer`);
console.log(`timer lateness (suspension logged - (last activity + idle_timeout)): p50 ${pct(late, 50)} ms  p99 ${pct(late, 99)} ms  max ${Math.max(...late)} ms`);
await d.destroy();
