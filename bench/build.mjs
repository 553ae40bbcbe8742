// Benchmark: recipe builds (`sandboxd image build -f`). A recipe of eight
// steps over a 20 MiB context (two COPY, three RUN, ENV, WORKDIR) built
// cold, then again unchanged, then with its last COPY's file changed, then
// with its first COPY's files changed; beside them, in the same run, the
// RUN steps' own commands run as plain execs in one sandbox of the base
// (what the steps cost without a build around them). Figures, no
// assertions.
//   node bench/build.mjs [--image debian|tiny]
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BIN, Daemon, Client, IMAGES, HAVE_DEBIAN } from "../tests/integration/lib/daemon.mjs";

const arg = (k, d) => {
  const i = process.argv.indexOf(`--${k}`);
  return i > 0 ? process.argv[i + 1] : d;
};
const BASE = arg("image", HAVE_DEBIAN ? "debian" : "tiny");
const FILES = 200;

const images = mkdtempSync(join(tmpdir(), "sandboxd-bench-build-"));
const ctx = mkdtempSync(join(tmpdir(), "sandboxd-bench-build-ctx-"));
execFileSync("cp", ["-al", join(IMAGES, BASE), join(images, BASE)]);
mkdirSync(join(ctx, "data"));
const writeData = () => {
  for (let i = 0; i < FILES; i++) writeFileSync(join(ctx, `data/f${i}`), randomBytes(100 * 1024));
};
writeData();
writeFileSync(join(ctx, "app.txt"), "version 1\n");

const RUNS = [
  `for f in data/*; do sha256sum "$f"; done > sums`,
  "mkdir -p out && cp -r data out/ && du -s out > out.size",
  "cat app.txt sums | wc -l > final",
];
writeFileSync(join(ctx, "Recipe"), [
  `FROM ${BASE}`,
  "ENV MODE=bench",
  "WORKDIR /srv",
  "COPY data ./data/",
  `RUN ${RUNS[0]}`,
  `RUN ${RUNS[1]}`,
  "COPY app.txt ./",
  `RUN ${RUNS[2]}`,
].join("\n") + "\n");

const build = (extra = []) => {
  const t0 = performance.now();
  const r = spawnSync(BIN, ["image", "build", "bench", "-f", join(ctx, "Recipe"), "--images", images, ...extra],
    { encoding: "utf8" });
  const ms = performance.now() - t0;
  if (r.status !== 0) throw new Error(r.stderr);
  const m = r.stderr.match(/\((\d+) steps run, (\d+) cached\)/);
  return { ms, ran: Number(m[1]), cached: Number(m[2]) };
};

let d;
try {
  console.log(`base ${BASE}, context ${FILES} files of 100 KiB, 8 steps (3 RUN)`);
  const show = (label, r) =>
    console.log(`${label.padEnd(34)} ${(r.ms / 1000).toFixed(2).padStart(7)} s   (${r.ran} run, ${r.cached} cached)`);
  const cold = build();
  show("cold build", cold);
  show("rebuild, nothing changed", build());
  writeFileSync(join(ctx, "app.txt"), "version 2\n");
  show("rebuild, the last COPY changed", build());
  writeData();
  show("rebuild, the first COPY changed", build());
  show("--no-cache", build(["--no-cache"]));

  // The peer: the RUN commands as plain execs in one sandbox of the base,
  // its files put there first (as the COPY steps would).
  d = await new Daemon({ images, image: BASE, args: ["--pool-size", "0"] }).start();
  const c = new Client(d);
  const t0 = performance.now();
  await c.sh("peer", "true");
  const attachMs = performance.now() - t0;
  execFileSync("tar", ["-C", ctx, "-cf", join(ctx, "ctx.tar"), "data", "app.txt"]);
  const t1 = performance.now();
  const h = c.handles.get("peer");
  const up = await fetch(`${h.endpoint}/files?path=/srv/ctx.tar`, {
    method: "PUT", headers: h.headers, body: readFileSync(join(ctx, "ctx.tar")),
  });
  if (up.status !== 204) throw new Error(`PUT ctx.tar: ${up.status}`);
  const copyMs = performance.now() - t1;
  let runMs = 0;
  for (const cmd of ["tar -xf ctx.tar", ...RUNS]) {
    const s = performance.now();
    const r = await c.exec("peer", ["/bin/sh", "-c", cmd], { cwd: "/srv", timeoutMs: 600000 });
    runMs += performance.now() - s;
    if (r.exitCode !== 0) console.log(`  peer step failed: ${cmd}: ${r.stderr.slice(0, 200)}`);
  }
  console.log(`peer: attach + first exec ${attachMs.toFixed(0)} ms, files in ${copyMs.toFixed(0)} ms, ` +
    `the RUN commands as execs ${runMs.toFixed(0)} ms`);
  console.log(`cold build / (the same work as execs): ${(cold.ms / (attachMs + copyMs + runMs)).toFixed(2)}x`);
} finally {
  if (d) await d.destroy();
  rmSync(images, { recursive: true, force: true });
  rmSync(ctx, { recursive: true, force: true });
}
