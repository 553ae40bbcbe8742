// Image archives written by the tests themselves: a small tar writer (ustar
// headers, PAX extended headers for long names and SCHILY.xattr.*), OCI
// image layouts and docker-archives built from it. No registry, no npm
// package: what `sandboxd image import` reads, byte by byte.
import { createHash } from "node:crypto";
import { gzipSync } from "node:zlib";
import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync, readFileSync, readdirSync, lstatSync } from "node:fs";
import { join, relative } from "node:path";

const TYPES = { file: "0", link: "1", symlink: "2", char: "3", block: "4", dir: "5", fifo: "6" };

export const sha256 = (b) => createHash("sha256").update(b).digest("hex");

function octal(n, width) {
  return n.toString(8).padStart(width - 1, "0") + "\0";
}

function header(f) {
  const h = Buffer.alloc(512);
  const put = (s, off, len) => Buffer.from(s).copy(h, off, 0, len);
  put(f.name, 0, 100);
  put(octal(f.mode ?? (f.type === "dir" ? 0o755 : 0o644), 8), 100, 8);
  put(octal(f.uid ?? 0, 8), 108, 8);
  put(octal(f.gid ?? 0, 8), 116, 8);
  put(octal(f.size, 12), 124, 12);
  put(octal(f.mtime ?? 1700000000, 12), 136, 12);
  h.fill(" ", 148, 156);
  put(f.typeflag, 156, 1);
  put(f.linkname || "", 157, 100);
  put("ustar\0" + "00", 257, 8);
  put("root", 265, 32);
  put("root", 297, 32);
  put(octal(f.devmajor ?? 0, 8), 329, 8);
  put(octal(f.devminor ?? 0, 8), 337, 8);
  let sum = 0;
  for (const b of h) sum += b;
  put(sum.toString(8).padStart(6, "0") + "\0 ", 148, 8);
  return h;
}

function pad(b) {
  const rest = b.length % 512;
  return rest ? Buffer.concat([b, Buffer.alloc(512 - rest)]) : b;
}

// One PAX record: "<len> key=value\n", len counting itself.
function paxRecord(key, value) {
  const body = Buffer.concat([Buffer.from(` ${key}=`), Buffer.from(value), Buffer.from("\n")]);
  let len = body.length + 1;
  while (String(len).length + body.length !== len) len++;
  return Buffer.concat([Buffer.from(String(len)), body]);
}

// entries: {name, type (file, dir, symlink, link, char, block, fifo), data,
// mode, uid, gid, mtime, linkname, xattrs: {name: value}}
export function tar(entries) {
  const parts = [];
  for (const e of entries) {
    const type = e.type || "file";
    const data = type === "file" ? Buffer.from(e.data ?? "") : Buffer.alloc(0);
    const name = type === "dir" && !e.name.endsWith("/") ? e.name + "/" : e.name;
    const pax = [];
    if (Buffer.byteLength(name) > 99) pax.push(paxRecord("path", name));
    if (e.linkname && Buffer.byteLength(e.linkname) > 99) pax.push(paxRecord("linkpath", e.linkname));
    for (const [k, v] of Object.entries(e.xattrs || {})) pax.push(paxRecord(`SCHILY.xattr.${k}`, v));
    if (pax.length) {
      const body = Buffer.concat(pax);
      parts.push(header({ name: "PaxHeaders/x", size: body.length, typeflag: "x", mode: 0o644 }), pad(body));
    }
    parts.push(header({ ...e, name: name.slice(0, 99), linkname: (e.linkname || "").slice(0, 99),
      size: data.length, typeflag: TYPES[type] }));
    if (data.length) parts.push(pad(data));
  }
  parts.push(Buffer.alloc(1024));
  return Buffer.concat(parts);
}

// Every file and dir under dir, as tar entries (names relative to it).
export function tarOfDir(dir) {
  const entries = [];
  const walk = (d) => {
    for (const n of readdirSync(d).sort()) {
      const p = join(d, n);
      const rel = relative(dir, p);
      if (lstatSync(p).isDirectory()) {
        entries.push({ name: rel, type: "dir" });
        walk(p);
      } else entries.push({ name: rel, data: readFileSync(p) });
    }
  };
  walk(dir);
  return tar(entries);
}

