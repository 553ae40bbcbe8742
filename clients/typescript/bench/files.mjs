// Seconds to write and read a file (100 MiB by default) through the SDK's
// native file endpoints, beside the same through exec with base64 in 48 KiB
// chunks (the shell-command way: `base64 -d >> file` per chunk, read back as
// base64 of the file).
//
//   node bench/files.mjs                  starts its own sandboxd (see test/harness.mjs)
//   SANDBOXD_TOKEN=... node bench/files.mjs   uses the server of that token
//   BENCH_MIB=10 node bench/files.mjs     a smaller file

import { createHash, randomBytes } from "node:crypto";
import { SandboxClient } from "@sandboxd/client";
import { skipReason, startDaemon } from "../test/harness.mjs";

const MIB = Number(process.env.BENCH_MIB || 100);
const WRITE_CHUNK = 48 * 1024;
// Read chunks whose base64 (with line breaks) stays under exec's 1 MiB cap.
const READ_CHUNK = 512 * 1024;
const NAME = `bench-files-${process.pid}`;

const sha256 = (b) => createHash("sha256").update(b).digest("hex");
const seconds = (t0) => (performance.now() - t0) / 1000;

async function viaSdk(sandboxes, data) {
  let t0 = performance.now();
  await sandboxes.writeFileBytes(NAME, "/workspace/sdk.bin", data);
  const write = seconds(t0);
  t0 = performance.now();
  const back = await sandboxes.readFileBytes(NAME, "/workspace/sdk.bin");
  const read = seconds(t0);
  if (sha256(back) !== sha256(data)) throw new Error("SDK round trip differs");
  return { write, read };
}

async function check(result, what) {
  if (result.exitCode !== 0 || result.truncated) {
    throw new Error(`${what}: exit ${result.exitCode}${result.truncated ? " (truncated)" : ""}: ${result.stderr}`);
  }
  return result;
}

async function viaBase64(sandboxes, data) {
  const path = "/workspace/b64.bin";
  let t0 = performance.now();
  await check(await sandboxes.exec(NAME, { command: ["/bin/sh", "-c", ': > "$1"', "sh", path] }), "truncate");
  for (let off = 0; off < data.length; off += WRITE_CHUNK) {
    const b64 = Buffer.from(data.subarray(off, off + WRITE_CHUNK)).toString("base64");
    await check(
      await sandboxes.exec(NAME, { command: ["/bin/sh", "-c", 'printf %s "$1" | base64 -d >> "$2"', "sh", b64, path] }),
      "write chunk",
    );
  }
  const write = seconds(t0);

  t0 = performance.now();
  const parts = [];
  for (let i = 0; i * READ_CHUNK < data.length; i++) {
    const r = await check(
      await sandboxes.exec(NAME, {
        command: ["/bin/sh", "-c", `dd if="$1" bs=${READ_CHUNK} skip=${i} count=1 2>/dev/null | base64`, "sh", path],
      }),
      "read chunk",
    );
    parts.push(Buffer.from(r.stdout, "base64"));
  }
  const read = seconds(t0);
  if (sha256(Buffer.concat(parts)) !== sha256(data)) throw new Error("base64 round trip differs");
  return { write, read };
}

async function main() {
  let daemon;
  let token = process.env.ASTRO_AUTHZ_TOKEN || process.env.SANDBOXD_TOKEN;
  if (!token) {
    const why = skipReason("tiny");
    if (why) {
      console.error(`cannot start sandboxd: ${why}`);
      process.exit(2);
    }
    daemon = await startDaemon({ image: "tiny" });
    token = await daemon.token();
  }
  const sandboxes = new SandboxClient({ identityToken: token, timeoutSeconds: 300 });
  try {
    const data = randomBytes(MIB * 1024 * 1024);
    await sandboxes.attach(NAME);
    const sdk = await viaSdk(sandboxes, data);
    const b64 = await viaBase64(sandboxes, data);
    const fmt = (r) => `write ${r.write.toFixed(2)} s, read ${r.read.toFixed(2)} s, total ${(r.write + r.read).toFixed(2)} s`;
    console.log(`${MIB} MiB through the SDK (native file endpoints): ${fmt(sdk)}`);
    console.log(`${MIB} MiB through exec + base64, 48 KiB chunks:    ${fmt(b64)}`);
    console.log(
      `ratio (base64 / SDK): write ${(b64.write / sdk.write).toFixed(1)}x, read ${(b64.read / sdk.read).toFixed(1)}x, ` +
        `total ${((b64.write + b64.read) / (sdk.write + sdk.read)).toFixed(1)}x`,
    );
  } finally {
    await sandboxes.delete(NAME).catch(() => {});
    await daemon?.stop();
  }
}

await main();
