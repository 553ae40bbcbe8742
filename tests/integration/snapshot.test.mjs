// Snapshots: a sandbox's files at one moment as a new image, which new
// sandboxes start from; checksums verified, snapshots of snapshots,
// unchanged files linked not copied, a writer under load, names taken,
// removal refused while in use, nothing half-made after a kill.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BIN, Daemon, Client, IMAGES, sleep, until, GVISOR } from "./lib/daemon.mjs";

let d, c, images;
before(async () => {
  // An images dir of our own (snapshots are written there): tiny, copied.
  images = mkdtempSync(join(tmpdir(), "sandboxd-snap-images-"));
  execFileSync("cp", ["-a", join(IMAGES, "tiny"), join(images, "tiny")]);
  d = await new Daemon({ images, args: ["--pool-size", "0"] }).start();
  c = new Client(d);
});
after(async () => {
  if (d) await d.destroy();
  if (images) rmSync(images, { recursive: true, force: true });
});

const snapshot = (name, image) => c.data(name, "POST", "/snapshot", { image });
const attachFrom = async (name, image) => {
  const r = await c.control("POST", `/v1/sandboxes/${name}/attach`, { image });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  c.handles.set(name, r.body);
  return r.body;
};
// Every file's sha256 under the dirs named, sorted: what "the same files" means.
const SUMS = "cd / && find workspace etc/hostname-copy data -type f 2>/dev/null | sort | xargs sha256sum";
// Modes, owners, types, and link counts of non-directories (an overlay
// counts a merged directory's links as 1).
const META = "cd / && { find workspace data -type d -exec stat -c '%n %a %u %g %F' {} +; " +
  "find workspace data ! -type d -exec stat -c '%n %a %u %g %h %F' {} +; } 2>/dev/null | sort";

test("a snapshot is an image: new sandboxes start from its files, checksums equal", async () => {
  await c.sh("src", [
    "mkdir -p /workspace/proj/sub /data",
    "head -c 10485760 /dev/urandom > /workspace/proj/big.bin",
    "echo hello > /workspace/proj/sub/a.txt",
    "ln -s sub/a.txt /workspace/proj/link",
    "ln /workspace/proj/sub/a.txt /workspace/proj/hard",
    "chmod 0751 /workspace/proj/sub; chmod 4755 /workspace/proj/big.bin",
    "chown 1234:4321 /workspace/proj/sub/a.txt",
    // gVisor keeps a FIFO made inside the sandbox in its own kernel, not in
    // the sandbox's files on the host: it is not part of a snapshot there.
    GVISOR ? "true" : "mkfifo /workspace/proj/fifo",
    "rm /bin/false", // a file of the image, deleted
    "echo in-tmp > /tmp/not-kept",
  ].join(" && "));
  const before = await c.sh("src", SUMS);
  const meta = await c.sh("src", META);
  const r = await snapshot("src", "snap-a");
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.equal(r.body.image, "snap-a");
  assert.ok(r.body.copiedBytes >= 10485760, JSON.stringify(r.body));
  assert.ok(r.body.linkedFiles >= 3, "the image's unchanged files are linked");
  assert.ok(r.body.sizeBytes > 0 && r.body.durationMs >= 0 && Date.parse(r.body.createdAt));
  // The source runs on, its files as they were.
  assert.equal((await c.sh("src", SUMS)).stdout, before.stdout);

  await attachFrom("dst", "snap-a");
  assert.equal((await c.sh("dst", SUMS)).stdout, before.stdout);
  assert.equal((await c.sh("dst", META)).stdout, meta.stdout);
  assert.equal((await c.sh("dst", "readlink /workspace/proj/link; cat /workspace/proj/link")).stdout, "sub/a.txt\nhello\n");
  assert.equal((await c.sh("dst", "test -e /bin/false || echo gone; test -e /tmp/not-kept || echo no-tmp")).stdout, "gone\nno-tmp\n");
  // Listed like any image; both diverge from here.
  const list = await c.control("GET", "/v1/images");
  const img = list.body.images.find((i) => i.name === "snap-a");
  assert.equal(img.source, "snapshot");
  await c.sh("dst", "echo dst-only > /workspace/proj/sub/a.txt");
  assert.equal((await c.sh("src", "cat /workspace/proj/sub/a.txt")).stdout, "hello\n");
  const info = JSON.parse(readFileSync(join(images, "snap-a", "image.json"), "utf8"));
  assert.equal(info.parent, "tiny");
  // An unchanged file of the image is the image's own (a link), not a copy.
  assert.equal(statSync(join(images, "snap-a/rootfs/bin/busybox")).ino, statSync(join(images, "tiny/rootfs/bin/busybox")).ino);
});

