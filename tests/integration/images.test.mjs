// sandboxd image import: OCI layouts (a dir, a tar of one) and
// docker-archives written here, imported, then used by a sandbox; hostile
// archives refused with nothing left behind; a SIGKILL mid-import.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import {
  mkdtempSync, rmSync, writeFileSync, readFileSync, readdirSync, lstatSync, readlinkSync,
  existsSync, appendFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BIN, Daemon, Client, sleep } from "./lib/daemon.mjs";
import { tar, tarOfDir, writeOciLayout, dockerArchive, busyboxEntries } from "./lib/oci.mjs";

let tmp, images;
before(() => {
  tmp = mkdtempSync(join(tmpdir(), "sandboxd-images-"));
  images = join(tmp, "images");
});
after(() => tmp && rmSync(tmp, { recursive: true, force: true }));

const CONFIG = {
  Env: ["PATH=/bin", "GREETING=hello"],
  WorkingDir: "/data",
  User: "0:0",
  Entrypoint: ["/bin/sh", "-c"],
  Cmd: ["echo hi"],
};

// Three layers: busybox and files; whiteouts, an opaque dir, a hard link,
// files through a relative symlink; one more file (gzip'd in the layout).
function layers() {
  const l1 = tar([
    ...busyboxEntries(),
    { name: "etc", type: "dir" },
    { name: "etc/passwd", data: "root:x:0:0:root:/root:/bin/sh\n" },
    { name: "hello.txt", data: "hello from layer 1\n", xattrs: { "user.test": "xattr-value" } },
    { name: "data", type: "dir" },
    { name: "data/keep.txt", data: "kept\n" },
    { name: "data/gone.txt", data: "whited out\n" },
    { name: "opq", type: "dir" },
    { name: "opq/lower1", data: "1" },
    { name: "opq/sub", type: "dir" },
    { name: "opq/sub/lower2", data: "2" },
    { name: "usr", type: "dir" },
    { name: "usr/lib", type: "dir" },
    { name: "lib", type: "symlink", linkname: "usr/lib" },
    { name: "abs-link", type: "symlink", linkname: "/etc/passwd" },
    { name: `deep/${"d".repeat(120)}/long-name-${"n".repeat(110)}.txt`, data: "long\n" },
  ]);
  const l2 = tar([
    { name: "data/.wh.gone.txt", data: "" },
    { name: "opq/.wh..wh..opq", data: "" },
    { name: "opq/upper", data: "upper\n" },
    { name: "data/new.txt", data: "new\n", uid: 1000, gid: 1000, mode: 0o640 },
    { name: "data/hard", type: "link", linkname: "data/new.txt" },
    { name: "lib/libfoo.so", data: "through lib -> usr/lib\n" },
    { name: "fifo", type: "fifo" },
    { name: "bin/suid", data: "x", mode: 0o4755 },
  ]);
  const l3 = tar([{ name: "data/layer3.txt", data: "three\n" }]);
  return [l1, l2, l3];
}

function imp(name, file, extra = []) {
  return spawnSync(BIN, ["image", "import", name, file, "--images", images, ...extra]);
}

function importOk(name, file, extra = []) {
  const r = imp(name, file, extra);
  assert.equal(r.status, 0, `import ${name}: ${r.stderr}`);
  return r.stderr.toString();
}

function getxattr(path, name) {
  try {
    return execFileSync("getfattr", ["--only-values", "-n", name, path]).toString();
  } catch {
    return execFileSync("python3", ["-c",
      "import os,sys; sys.stdout.write(os.getxattr(sys.argv[1], sys.argv[2]).decode())", path, name]).toString();
  }
}

