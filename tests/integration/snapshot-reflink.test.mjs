// A snapshot shares blocks where the filesystem can: on XFS with reflink
// (a loop-mounted image the test makes and mounts), with the sandbox's
// writable layer a plain directory on it (disk_limit 0) beside the images
// dir, a file the sandbox wrote is not copied: the snapshot's copy shares
// every extent with the sandbox's own (fiemap's "shared" flag), and an
// attach from the snapshot reads the same bytes.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, mkdirSync, rmSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Daemon, Client, IMAGES } from "./lib/daemon.mjs";

const sh = (cmd) => execFileSync("sh", ["-c", cmd]).toString();
const top = mkdtempSync(join(tmpdir(), "sbx-xfs-"));
const img = join(top, "fs.img");
const mnt = join(top, "m");
let mounted = false;
let d;

after(async () => {
  if (d) await d.destroy();
  if (mounted) sh(`umount '${mnt}'`);
  rmSync(top, { recursive: true, force: true });
});

// FIEMAP_EXTENT_SHARED (0x2000) on every extent of a file, and how many.
function extents(path) {
  const out = sh(`xfs_io -r -c 'fiemap -v' '${path}'`);
  const flags = [...out.matchAll(/^\s*\d+: \[\d+\.\.\d+\]:\s+\d+\.\.\d+\s+\d+\s+(0x[0-9a-f]+)/gm)].map((m) => parseInt(m[1], 16));
  return { n: flags.length, shared: flags.filter((f) => f & 0x2000).length };
}

test("a snapshot on XFS shares the blocks of what the sandbox wrote, and reads back the same", async () => {
  sh(`truncate -s 2G '${img}' && mkfs.xfs -q -m reflink=1 '${img}'`);
  mkdirSync(mnt);
  sh(`mount -o loop '${img}' '${mnt}'`);
  mounted = true;
  mkdirSync(join(mnt, "images"));
  sh(`cp -a '${join(IMAGES, "tiny")}' '${join(mnt, "images/tiny")}'`);
  d = await new Daemon({
    state: join(mnt, "state"), images: join(mnt, "images"),
    args: ["--network", "none", "--pool-size", "0", "--disk-limit", "0"],
  }).start();
  const c = new Client(d);
  const w = await c.sh("src", "head -c 67108864 /dev/urandom > /workspace/big && sync && sha256sum /workspace/big");
  assert.equal(w.exitCode, 0, w.stderr);
  const sum = w.stdout.split(" ")[0];
  const r = await c.data("src", "POST", "/snapshot", { image: "snap" });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  const copy = join(mnt, "images/snap/rootfs/workspace/big");
  assert.ok(existsSync(copy), "the snapshot holds the file");
  const e = extents(copy);
  assert.ok(e.n > 0, "the copy has extents");
  assert.equal(e.shared, e.n, `every extent of the copy is shared (${e.shared} of ${e.n})`);

  // The sandbox goes on writing its own file: the snapshot keeps its bytes.
  assert.equal((await c.sh("src", "head -c 4096 /dev/zero | dd of=/workspace/big conv=notrunc 2>/dev/null; sha256sum /workspace/big")).stdout.split(" ")[0] === sum, false);
  const h = await c.control("POST", "/v1/sandboxes/from-snap/attach", { image: "snap" });
  assert.equal(h.status, 200, JSON.stringify(h.body));
  assert.equal((await c.sh("from-snap", "sha256sum /workspace/big")).stdout.split(" ")[0], sum);
});
