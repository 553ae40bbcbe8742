// Benchmark: the time `sandboxd image import` takes for an image of about
// 500 MiB (5 layers, each a few random files of ~100 MiB between them),
// from an OCI layout dir, a tar of it, and the same layers gzip'd. Random
// bytes do not compress: the gzip figure is the decompression's overhead.
//   node bench/images.mjs [--layers 5] [--mib 100]
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BIN } from "../tests/integration/lib/daemon.mjs";
import { tar, tarOfDir, writeOciLayout } from "../tests/integration/lib/oci.mjs";

const arg = (k, d) => {
  const i = process.argv.indexOf(`--${k}`);
  return i > 0 ? process.argv[i + 1] : d;
};
const LAYERS = Number(arg("layers", "5"));
const MIB = Number(arg("mib", "100"));

const tmp = mkdtempSync(join(tmpdir(), "sandboxd-bench-images-"));
try {
  const layers = Array.from({ length: LAYERS }, (_, i) =>
    tar(Array.from({ length: 4 }, (_, k) => ({ name: `l${i}/f${k}.bin`, data: randomBytes((MIB << 20) / 4) }))));
  const plain = join(tmp, "plain");
  writeOciLayout(plain, layers);
  const gz = join(tmp, "gzip");
  writeOciLayout(gz, layers, { gzip: layers.map(() => true) });
  writeFileSync(join(tmp, "plain.tar"), tarOfDir(plain));
  const images = join(tmp, "images");
  const run = (label, src) => {
    const t0 = process.hrtime.bigint();
    execFileSync(BIN, ["image", "import", "bench", src, "--images", images, "--force"], { stdio: "ignore" });
    const s = Number(process.hrtime.bigint() - t0) / 1e9;
    console.log(`${label.padEnd(28)} ${s.toFixed(2)} s  ${((LAYERS * MIB) / s).toFixed(0)} MiB/s`);
  };
  console.log(`import of ${LAYERS} layers x ${MIB} MiB`);
  run("OCI layout dir", plain);
  run("OCI layout dir, gzip layers", gz);
  run("tar of the layout", join(tmp, "plain.tar"));
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