// What every import of layers() must hold, on the host and in a sandbox.
async function checkImage(name) {
  const root = join(images, name, "rootfs");
  const info = JSON.parse(readFileSync(join(images, name, "image.json"), "utf8"));
  assert.deepEqual(info.config, CONFIG);
  assert.equal(info.layers.length, 3);
  assert.equal(getxattr(join(root, "hello.txt"), "user.test"), "xattr-value");
  assert.equal(lstatSync(join(root, "data/new.txt")).uid, 1000);
  assert.equal(lstatSync(join(root, "bin/suid")).mode & 0o7777, 0o4755);
  const d = await new Daemon({ images, image: name }).start();
  try {
    const c = new Client(d);
    const sh = async (line) => {
      const r = await c.exec("s", ["/bin/sh", "-c", line], { env: { PATH: "/bin" } });
      assert.equal(r.exitCode, 0, `${line}: ${r.stderr}`);
      return r.stdout;
    };
    assert.equal(await sh("cat /hello.txt"), "hello from layer 1\n");
    assert.equal(await sh("cat /data/keep.txt /data/layer3.txt"), "kept\nthree\n");
    assert.equal(await sh("test -e /data/gone.txt || echo absent"), "absent\n");
    assert.equal(await sh("ls -A /opq"), "upper\n");
    assert.equal(await sh("readlink /lib; readlink /abs-link"), "usr/lib\n/etc/passwd\n");
    assert.equal(await sh("cat /usr/lib/libfoo.so"), "through lib -> usr/lib\n");
    const inodes = (await sh("stat -c %i /data/new.txt /data/hard")).trim().split("\n");
    assert.equal(inodes.length, 2);
    assert.equal(inodes[0], inodes[1]);
    assert.equal(await sh("stat -c '%u %a' /data/new.txt"), "1000 640\n");
    assert.equal(await sh("test -p /fifo && echo fifo"), "fifo\n");
    assert.match(await sh("cat /deep/*/long-name-*.txt"), /^long\n$/);
    // The image's config is every command's defaults: Env, WorkingDir,
    // User, and Entrypoint + Cmd for a request without a command.
    const dflt = await c.exec("s", ["/bin/sh", "-c", "echo $GREETING; pwd; id -u"]);
    assert.equal(dflt.stdout, "hello\n/data\n0\n", dflt.stderr);
    const none = await c.data("s", "POST", "/exec", {});
    assert.equal(none.status, 200, JSON.stringify(none.body));
    assert.equal(none.body.stdout, "hi\n");
  } finally {
    await d.destroy();
  }
}

test("an OCI layout dir, a tar of it and a docker-archive import and run", async () => {
  const ls = layers();
  const dir = join(tmp, "oci-dir");
  const oci = writeOciLayout(dir, ls, { config: CONFIG, gzip: [true, false, true] });
  const out = importOk("imp-oci", dir);
  assert.match(out, new RegExp(`layer 1/3 ${oci.layers[0].slice(0, 19)}`));
  assert.match(out, /image 'imp-oci' imported \(\d+\.\d MiB\)/);
  writeFileSync(join(tmp, "oci.tar"), tarOfDir(dir));
  importOk("imp-ocitar", join(tmp, "oci.tar"));
  writeFileSync(join(tmp, "docker.tar"), dockerArchive(ls, { config: CONFIG }).tar);
  importOk("imp-docker", join(tmp, "docker.tar"));

  const info = JSON.parse(readFileSync(join(images, "imp-oci", "image.json"), "utf8"));
  assert.equal(info.source, "oci");
  assert.equal(info.manifest, oci.manifest);
  assert.deepEqual(info.layers.map((l) => l.digest), oci.layers);
  assert.equal(JSON.parse(readFileSync(join(images, "imp-docker", "image.json"))).source, "docker");

  const list = execFileSync(BIN, ["image", "list", "--images", images]).toString();
  for (const n of ["imp-oci", "imp-ocitar", "imp-docker"])
    assert.match(list, new RegExp(`^${n} .* current$`, "m"));
  for (const n of ["imp-oci", "imp-ocitar", "imp-docker"]) await checkImage(n);
});

