// Every benchmark of the project in one run, one after another on this
// machine, each with the peers it measures beside sandboxd (bwrap, runc,
// the in-sandbox floor, curl, docker where a daemon answers), so that a
// table of the project's figures can be reproduced anywhere:
//   node bench/run.mjs [--only exec,scale,...] [--quick]
// --quick passes smaller counts where a bench takes them. Figures, not
// assertions: run it on a quiet machine, and read ratios, not times.
import { spawnSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const quick = process.argv.includes("--quick");
const i = process.argv.indexOf("--only");
const only = i > 0 ? new Set(process.argv[i + 1].split(",")) : null;

// name, what it measures, its arguments (full, quick)
const benches = [
  ["exec", "cold start and warm exec beside bwrap and runc", [], ["--n", "50"]],
  ["scale", "bursts, idle sandboxes, list/restart/delete, held long polls", [], ["--idle", "50", "--polls", "300"]],
  ["held", "10,000 long polls and streams held at once: resets, daemon memory, threads", [], ["--held", "1000"]],
  ["classes", "ns and gvisor side by side", [], ["--n", "30", "--new", "5", "--idle", "2"]],
  ["processes", "spawn, poll and output", [], []],
  ["stream", "streams with backpressure", [], []],
  ["snapshot", "snapshots, forks, attach from a snapshot", [], ["--big-mib", "256"]],
  ["build", "recipe builds, cold and cached", [], []],
  ["images", "image import", [], []],
  ["timers", "idle timers at scale", [], []],
  ["sbx", "the sbx command beside curl and docker exec", [], []],
];

let failed = 0;
for (const [name, what, full, small] of benches) {
  if (only && !only.has(name)) continue;
  console.log(`\n==== ${name}: ${what}`);
  const r = spawnSync(process.execPath, [join(here, `${name}.mjs`), ...(quick ? small : full)], {
    stdio: "inherit",
    env: process.env,
  });
  if (r.status !== 0) {
    failed++;
    console.log(`==== ${name}: exit ${r.status ?? r.signal}`);
  }
}
process.exit(failed ? 1 : 0);