test("snapshots of snapshots stack", async () => {
  await attachFrom("lvl1", "snap-a");
  await c.sh("lvl1", "echo level1 > /workspace/l1.txt");
  assert.equal((await snapshot("lvl1", "snap-b")).status, 200);
  await attachFrom("lvl2", "snap-b");
  const r = await c.sh("lvl2", "cat /workspace/l1.txt /workspace/proj/sub/a.txt; sha256sum /workspace/proj/big.bin | cut -c1-64");
  const src = await c.sh("src", "sha256sum /workspace/proj/big.bin | cut -c1-64");
  assert.equal(r.stdout, `level1\nhello\n${src.stdout}`);
  assert.equal(JSON.parse(readFileSync(join(images, "snap-b", "image.json"), "utf8")).parent, "snap-a");
});

test("a snapshot under load holds a consistent moment: a writer's file is a whole prefix", async () => {
  const w = await c.spawn("load", ["/bin/sh", "-c",
    "i=0; while [ $i -lt 200000 ]; do echo line-$i; i=$((i+1)); done > /workspace/log.txt"]);
  await sleep(GVISOR ? 600 : 200);
  const r = await snapshot("load", "snap-load");
  assert.equal(r.status, 200, JSON.stringify(r.body));
  await attachFrom("load-copy", "snap-load");
  // Every line whole and in order, from line-0: the moment, not a tear.
  const check = await c.sh("load-copy", "n=$(wc -l < /workspace/log.txt); tail -c 1 /workspace/log.txt | od -An -c; " +
    "awk -v n=0 '$0 != \"line-\" NR-1 { bad=1 } END { print (bad ? \"bad\" : \"ok\"), NR }' /workspace/log.txt");
  assert.match(check.stdout, /ok \d+/);
  await c.data("load", "DELETE", `/processes/${w.processId}`);
});

test("a snapshot taken while files are renamed and rewritten holds one moment across files", async () => {
  // Three directories of 40 MiB each, and a counter in each written in
  // turn (d1, d2, d3) with a rename: at any moment d1 >= d2 >= d3 >= d1 - 1.
  // The files are read one after the other while the sandbox runs, so only
  // a frozen second look at what changed meanwhile gives one moment.
  await c.sh("renamer", "for d in d1 d2 d3; do mkdir -p /workspace/r/$d; i=0; " +
    "while [ $i -lt 40 ]; do head -c 1048576 /dev/urandom > /workspace/r/$d/f$i; i=$((i+1)); done; done",
  { timeoutMs: 120000 });
  const w = await c.spawn("renamer", ["/bin/sh", "-c",
    "cd /workspace/r && i=0; while [ $i -lt 1000000 ]; do for d in d1 d2 d3; do " +
    "echo $i > $d/new; mv $d/new $d/c; done; i=$((i+1)); done"]);
  await sleep(GVISOR ? 800 : 300);
  // The copy runs while the sandbox does: a call to it meanwhile is served
  // before the snapshot is done (only the second, frozen pass holds calls).
  let done = false;
  const pending = snapshot("renamer", "snap-renamer").then((x) => { done = true; return x; });
  await sleep(30);
  const during = await c.sh("renamer", "echo during");
  assert.equal(during.stdout, "during\n");
  assert.equal(done, false, "a call to the sandbox waited for the whole snapshot");
  const r = await pending;
  assert.equal(r.status, 200, JSON.stringify(r.body));
  await attachFrom("renamer-copy", "snap-renamer");
  const got = (await c.sh("renamer-copy", "cd /workspace/r && echo $(cat d1/c) $(cat d2/c) $(cat d3/c)")).stdout;
  const [c1, c2, c3] = got.trim().split(" ").map(Number);
  assert.ok(c1 > 0, `the writer had started: ${got}`);
  assert.ok(c1 >= c2 && c2 >= c3 && c3 >= c1 - 1, `${got.trim()}: not one moment`);
  await c.data("renamer", "DELETE", `/processes/${w.processId}`);
});

test("a name that is taken, a bad name, a missing body are refused", async () => {
  const taken = await snapshot("src", "snap-a");
  assert.equal(taken.status, 409);
  assert.equal(taken.body.error.code, "already_exists");
  const tiny = await snapshot("src", "tiny");
  assert.equal(tiny.status, 409);
  for (const bad of ["../x", "Snap", "", 5]) {
    const r = await snapshot("src", bad);
    assert.equal(r.status, 400, JSON.stringify(bad));
  }
  const none = await c.data("src", "POST", "/snapshot");
  assert.equal(none.status, 400);
  assert.deepEqual(readdirSync(images).filter((n) => n.startsWith(".")), []);
});