test("zstd-compressed layers import like gzip'd and plain ones", async () => {
  const dir = join(tmp, "oci-zstd");
  const oci = writeOciLayout(dir, layers(), { config: CONFIG, zstd: [true, true, false] });
  const manifest = JSON.parse(readFileSync(oci.blob(oci.manifest)));
  assert.equal(manifest.layers[0].mediaType, "application/vnd.oci.image.layer.v1.tar+zstd");
  importOk("imp-zstd", dir);
  await checkImage("imp-zstd");
});

test("images are listed by the API; image rm refuses one a sandbox uses, naming it", async () => {
  const dir = join(tmp, "oci-rm");
  writeOciLayout(dir, layers(), { config: CONFIG });
  importOk("imp-rm", dir);
  importOk("imp-keep", dir);
  const state = mkdtempSync(join(tmpdir(), "sandboxd-state-"));
  const d = await new Daemon({ images, image: "imp-keep", state }).start();
  try {
    const c = new Client(d);
    const r = await c.control("GET", "/v1/images");
    assert.equal(r.status, 200);
    const rm = r.body.images.find((i) => i.name === "imp-rm");
    assert.equal(rm.source, "oci");
    assert.equal(rm.layers, 3);
    assert.ok(rm.sizeBytes > 0 && Date.parse(rm.builtAt) > 0);
    const noauth = await fetch(`${d.url}/v1/images`);
    assert.equal(noauth.status, 401);

    const h = await c.control("POST", "/v1/sandboxes/user-of-rm/attach", { image: "imp-rm" });
    assert.equal(h.status, 200, JSON.stringify(h.body));
    const cli = (...a) => spawnSync(BIN, ["image", ...a, "--images", images, "--state", state]);
    const busy = cli("rm", "imp-rm");
    assert.equal(busy.status, 1);
    assert.match(busy.stderr.toString(), /in use by 1 sandbox: dep-a\/user-of-rm/);
    assert.ok(existsSync(join(images, "imp-rm", "image.json")));
    // The configured default image (debian, unless sandboxd.conf says
    // otherwise) is refused too; an unknown one is an error.
    const dflt = cli("rm", "debian");
    assert.equal(dflt.status, 1);
    assert.match(dflt.stderr.toString(), /default image/);
    assert.notEqual(cli("rm", "no-such").status, 0);

    assert.equal((await c.control("DELETE", "/v1/sandboxes/user-of-rm")).status, 204);
    const ok = cli("rm", "imp-rm");
    assert.equal(ok.status, 0, ok.stderr.toString());
    assert.ok(!existsSync(join(images, "imp-rm")));
    assert.deepEqual(readdirSync(images).filter((n) => n.startsWith(".")), []);
    const after = await c.control("GET", "/v1/images");
    assert.ok(!after.body.images.some((i) => i.name === "imp-rm"));
    const gone = await c.control("POST", "/v1/sandboxes/late/attach", { image: "imp-rm" });
    assert.equal(gone.status, 404);
    assert.equal(gone.body.error.code, "image_not_found");
  } finally {
    await d.destroy();
  }
});

// ---- hostile archives ----

function leftovers(name) {
  return existsSync(images) ? readdirSync(images).filter((n) => n.startsWith(".") || n === name) : [];
}

function refused(name, file, re, extra = []) {
  const r = imp(name, file, extra);
  const err = r.stderr.toString();
  assert.notEqual(r.status, 0, `import ${name} should fail`);
  assert.match(err, re);
  assert.deepEqual(leftovers(name), []);
}

let hostileN = 0;
function hostileLayout(entries, opts) {
  const dir = join(tmp, `hostile-${hostileN++}`);
  return { dir, ...writeOciLayout(dir, [tar(entries)], opts) };
}

