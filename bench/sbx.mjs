// Benchmark: sbx, the command line, beside what it stands for, in one run
// on this machine. Figures, not assertions (the machine is shared).
//   node bench/sbx.mjs [--n 20] [--gib 1]
// - `sbx exec NAME -- true` (a new process each time: client start, spawn,
//   stream, reap) beside one `curl` of the exec route with the same
//   credential, and `docker exec` when a docker daemon answers;
// - `sbx cp` of 1,000 small files and of 1 GiB into a sandbox (and back),
//   beside `tar -c | sbx exec -i NAME -- tar -x` (and the reverse).
// Uses build/sbx next to build/sandboxd (or $SANDBOXD_BIN), the images of
// /var/lib/sandboxd/images, and a daemon of its own (default image tiny).
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, mkdirSync, writeFileSync, rmSync, openSync, writeSync, closeSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { Daemon, Client, BIN } from "../tests/integration/lib/daemon.mjs";

const arg = (k, d) => {
  const i = process.argv.indexOf(`--${k}`);
  return i > 0 ? process.argv[i + 1] : d;
};
const N = Number(arg("n", "20"));
const GIB = Number(arg("gib", "1"));
const SBX = join(dirname(BIN), "sbx");

const now = () => Number(process.hrtime.bigint()) / 1e6;
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const row = (what, ms, extra = "") => console.log(`${what.padEnd(58)} ${ms.toFixed(1).padStart(9)} ms${extra}`);

// A program run to its end, timed; its failure ends the benchmark. Never
// spawnSync: the daemon's log is read by this process's event loop, and a
// blocked loop would fill that pipe and stall the daemon.
function timed(file, args, opts = {}) {
  return new Promise((resolve, reject) => {
    const t0 = now();
    const p = spawn(file, args, { stdio: ["ignore", "ignore", "pipe"], ...opts });
    let err = "";
    p.stderr.on("data", (b) => (err += b));
    p.on("error", reject);
    p.on("close", (code) => {
      const ms = now() - t0;
      if (code !== 0) reject(new Error(`${file} ${args.join(" ")}: exit ${code} ${err}`));
      else resolve(ms);
    });
  });
}
const shell = (line, env) => timed("sh", ["-c", line], { env: { ...process.env, ...env } });

