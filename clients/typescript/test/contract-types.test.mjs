// The SDK's wire types (src/types.ts) against the wire contract
// (docs/openapi.yaml): TypeScript types are generated from the contract's
// schemas with openapi-typescript, and tsc checks, pair by pair, that
//
// - both sides have the same fields (a field the server sends that the SDK
//   does not know, or one the SDK expects that the server never sends, fails);
// - the SDK can hold every answer the server may give (wire type assignable
//   to the SDK type: types, enums, what is optional), and the server takes
//   every request the SDK may send (SDK type assignable to the wire type);
// - where the SDK means to be exact, both ways.
//
// The SDK spells a few answer fields wider than the wire, as the documented
// client does (`state` and `class` as string, `network` optional): those
// pairs are checked one way. The last test proves the check has teeth: it
// runs on drifted copies of both sides and must fail on each.

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile, mkdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { after, before, describe, it } from "node:test";
import openapiTS, { astToString } from "openapi-typescript";
import { contract } from "../../../tests/contract/openapi.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const SDK = resolve(here, "..");
const SPEC = resolve(SDK, "../../docs/openapi.yaml");
const TYPES = join(SDK, "src/types.ts");
const TSC = join(SDK, "node_modules/typescript/bin/tsc");

// Answers: the wire type must fit the SDK's. `exact`: and the SDK's the wire's.
const ANSWERS = [
  { sdk: "SandboxHandle", wire: 'W["SandboxHandle"]' },
  { sdk: "SandboxRecord", wire: 'W["SandboxRecord"]' },
  { sdk: "ExecResult", wire: 'W["ExecResult"]', exact: true },
  { sdk: "ProcessStatus", wire: 'W["ProcessStatus"]', exact: true },
  { sdk: "ProcessOutput", wire: 'W["ProcessOutput"]', exact: true },
  { sdk: "DirEntry", wire: 'W["DirEntry"]', exact: true },
  { sdk: "ImageInfo", wire: 'W["Image"]' },
  { sdk: "SnapshotInfo", wire: 'W["Snapshot"]', exact: true },
  { sdk: "Share", wire: 'W["Share"]', exact: true },
  { sdk: "StreamStart", wire: 'W["StreamStart"]', exact: true },
  { sdk: "StreamExit", wire: 'W["StreamExit"]', exact: true },
];
// Requests: the SDK's type must fit the wire's.
const REQUESTS = [
  { sdk: "ExecRequest", wire: 'W["ExecRequest"]' },
  { sdk: "SpawnRequest", wire: 'W["SpawnRequest"]' },
  { sdk: "PtySize", wire: 'W["TerminalSize"]' },
  { sdk: "ShareOptions", wire: 'W["ShareRequest"]' },
  { sdk: "PollOptions", wire: 'NonNullable<operations["pollProcess"]["parameters"]["query"]>' },
];
// Single values: one way (requests) or both (exact).
const VALUES = [
  { name: "Signal", sdk: "sdk.Signal", wire: 'W["Signal"]', exact: true },
  { name: "Network", sdk: "sdk.Network", wire: 'W["Network"]', exact: true },
  { name: "SignalRequest", sdk: "sdk.Signal", wire: 'NonNullable<W["SignalRequest"]["signal"]>' },
  { name: "AttachNetwork", sdk: 'NonNullable<sdk.AttachOptions["network"]>', wire: 'NonNullable<W["AttachRequest"]["network"]>' },
  { name: "AttachImage", sdk: 'NonNullable<sdk.AttachOptions["image"]>', wire: 'NonNullable<W["AttachRequest"]["image"]>' },
];

/**
 * A check file importing the wire types from `wire` and the SDK's from
 * `types` (paths without extension): { source, names }, names[line - 1]
 * being the check on that line.
 */
