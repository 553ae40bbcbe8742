// Native files: streamed reads and writes, listing, and paths that try to
// leave the sandbox.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { readFileSync, existsSync } from "node:fs";
import { Daemon, Client } from "./lib/daemon.mjs";

let d, c;
before(async () => {
  d = await new Daemon({ args: ["--max-file", "200M"] }).start();
  c = new Client(d);
});
after(async () => d && (await d.destroy()));

const put = (name, path, body) => c.data(name, "PUT", `/files?path=${encodeURIComponent(path)}`, body, true);
async function get(name, path) {
  const h = c.handles.get(name) || (await c.attach(name));
  const r = await fetch(`${h.endpoint}/files?path=${encodeURIComponent(path)}`, { headers: h.headers });
  return { status: r.status, bytes: Buffer.from(await r.arrayBuffer()) };
}

test("write then read text and binary; parents are created; ownership is the sandbox's root", async () => {
  assert.equal((await put("f", "/workspace/a/b/c.txt", "hello\n")).status, 204);
  assert.equal((await get("f", "/workspace/a/b/c.txt")).bytes.toString(), "hello\n");
  const bin = randomBytes(70000);
  assert.equal((await put("f", "rel/bin.dat", bin)).status, 204);
  assert.ok((await get("f", "/workspace/rel/bin.dat")).bytes.equals(bin));
  const r = await c.sh("f", "stat -c '%u %g %s' /workspace/a/b/c.txt /workspace/a; cat /workspace/a/b/c.txt");
  assert.equal(r.stdout, "0 0 6\n0 0 4096\nhello\n".replace("4096", r.stdout.split("\n")[1].split(" ")[2]));
  assert.equal((await put("f", "/workspace/empty", "")).status, 204);
  assert.equal((await get("f", "/workspace/empty")).bytes.length, 0);
});

test("list a directory", async () => {
  await put("l", "/workspace/d/one", "1");
  await put("l", "/workspace/d/sub/two", "2");
  const r = await c.data("l", "GET", "/files/list?path=/workspace/d");
  assert.equal(r.status, 200);
  const names = r.body.entries.sort((x, y) => x.name.localeCompare(y.name));
  assert.deepEqual(names, [{ name: "one", isDirectory: false }, { name: "sub", isDirectory: true }]);
  const def = await c.data("l", "GET", "/files/list");
  assert.ok(def.body.entries.some((e) => e.name === "d" && e.isDirectory));
  assert.equal((await c.data("l", "GET", "/files/list?path=/nope")).status, 404);
});

test("a listing is bounded: over 100000 entries is 413", async () => {
  await c.sh("many", "mkdir -p /workspace/many && cd /workspace/many && seq 1 100001 | xargs touch", { timeoutMs: 120000 });
  const r = await c.data("many", "GET", "/files/list?path=/workspace/many");
  assert.equal(r.status, 413);
  assert.equal(r.body.error.code, "too_large");
  await c.sh("many", "rm /workspace/many/1");
  const ok = await c.data("many", "GET", "/files/list?path=/workspace/many");
  assert.equal(ok.status, 200);
  assert.equal(ok.body.entries.length, 100000);
});

test("unreadable paths are 404", async () => {
  assert.equal((await get("u", "/workspace/missing")).status, 404);
  assert.equal((await get("u", "/workspace")).status, 404);
  assert.equal((await get("u", "/proc/self/environ")).status, 404);
  assert.equal((await get("u", "/proc/1/environ")).status, 404);
  assert.equal((await get("u", "/dev/zero")).status, 404);
  await c.sh("u", "mkfifo /workspace/fifo");
  assert.equal((await get("u", "/workspace/fifo")).status, 404);
});

