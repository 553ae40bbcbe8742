// Benchmark: snapshots and files forks of sandboxes holding 10 MiB and
// 1 GiB of new files, and the attach (with its first exec) of a sandbox
// made from a snapshot beside one made from the base image. Figures, no
// assertions; the class is the daemons' default (SANDBOXD_TEST_CLASS=gvisor
// for gvisor). With --xfs the daemon's state and images dirs are on an XFS
// filesystem with reflink (a loop-mounted image the bench makes) and the
// sandboxes have no disk cap: their writable layers sit beside the images,
// and a snapshot shares the blocks of what they wrote instead of copying.
//   node bench/snapshot.mjs [--image tiny] [--big-mib 1024] [--xfs]
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Daemon, Client, IMAGES, CLASS } from "../tests/integration/lib/daemon.mjs";

const arg = (k, d) => {
  const i = process.argv.indexOf(`--${k}`);
  return i > 0 ? process.argv[i + 1] : d;
};
const IMAGE = arg("image", "tiny");
const BIG = Number(arg("big-mib", "1024"));

const XFS = process.argv.includes("--xfs");
const top = mkdtempSync(join(tmpdir(), "sandboxd-bench-snap-"));
let images = top;
const opts = { image: IMAGE, args: ["--pool-size", "0"] };
if (XFS) {
  const fs = join(top, "fs");
  execFileSync("sh", ["-c", `truncate -s ${BIG * 3 + 2048}M '${top}/xfs.img' && mkfs.xfs -q -m reflink=1 '${top}/xfs.img' && ` +
    `mkdir '${fs}' && mount -o loop '${top}/xfs.img' '${fs}' && mkdir '${fs}/images'`]);
  images = join(fs, "images");
  opts.state = join(fs, "state");
  opts.args.push("--disk-limit", "0");
}
execFileSync("cp", [XFS ? "-a" : "-al", join(IMAGES, IMAGE), join(images, IMAGE)]);
const d = await new Daemon({ images, ...opts }).start();
const c = new Client(d);
const ms = async (f) => {
  const t0 = performance.now();
  const r = await f();
  return [performance.now() - t0, r];
};
const median = (v) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];
try {
  console.log(`class ${CLASS}, image ${IMAGE}, ${XFS ? "XFS with reflink, no disk cap" : "the host's filesystem, disk cap"}`);
  for (const [label, mib] of [["10 MiB", 10], [`${BIG} MiB`, BIG]]) {
    const src = `src-${mib}`;
    const w = await c.sh(src, `mkdir -p /workspace/d && i=0; while [ $i -lt ${Math.max(1, Math.round(mib / 10))} ]; do ` +
      `head -c ${Math.min(mib, 10) << 20} /dev/urandom > /workspace/d/f$i || exit 1; i=$((i+1)); done; du -sm /workspace/d`,
    { timeoutMs: 600000 });
    if (w.exitCode !== 0) throw new Error(`writing ${label}: ${w.stderr}`);
    const [snapMs, snap] = await ms(() => c.data(src, "POST", "/snapshot", { image: `snap-${mib}` }));
    if (snap.status !== 200) throw new Error(JSON.stringify(snap.body));
    const b = snap.body;
    console.log(`${label.padEnd(10)} snapshot ${snapMs.toFixed(0)} ms (frozen ${b.durationMs} ms), ` +
      `copied ${(b.copiedBytes / 1048576).toFixed(0)} MiB, linked ${b.linkedFiles} files`);
    const [forkMs, fork] = await ms(() => c.data(src, "POST", "/fork", { name: `fork-${mib}` }));
    if (fork.status !== 200) {
      console.log(`${label.padEnd(10)} fork: ${fork.status} ${fork.body?.error?.code}`);
    } else {
      c.handles.set(`fork-${mib}`, fork.body);
      const [firstMs] = await ms(() => c.sh(`fork-${mib}`, "true"));
      console.log(`${label.padEnd(10)} fork ${forkMs.toFixed(0)} ms, its first exec ${firstMs.toFixed(0)} ms`);
    }
  }
  // Attach (a new name) + first exec, from the base image and from a snapshot.
  for (const [label, image] of [[`from ${IMAGE}`, IMAGE], ["from a snapshot", "snap-10"]]) {
    const times = [];
    for (let i = 0; i < 5; i++) {
      const name = `a-${image}-${i}`;
      const [t] = await ms(async () => {
        const r = await c.control("POST", `/v1/sandboxes/${name}/attach`, { image });
        if (r.status !== 200) throw new Error(JSON.stringify(r.body));
        c.handles.set(name, r.body);
        await c.sh(name, "true");
      });
      times.push(t);
      await c.control("DELETE", `/v1/sandboxes/${name}`);
    }
    console.log(`attach + first exec ${label}: p50 ${median(times).toFixed(1)} ms`);
  }
} finally {
  await d.destroy();
  if (XFS) execFileSync("umount", [join(top, "fs")]);
  rmSync(top, { recursive: true, force: true });
}