function checkSource(wire, types) {
  const lines = [
    `import type { components, operations } from "${wire}.js";`,
    `import type * as sdk from "${types}.js";`,
    "",
    'type W = components["schemas"];',
    "type Extra<A, B> = Exclude<keyof A, keyof B>;",
    "/** true when A and B have the same fields; else which fields one of them lacks. */",
    "type SameFields<A, B> = [Extra<A, B>, Extra<B, A>] extends [never, never]",
    "  ? true",
    "  : { onlyInWire: Extra<A, B>; onlyInSdk: Extra<B, A> };",
    "",
  ];
  for (const p of ANSWERS) {
    lines.push(`// ${p.sdk}: an answer.`);
    lines.push(`export const ${p.sdk}__same_fields: SameFields<${p.wire}, sdk.${p.sdk}> = true;`);
    lines.push(`export const ${p.sdk}__sdk_reads_wire = (w: ${p.wire}): sdk.${p.sdk} => w;`);
    if (p.exact) lines.push(`export const ${p.sdk}__wire_reads_sdk = (s: sdk.${p.sdk}): ${p.wire} => s;`);
  }
  for (const p of REQUESTS) {
    lines.push(`// ${p.sdk}: a request.`);
    lines.push(`export const ${p.sdk}__same_fields: SameFields<${p.wire}, sdk.${p.sdk}> = true;`);
    lines.push(`export const ${p.sdk}__wire_takes_sdk = (s: sdk.${p.sdk}): ${p.wire} => s;`);
  }
  for (const v of VALUES) {
    lines.push(`export const ${v.name}__wire_takes_sdk = (s: ${v.sdk}): ${v.wire} => s;`);
    if (v.exact) lines.push(`export const ${v.name}__sdk_reads_wire = (w: ${v.wire}): ${v.sdk} => w;`);
  }
  const names = lines.map((l) => /^export const (\w+)/.exec(l)?.[1]);
  return { source: `${lines.join("\n")}\n`, names };
}

async function wireTypes(doc) {
  return astToString(await openapiTS(doc));
}

/** Runs tsc on the project in dir; resolves to its diagnostics (empty when it passes). */
function tsc(dir) {
  return new Promise((res, rej) => {
    // Run in dir: tsc names files relative to where it runs.
    execFile(process.execPath, [TSC, "-p", "tsconfig.json", "--pretty", "false"], { cwd: dir, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      if (err && typeof err.code !== "number") return rej(err);
      res(`${stdout}${stderr}`.trim());
    });
  });
}

async function project(dir, files) {
  await mkdir(dir, { recursive: true });
  await writeFile(
    join(dir, "tsconfig.json"),
    JSON.stringify({
      compilerOptions: {
        target: "ES2022",
        lib: ["ES2022"],
        module: "ESNext",
        moduleResolution: "Bundler",
        strict: true,
        noEmit: true,
        skipLibCheck: true,
        exactOptionalPropertyTypes: false,
        typeRoots: [join(SDK, "node_modules/@types")],
        types: ["node"],
      },
      files,
    }),
  );
}

/** tsc's diagnostics as [{ file, check, text }], check being the name of the failed check. */
function diagnostics(out, dir, namesOf) {
  const list = [];
  for (const line of out.split("\n")) {
    const m = /^(.+?)\((\d+),\d+\): error (.*)$/.exec(line);
    if (m) {
      const file = relative(dir, resolve(dir, m[1]));
      list.push({ file, check: namesOf(file)?.[Number(m[2]) - 1] ?? `${file}:${m[2]}`, text: m[3] });
    } else if (line.trim() && list.length) list[list.length - 1].text += `\n    ${line.trim()}`;
    else if (line.trim()) list.push({ file: "(tsc)", check: "(tsc)", text: line });
  }
  return list;
}

const show = (ds) => ds.map((d) => `${d.check}: ${d.text}`).join("\n");