test("paths, .. and symlinks never leave the sandbox", async () => {
  const marker = `sandboxd-escape-${process.pid}-${Date.now()}`;
  // .. past the root stays at the sandbox's root.
  assert.equal((await put("e", `../../../../../tmp/${marker}`, "x")).status, 204);
  assert.ok(!existsSync(`/tmp/${marker}`), "wrote to the host's /tmp");
  assert.equal((await c.sh("e", `cat /tmp/${marker}`)).stdout, "x");
  // An absolute symlink to / resolves to the sandbox's root.
  await c.sh("e", "ln -s / /workspace/root; ln -s /proc/self/root /workspace/magic; ln -s /etc/hostname /workspace/hn");
  assert.equal((await put("e", `/workspace/root/tmp/${marker}-2`, "y")).status, 204);
  assert.ok(!existsSync(`/tmp/${marker}-2`));
  assert.equal((await c.sh("e", `cat /tmp/${marker}-2`)).stdout, "y");
  const host = readFileSync("/etc/hostname");
  const hn = await get("e", "/workspace/hn");
  assert.ok(hn.status === 404 || !hn.bytes.equals(host) || host.toString() === "");
  // Magic links (/proc/<pid>/root, /proc/self/fd) are refused.
  assert.notEqual((await put("e", "/workspace/magic/tmp/z", "z")).status, 204);
  assert.notEqual((await get("e", "/proc/self/root/etc/passwd")).status, 200);
  // Host sysctls through the sandbox's /proc: never.
  const core = readFileSync("/proc/sys/kernel/core_pattern");
  assert.notEqual((await put("e", "/proc/sys/kernel/core_pattern", "|/bin/false")).status, 204);
  assert.ok(readFileSync("/proc/sys/kernel/core_pattern").equals(core));
  // Writing over a symlink replaces the link, it does not write through it.
  assert.equal((await put("e", "/workspace/hn", "mine")).status, 204);
  assert.equal((await c.sh("e", "cat /workspace/hn; test -L /workspace/hn || echo file")).stdout, "minefile\n");
  // A directory is not a file.
  assert.equal((await put("e", "/workspace", "x")).status, 400);
});

test("a 100 MiB file streams both ways byte-identical", async () => {
  const big = randomBytes(100 << 20);
  const h = (b) => createHash("sha256").update(b).digest("hex");
  assert.equal((await put("big", "/workspace/big.bin", big)).status, 204);
  const r = await get("big", "/workspace/big.bin");
  assert.equal(r.status, 200);
  assert.equal(r.bytes.length, big.length);
  assert.equal(h(r.bytes), h(big));
  const sum = await c.sh("big", "sha256sum /workspace/big.bin");
  assert.equal(sum.stdout.split(" ")[0], h(big));
});

test("the write cap answers 413 and leaves nothing behind", async () => {
  const dd = await new Daemon({ args: ["--max-file", "1M"] }).start();
  try {
    const cc = new Client(dd);
    const h = await cc.attach("cap");
    const r = await fetch(`${h.endpoint}/files?path=/workspace/x`, { method: "PUT", headers: h.headers, body: randomBytes(2 << 20) });
    assert.equal(r.status, 413);
    const ls = await cc.sh("cap", "ls -A /workspace");
    assert.equal(ls.stdout, "");
  } finally {
    await dd.destroy();
  }
});

test("a reader never sees half a file", async () => {
  const a = Buffer.alloc(8 << 20, 0x61), b = Buffer.alloc(8 << 20, 0x62);
  await put("atomic", "/workspace/f", a);
  const writes = (async () => {
    for (let i = 0; i < 6; i++) await put("atomic", "/workspace/f", i % 2 ? a : b);
  })();
  let reads = 0;
  const readsDone = (async () => {
    for (let i = 0; i < 12; i++) {
      const r = await get("atomic", "/workspace/f");
      assert.equal(r.status, 200);
      assert.equal(r.bytes.length, 8 << 20);
      assert.ok(r.bytes.every((x) => x === r.bytes[0]), "mixed content");
      reads++;
    }
  })();
  await Promise.all([writes, readsDone]);
  assert.equal(reads, 12);
});