const d = await new Daemon().start();
const c = new Client(d);
const env = { ...process.env, SANDBOXD_TOKEN: c.tok };
delete env.SANDBOXD_URL;
delete env.ASTRO_AUTHZ_TOKEN;
const sbx = (args, opts = {}) => timed(SBX, args, { env, ...opts });
const work = mkdtempSync(join(tmpdir(), "sbx-bench-"));
try {
  console.log(`sbx benchmark: ${N} runs per median, daemon ${BIN}, image tiny`);
  // ---- exec
  const name = "bench-exec";
  await sbx(["exec", name, "--", "true"]); // creates it
  const xs = [];
  for (let i = 0; i < N; i++) xs.push(await sbx(["exec", name, "--", "true"]));
  row("sbx exec NAME -- true (median)", median(xs));
  const h = await c.attach(name);
  const hdr = Object.entries(h.headers).flatMap(([k, v]) => ["-H", `${k}: ${v}`]);
  const curl = ["-s", "-f", "-o", "/dev/null", "-X", "POST", ...hdr, "-H", "content-type: application/json",
    "-d", '{"command":["true"]}', `${h.endpoint}/exec`];
  await timed("curl", curl);
  const ys = [];
  for (let i = 0; i < N; i++) ys.push(await timed("curl", curl));
  row("curl POST {endpoint}/exec {command:[true]} (median)", median(ys));
  const docker = spawnSync("docker", ["info"], { encoding: "utf8", timeout: 10000 });
  if (docker.error) console.log("docker exec: not measured (docker is not installed)");
  else if (docker.status !== 0) console.log("docker exec: not measured (the docker CLI is installed, no docker daemon answers)");
  else {
    const run = spawnSync("docker", ["run", "-d", "--rm", "busybox", "sleep", "600"], { encoding: "utf8" });
    if (run.status !== 0) console.log(`docker exec: not measured (no busybox container: ${run.stderr.trim()})`);
    else {
      const id = run.stdout.trim();
      try {
        await timed("docker", ["exec", id, "true"]);
        const zs = [];
        for (let i = 0; i < N; i++) zs.push(await timed("docker", ["exec", id, "true"]));
        row("docker exec ID true (median)", median(zs));
      } finally {
        spawnSync("docker", ["rm", "-f", id]);
      }
    }
  }

  // ---- 1,000 small files, 10 directories of 100 files of 1 KiB
  const small = join(work, "small");
  for (let i = 0; i < 10; i++) {
    mkdirSync(join(small, `d${i}`), { recursive: true });
    for (let j = 0; j < 100; j++) writeFileSync(join(small, `d${i}`, `f${j}`), randomBytes(1024));
  }
  const box = "bench-cp";
  await sbx(["attach", box]);
  row("sbx cp DIR NAME:PATH, 1,000 files of 1 KiB", await sbx(["cp", small, `${box}:/workspace/small1`]));
  row("tar -c DIR | sbx exec -i NAME -- tar -x, the same", await shell(
    `tar -c -C '${small}' . | '${SBX}' exec -i ${box} -- sh -c 'mkdir -p /workspace/small2 && tar -x -C /workspace/small2'`, env));
  row("sbx cp NAME:PATH DIR, the same back", await sbx(["cp", `${box}:/workspace/small1`, join(work, "small-back1")]));
  mkdirSync(join(work, "small-back2"));
  row("sbx exec NAME -- tar -c | tar -x, the same back", await shell(
    `'${SBX}' exec ${box} -- tar -c -C /workspace/small1 . | tar -x -C '${join(work, "small-back2")}'`, env));

  // ---- 1 GiB: one file (the files API), and a directory holding it (tar)
  const bigDir = join(work, "big");
  mkdirSync(bigDir);
  const big = join(bigDir, "big.bin");
  const chunk = randomBytes(16 << 20);
  const fd = openSync(big, "w");
  for (let i = 0; i < 64 * GIB; i++) writeSync(fd, chunk);
  closeSync(fd);
  const mib = 1024 * GIB;
  const rate = (ms) => `   ${(mib / (ms / 1000)).toFixed(0).padStart(5)} MiB/s`;
  let ms = await sbx(["cp", big, `${box}:/workspace/big1.bin`]);
  row(`sbx cp FILE NAME:PATH, ${GIB} GiB (files API)`, ms, rate(ms));
  ms = await sbx(["cp", bigDir, `${box}:/workspace/bigdir`]);
  row(`sbx cp DIR NAME:PATH, a directory of ${GIB} GiB (tar stream)`, ms, rate(ms));
  ms = await shell(`tar -c -C '${bigDir}' . | '${SBX}' exec -i ${box} -- sh -c 'mkdir -p /workspace/big2 && tar -x -C /workspace/big2'`, env);
  row(`tar -c DIR | sbx exec -i NAME -- tar -x, ${GIB} GiB`, ms, rate(ms));
  rmSync(bigDir, { recursive: true, force: true });
  ms = await sbx(["cp", `${box}:/workspace/big1.bin`, join(work, "big-back.bin")]);
  row(`sbx cp NAME:PATH FILE, ${GIB} GiB back (files API)`, ms, rate(ms));
  rmSync(join(work, "big-back.bin"), { force: true });
  ms = await sbx(["cp", `${box}:/workspace/bigdir`, join(work, "bigdir-back")]);
  row(`sbx cp NAME:PATH DIR, ${GIB} GiB back (tar stream)`, ms, rate(ms));
  rmSync(join(work, "bigdir-back"), { recursive: true, force: true });
  mkdirSync(join(work, "big-back2"));
  ms = await shell(`'${SBX}' exec ${box} -- tar -c -C /workspace/big2 . | tar -x -C '${join(work, "big-back2")}'`, env);
  row(`sbx exec NAME -- tar -c | tar -x, ${GIB} GiB back`, ms, rate(ms));
} finally {
  rmSync(work, { recursive: true, force: true });
  await d.destroy();
}