export function imageConfig(diffIds, config = {}) {
  return {
    architecture: "amd64",
    os: "linux",
    config,
    rootfs: { type: "layers", diff_ids: diffIds.map((h) => `sha256:${h}`) },
  };
}

// An OCI image layout in dir. layers: tar buffers; gzip, zstd: which to
// compress so (zstd with the zstd command). Returns digests and a
// put(hex, bytes) to overwrite a blob.
export function writeOciLayout(dir, layers, { config = {}, gzip = [], zstd = [] } = {}) {
  const blobs = join(dir, "blobs", "sha256");
  mkdirSync(blobs, { recursive: true });
  const put = (bytes) => {
    const hex = sha256(bytes);
    writeFileSync(join(blobs, hex), bytes);
    return { hex, size: bytes.length };
  };
  const diffIds = layers.map((l) => sha256(l));
  const layerDescs = layers.map((l, i) => {
    const z = gzip[i] ? gzipSync(l) : zstd[i] ? execFileSync("zstd", ["-q", "-c"], { input: l, maxBuffer: 1 << 30 }) : l;
    const { hex, size } = put(z);
    return {
      mediaType: `application/vnd.oci.image.layer.v1.tar${gzip[i] ? "+gzip" : zstd[i] ? "+zstd" : ""}`,
      digest: `sha256:${hex}`,
      size,
    };
  });
  const cfg = put(Buffer.from(JSON.stringify(imageConfig(diffIds, config))));
  const manifest = Buffer.from(JSON.stringify({
    schemaVersion: 2,
    mediaType: "application/vnd.oci.image.manifest.v1+json",
    config: { mediaType: "application/vnd.oci.image.config.v1+json", digest: `sha256:${cfg.hex}`, size: cfg.size },
    layers: layerDescs,
  }));
  const man = put(manifest);
  writeFileSync(join(dir, "oci-layout"), JSON.stringify({ imageLayoutVersion: "1.0.0" }));
  writeFileSync(join(dir, "index.json"), JSON.stringify({
    schemaVersion: 2,
    mediaType: "application/vnd.oci.image.index.v1+json",
    manifests: [{
      mediaType: "application/vnd.oci.image.manifest.v1+json",
      digest: `sha256:${man.hex}`,
      size: man.size,
      platform: { architecture: "amd64", os: "linux" },
    }],
  }));
  return {
    manifest: `sha256:${man.hex}`,
    config: `sha256:${cfg.hex}`,
    layers: layerDescs.map((d) => d.digest),
    blob: (digest) => join(blobs, digest.replace("sha256:", "")),
  };
}

// A docker-archive (docker save): <id>/layer.tar, <config hex>.json,
// manifest.json.
export function dockerArchive(layers, { config = {}, tags = ["test:latest"] } = {}) {
  const diffIds = layers.map((l) => sha256(l));
  const cfg = Buffer.from(JSON.stringify(imageConfig(diffIds, config)));
  const cfgHex = sha256(cfg);
  const entries = [];
  const names = layers.map((l, i) => {
    const id = sha256(`${cfgHex}/${i}`);
    entries.push({ name: id, type: "dir" }, { name: `${id}/layer.tar`, data: l });
    return `${id}/layer.tar`;
  });
  entries.push({ name: `${cfgHex}.json`, data: cfg });
  entries.push({ name: "manifest.json",
    data: JSON.stringify([{ Config: `${cfgHex}.json`, RepoTags: tags, Layers: names }]) });
  return { tar: tar(entries), config: `sha256:${cfgHex}`, diffIds };
}

// A layer with a static busybox: bin/busybox and the applets a test runs.
export function busyboxEntries(applets = ["sh", "ls", "cat", "stat", "readlink", "test", "echo", "id", "true"]) {
  return [
    { name: "bin", type: "dir" },
    { name: "bin/busybox", data: readFileSync("/bin/busybox"), mode: 0o755 },
    ...applets.map((a) => ({ name: `bin/${a}`, type: "symlink", linkname: "busybox" })),
  ];
}