describe("the SDK's wire types against docs/openapi.yaml", () => {
  let dir;
  let spec;
  let types;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "sandboxd-wire-types-"));
    spec = contract.doc;
    types = await readFile(TYPES, "utf8");
  });
  after(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("src/types.ts and the contract's schemas agree", async () => {
    const sdkTypes = relative(dir, TYPES).replace(/\.ts$/, "");
    await writeFile(join(dir, "wire.ts"), await wireTypes(pathToFileURL(SPEC)));
    const check = checkSource("./wire", sdkTypes.startsWith(".") ? sdkTypes : `./${sdkTypes}`);
    await writeFile(join(dir, "check.ts"), check.source);
    await project(dir, ["check.ts"]);
    const ds = diagnostics(await tsc(dir), dir, () => check.names);
    assert.equal(ds.length, 0, `the SDK's wire types (src/types.ts) and docs/openapi.yaml differ:\n${show(ds)}`);
  });

  it("the check fails on drift of either side", async () => {
    const d = join(dir, "drift");
    await mkdir(d, { recursive: true });
    const cases = [];
    const sdkDrift = (name, from, to) => cases.push({ name, side: "sdk", from, to });
    const wireDrift = (name, change) => cases.push({ name, side: "wire", change });
    // The SDK changes a field's type, drops a field, adds one, makes one required.
    sdkDrift("ExecResult", "  exitCode: number;", "  exitCode: string;");
    sdkDrift("SandboxRecord", "  ceilingAt?: string;", "");
    sdkDrift("DirEntry", "  isDirectory: boolean;", "  isDirectory: boolean;\n  size: number;");
    sdkDrift("ProcessStatus", "  exitCode?: number;", "  exitCode: number;");
    sdkDrift("SpawnRequest", "  stdin?: boolean;", "  stdin?: boolean;\n  tty?: boolean;");
    sdkDrift("Signal", '"USR2";', '"USR2" | "WINCH";');
    // The contract adds a field, renames one, changes a type, adds an enum value.
    wireDrift("ExecResult", (s) => { s.components.schemas.ExecResult.properties.signal = { type: "string" }; });
    wireDrift("DirEntry", (s) => {
      const p = s.components.schemas.DirEntry;
      p.properties.directory = p.properties.isDirectory;
      delete p.properties.isDirectory;
      p.required = ["name", "directory"];
    });
    wireDrift("SandboxRecord", (s) => { s.components.schemas.SandboxRecord.properties.createdAt = { type: "integer" }; });
    wireDrift("ProcessStatus", (s) => { s.components.schemas.ProcessFields.properties.state.enum.push("stopped"); });
    wireDrift("ProcessOutput", (s) => { s.components.schemas.ProcessOutput.allOf[1].properties.stdoutNext = { type: "string" }; });

    const files = [];
    const names = new Map();
    for (const [i, c] of cases.entries()) {
      let wire = "../wire";
      let sdkTypes = relative(d, TYPES).replace(/\.ts$/, "");
      if (c.side === "sdk") {
        assert.ok(types.includes(c.from), `src/types.ts no longer holds ${JSON.stringify(c.from)}: update this drift case`);
        await writeFile(join(d, `types-${i}.ts`), types.replace(c.from, c.to));
        sdkTypes = `./types-${i}`;
      } else {
        const s = structuredClone(spec);
        c.change(s);
        await writeFile(join(d, `wire-${i}.ts`), await wireTypes(s));
        wire = `./wire-${i}`;
      }
      const check = checkSource(wire, sdkTypes);
      await writeFile(join(d, `check-${i}.ts`), check.source);
      names.set(`check-${i}.ts`, check.names);
      files.push(`check-${i}.ts`);
    }
    await project(d, files);
    const ds = diagnostics(await tsc(d), d, (f) => names.get(f));
    const outside = ds.filter((x) => !names.has(x.file));
    assert.equal(outside.length, 0, `tsc failed outside the checks:\n${show(outside)}`);
    for (const [i, c] of cases.entries()) {
      const mine = ds.filter((x) => x.file === `check-${i}.ts`);
      assert.ok(mine.length > 0, `a drift of ${c.name} (${c.side}) went unnoticed`);
      assert.ok(mine.some((x) => x.check.startsWith(`${c.name}__`)), `the drift of ${c.name} (${c.side}) is not reported as one:\n${show(mine)}`);
    }
  });
});