test("a missing blob, a flipped byte and a wrong size are refused, naming the blob", () => {
  const a = hostileLayout([{ name: "f", data: "x".repeat(4096) }]);
  rmSync(a.blob(a.layers[0]));
  refused("h-missing", a.dir, new RegExp(`layer 1: blob .*${a.layers[0].slice(7)}.* is missing`));

  const b = hostileLayout([{ name: "f", data: "x".repeat(4096) }]);
  const blob = readFileSync(b.blob(b.layers[0]));
  blob[700] ^= 1;
  writeFileSync(b.blob(b.layers[0]), blob);
  refused("h-digest", b.dir, new RegExp(`blob ${b.layers[0]} does not match its digest`));

  const c = hostileLayout([{ name: "f", data: "x" }]);
  appendFileSync(c.blob(c.layers[0]), "extra");
  refused("h-size", c.dir, new RegExp(`blob ${c.layers[0]} has \\d+ bytes, its descriptor says \\d+`));

  const m = hostileLayout([{ name: "f", data: "x" }]);
  const man = readFileSync(m.blob(m.manifest));
  man[man.length - 2] ^= 1;
  writeFileSync(m.blob(m.manifest), man);
  refused("h-manifest", m.dir, /the manifest: blob sha256:\w+ does not match its digest/);

  // docker-archive: a layer whose content is not its diff_id
  const ls = [tar([{ name: "f", data: "y".repeat(2048) }])];
  const d = dockerArchive(ls);
  const t = Buffer.from(d.tar);
  const at = t.indexOf("y".repeat(64));
  t[at] = "z".charCodeAt(0);
  writeFileSync(join(tmp, "bad-docker.tar"), t);
  refused("h-diffid", join(tmp, "bad-docker.tar"), /uncompressed content is sha256:\w+, the config's diff_id says/);
});

test("entries that would leave the image, devices, setuid, big ids are refused", () => {
  const cases = [
    ["h-dotdot", [{ name: "../evil", data: "x" }], /entry `\.\.\/evil`: an absolute path or `\.\.`/],
    ["h-dotdot2", [{ name: "a/../../evil", data: "x" }], /entry `a\/\.\.\/\.\.\/evil`/],
    ["h-abs", [{ name: "/etc/evil", data: "x" }], /entry `\/etc\/evil`: an absolute path/],
    ["h-symlink", [{ name: "evil", type: "symlink", linkname: "/etc" }, { name: "evil/passwd", data: "x" }],
      /entry `evil\/passwd`: its parent goes through a symlink that leads out of the image/],
    ["h-symlink-rel", [{ name: "evil", type: "symlink", linkname: "../../../../etc" }, { name: "evil/x", data: "x" }],
      /entry `evil\/x`: its parent goes through a symlink/],
    ["h-hardlink", [{ name: "pw", type: "link", linkname: "../../etc/passwd" }],
      /hard link `pw` -> `\.\.\/\.\.\/etc\/passwd`: the target leaves the image/],
    ["h-hardlink-missing", [{ name: "pw", type: "link", linkname: "nothing" }],
      /hard link `pw` -> `nothing`: no such entry/],
    ["h-hardlink-via-symlink", [{ name: "e", type: "symlink", linkname: "/etc" }, { name: "pw", type: "link", linkname: "e/passwd" }],
      /hard link target `e\/passwd`: its parent goes through a symlink/],
    ["h-chardev", [{ name: "null", type: "char", devmajor: 1, devminor: 3 }], /entry `null` is a device node/],
    ["h-blockdev", [{ name: "sda", type: "block", devmajor: 8, devminor: 0 }], /entry `sda` is a device node/],
    ["h-uid", [{ name: "f", data: "x", uid: 70000 }], /entry `f`: uid 70000 \/ gid 0 is beyond 65535/],
    ["h-gid", [{ name: "f", data: "x", gid: 65536 }], /gid 65536 is beyond 65535/],
  ];
  for (const [name, entries, re] of cases) refused(name, hostileLayout(entries).dir, re);
  const suid = hostileLayout([{ name: "su", data: "x", mode: 0o4755 }]);
  refused("h-suid", suid.dir, /entry `su` is setuid or setgid \(--no-setuid\)/, ["--no-setuid"]);
  const sgid = hostileLayout([{ name: "sg", data: "x", mode: 0o2755 }]);
  refused("h-sgid", sgid.dir, /entry `sg` is setuid or setgid/, ["--no-setuid"]);
  // kept without --no-setuid (sandboxes mount their images nosuid)
  importOk("h-suid-ok", suid.dir);
  assert.equal(lstatSync(join(images, "h-suid-ok/rootfs/su")).mode & 0o7777, 0o4755);
});

test("bad names, an existing name, too big, not an image are refused", () => {
  const ok = hostileLayout([{ name: "f", data: "x".repeat(100000) }]);
  importOk("exists", ok.dir);
  const before = readFileSync(join(images, "exists/image.json"), "utf8");
  const r = imp("exists", ok.dir);
  assert.notEqual(r.status, 0);
  assert.match(r.stderr.toString(), /image `exists` exists \(--force replaces it\)/);
  assert.equal(readFileSync(join(images, "exists/image.json"), "utf8"), before);
  importOk("exists", ok.dir, ["--force"]);
  assert.deepEqual(readdirSync(images).filter((n) => n.startsWith(".")), []);

  refused("Bad/Name", ok.dir, /bad image name/);
  refused("h-big", ok.dir, /larger than the size cap/, ["--max-size", "50K"]);
  const empty = join(tmp, "not-an-image");
  rmSync(empty, { recursive: true, force: true });
  writeFileSync(join(tmp, "junk.tar"), tar([{ name: "hello", data: "x" }]));
  refused("h-junk", join(tmp, "junk.tar"), /neither an OCI image layout .* nor a docker archive/);
  writeFileSync(join(tmp, "garbage"), randomBytes(3000));
  refused("h-garbage", join(tmp, "garbage"), /sandboxd image import: /);
  refused("h-absent", join(tmp, "no-such-file"), /open `.*no-such-file`/);
});

test("an index without linux/amd64 lists what it has", () => {
  const a = hostileLayout([{ name: "f", data: "x" }]);
  const idx = JSON.parse(readFileSync(join(a.dir, "index.json")));
  idx.manifests[0].platform = { os: "linux", architecture: "arm64" };
  idx.manifests.push({ ...idx.manifests[0], platform: { os: "windows", architecture: "amd64" } });
  writeFileSync(join(a.dir, "index.json"), JSON.stringify(idx));
  refused("h-platform", a.dir, /no manifest for linux\/amd64 in the index \(it has: linux\/arm64, windows\/amd64\)/);
});

test("too many layers are refused", () => {
  const ls = Array.from({ length: 129 }, (_, i) => tar([{ name: `f${i}`, data: "x" }]));
  const dir = join(tmp, "many");
  writeOciLayout(dir, ls);
  refused("h-many", dir, /the image has 129 layers, more than 128/);
});

test("a SIGKILL mid-import leaves nothing used; list sweeps it; a retry succeeds", async () => {
  const big = (i) => tar([{ name: `big${i}.bin`, data: randomBytes(40 << 20) }]);
  const dir = join(tmp, "big");
  writeOciLayout(dir, [big(0), big(1)], { gzip: [true, false] });
  const file = join(tmp, "big.tar");
  writeFileSync(file, tarOfDir(dir));
  const p = spawn(BIN, ["image", "import", "big", file, "--images", images], { stdio: "ignore" });
  const exited = new Promise((r) => p.on("exit", (code, sig) => r({ code, sig })));
  for (let i = 0; i < 2000 && !readdirSync(images).some((n) => n.startsWith(".build-big-")); i++)
    await sleep(5);
  await sleep(150);
  p.kill("SIGKILL");
  const { sig } = await exited;
  assert.equal(sig, "SIGKILL", "the import ended before it could be killed");
  assert.ok(!existsSync(join(images, "big")));
  const list = execFileSync(BIN, ["image", "list", "--images", images]).toString();
  assert.doesNotMatch(list, /^big /m);
  assert.deepEqual(readdirSync(images).filter((n) => n.startsWith(".")), []);
  importOk("big", file);
  assert.match(execFileSync(BIN, ["image", "list", "--images", images]).toString(), /^big /m);
});