test("image rm refuses a snapshot that a sandbox uses", async () => {
  const r = spawnSync(BIN, ["image", "rm", "snap-a", "--images", images, "--state", d.state]);
  assert.equal(r.status, 1);
  assert.match(r.stderr.toString(), /in use by \d+ sandbox/);
  assert.ok(existsSync(join(images, "snap-a", "image.json")));
});

test("a daemon killed during a snapshot leaves nothing half-made; the name is free after", async () => {
  const dd = await new Daemon({ images, args: ["--pool-size", "0"] }).start();
  try {
    const cc = new Client(dd);
    await cc.sh("big", "head -c 209715200 /dev/zero > /workspace/big.bin");
    const pending = cc.data("big", "POST", "/snapshot", { image: "snap-killed" }).catch(() => null);
    for (let i = 0; i < 200 && !readdirSync(images).some((n) => n.startsWith(".build-snap-killed")); i++) await sleep(10);
    await dd.restart("SIGKILL");
    await pending;
    // A listing sweeps what the dead daemon left.
    const list = execFileSync(BIN, ["image", "list", "--images", images]).toString();
    assert.doesNotMatch(list, /snap-killed/);
    assert.deepEqual(readdirSync(images).filter((n) => n.startsWith(".")), []);
    const again = await cc.data("big", "POST", "/snapshot", { image: "snap-killed" });
    assert.equal(again.status, 200, JSON.stringify(again.body));
  } finally {
    await dd.destroy();
  }
});

test("a fork without a checkpoint (ns) starts from the files at this moment; both diverge; its image goes with it", { skip: GVISOR && "gvisor forks from checkpoints (checkpoint.test.mjs)" }, async () => {
  await c.sh("parent", "mkdir -p /workspace/w && head -c 1048576 /dev/urandom > /workspace/w/blob && echo parent > /workspace/w/who");
  const sum = (await c.sh("parent", "sha256sum /workspace/w/blob")).stdout;
  const f = await c.data("parent", "POST", "/fork", { name: "child" });
  assert.equal(f.status, 200, JSON.stringify(f.body));
  assert.equal(f.body.name, "child");
  assert.match(f.body.image, /^fork-[0-9a-f]{16}$/);
  c.handles.set("child", f.body);
  assert.equal((await c.sh("child", "sha256sum /workspace/w/blob")).stdout, sum);
  await c.sh("child", "echo child > /workspace/w/who");
  await c.sh("parent", "echo parent-2 > /workspace/w/who");
  assert.equal((await c.sh("child", "cat /workspace/w/who")).stdout, "child\n");
  assert.equal((await c.sh("parent", "cat /workspace/w/who")).stdout, "parent-2\n");
  // The name taken: 409, and no image left behind for it.
  const before = readdirSync(images).filter((n) => n.startsWith("fork-")).length;
  const again = await c.data("parent", "POST", "/fork", { name: "child" });
  assert.equal(again.status, 409);
  assert.equal(again.body.error.code, "already_exists");
  assert.equal(readdirSync(images).filter((n) => n.startsWith("fork-")).length, before);
  // The fork's image goes when the fork does.
  assert.ok(existsSync(join(images, f.body.image)));
  assert.equal((await c.control("DELETE", "/v1/sandboxes/child")).status, 204);
  assert.ok(!existsSync(join(images, f.body.image)));
});

test("a sandbox taken from the warm pool forks too (its network is the default's)", { skip: GVISOR && "gvisor forks from checkpoints (checkpoint.test.mjs)" }, async () => {
  const pd = await new Daemon({ images, args: ["--pool-size", "2"] }).start();
  try {
    const pc = new Client(pd);
    await pc.attach("first");
    await pc.sh("pooled", "echo from-the-pool > /workspace/mark");
    await pc.attach("third");
    const f = await pc.data("pooled", "POST", "/fork", { name: "pooled-fork" });
    assert.equal(f.status, 200, JSON.stringify(f.body));
    pc.handles.set("pooled-fork", f.body);
    assert.equal((await pc.sh("pooled-fork", "cat /workspace/mark")).stdout, "from-the-pool\n");
    const g = await pc.control("GET", "/v1/sandboxes/pooled-fork");
    assert.equal(g.body.network, "nat");
    assert.equal((await pc.control("GET", "/v1/sandboxes/pooled")).body.network, "nat");
  } finally {
    await pd.destroy();
  }
});
