// Sandbox disks. A sandbox's capped writable layer is an ext4 image, and
// images of the sizes in use are made ahead of the starts that take them
// (<state>/sandboxes/.disk-spare-<driver>, one dir per driver). A new
// sandbox takes a spare (the very file), the spares are topped up again,
// a spare never carries one sandbox's files into another, spares of a
// size no longer in use go, and a copy cut short by a crash is never
// taken. A delete renames the dir away and a reaper removes it
// (.trash-<driver>).
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, statSync, existsSync, writeFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { Daemon, Client, GVISOR, until } from "./lib/daemon.mjs";

const MIB = 1 << 20;
const GIB = 1024 * MIB;
const args = (limit) => ["--network", "none", "--pool-size", "0", "--disk-limit", limit];
const d = new Daemon({ args: args("10G") });
after(() => d.destroy());

const sandboxes = () => join(d.state, "sandboxes");
// Each driver's spares are its own (.disk-spare-<driver>).
const spareDir = () => join(sandboxes(), GVISOR ? ".disk-spare-gvisor" : ".disk-spare-ns");
const otherSpareDir = () => join(sandboxes(), GVISOR ? ".disk-spare-ns" : ".disk-spare-gvisor");
const spares = (bytes) =>
  existsSync(spareDir()) ? readdirSync(spareDir()).filter((n) => n.startsWith(`${bytes}-`) && n.endsWith(".img")) : [];
const inode = (p) => statSync(p).ino;
const dirs = () => new Set(readdirSync(sandboxes()).filter((n) => !n.startsWith(".")));

// Attach a new name; the sandbox dir it was given.
async function attachNew(c, name) {
  const before = dirs();
  await c.sh(name, "true");
  const made = [...dirs()].filter((n) => !before.has(n));
  assert.equal(made.length, 1, `one new sandbox dir for ${name}`);
  return join(sandboxes(), made[0]);
}

test("a new sandbox takes a spare image, spares are topped up, none carries another's files", async () => {
  await d.start();
  // A leftover of a copy cut short (the daemon killed mid-copy).
  mkdirSync(spareDir(), { recursive: true, mode: 0o700 });
  writeFileSync(join(spareDir(), ".copy.tmp"), "half");
  const c = new Client(d);
  const first = await attachNew(c, "first");
  assert.ok(existsSync(join(first, "disk.img")), "a capped sandbox has its disk image");
  // The first start of a size has the spares of that size made.
  await until(() => spares(10 * GIB).length === 4);
  assert.ok(!existsSync(join(spareDir(), ".copy.tmp")), "the cut-short copy was removed");
  assert.ok(!existsSync(otherSpareDir()), "the other driver, which started nothing, made no spares");
  const ready = new Map(spares(10 * GIB).map((n) => [inode(join(spareDir(), n)), n]));

  await c.sh("first", "echo secret > /workspace/mine && sync");
  const second = await attachNew(c, "second");
  const ino = inode(join(second, "disk.img"));
  assert.ok(ready.has(ino), "the second sandbox's disk is one of the spares, renamed");
  assert.ok(!existsSync(join(spareDir(), ready.get(ino))), "the spare it took is gone from the spares");
  await until(() => spares(10 * GIB).length === 4);
  assert.equal((await c.sh("second", "ls -A /workspace")).stdout, "", "a spare holds no files");
  // Sparse, and small: an idle sandbox's disk costs the host what its
  // filesystem's metadata holds (no resize inode's reserved blocks).
  const used = statSync(join(second, "disk.img")).blocks * 512;
  assert.ok(used < 2 * MIB, `a fresh sandbox's disk image holds ${used} bytes of the host's disk`);
  if (!GVISOR) {
    const kib = Number((await c.sh("second", "df -k / | tail -1 | awk '{print $2}'")).stdout.trim());
    assert.ok(kib > 9 * 1024 * 1024 && kib <= 10 * 1024 * 1024, `the spare has the capped size (${kib} KiB)`);
  }
  assert.equal((await c.sh("first", "cat /workspace/mine")).stdout, "secret\n");
  assert.equal((await c.sh("second", "echo two > /workspace/f && cat /workspace/f")).stdout, "two\n");

  // A burst of new names: each gets a disk of its own, spare or not.
  const names = ["b1", "b2", "b3", "b4", "b5", "b6"];
  await Promise.all(names.map((n) => c.sh(n, `echo ${n} > /workspace/who`)));
  for (const n of names) assert.equal((await c.sh(n, "cat /workspace/who")).stdout, `${n}\n`);
  const imgs = readdirSync(sandboxes()).filter((n) => !n.startsWith("."))
    .map((n) => join(sandboxes(), n, "disk.img")).filter(existsSync).map(inode);
  assert.equal(new Set(imgs).size, imgs.length, "no two sandboxes share a disk image");
});

test("after a restart with another disk limit, spares of the old size go; old sandboxes keep theirs", async () => {
  await d.stop();
  d.opts.args = args("12G");
  await d.start();
  const c = new Client(d);
  await attachNew(c, "third");
  await until(() => spares(12 * GIB).length === 4 && spares(10 * GIB).length === 0);
  assert.equal((await c.sh("first", "cat /workspace/mine")).stdout, "secret\n", "an old sandbox keeps its image");
});

test("a delete takes the sandbox's dir away at once and its files go after; leftovers of a stopped daemon go too", async () => {
  const c = new Client(d);
  const dir = await attachNew(c, "doomed");
  await c.sh("doomed", "head -c 8388608 /dev/urandom > /workspace/data && sync");
  const trash = join(sandboxes(), GVISOR ? ".trash-gvisor" : ".trash-ns");
  assert.equal((await c.control("DELETE", "/v1/sandboxes/doomed")).status, 204);
  assert.ok(!existsSync(dir), "the sandbox's dir is gone from its place when the delete answers");
  await until(() => existsSync(trash) && readdirSync(trash).length === 0);
  // A leftover (a daemon stopped before its reaper was done) goes with the next delete.
  mkdirSync(join(trash, "7.leftover/a/b"), { recursive: true });
  writeFileSync(join(trash, "7.leftover/a/b/f"), "x");
  await attachNew(c, "next");
  assert.equal((await c.control("DELETE", "/v1/sandboxes/next")).status, 204);
  await until(() => readdirSync(trash).length === 0);
});
