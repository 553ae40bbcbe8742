// Recipe builds (`sandboxd image build NAME -f RECIPE`): FROM, RUN, COPY,
// ENV and WORKDIR; sandboxes started from the result see its files, its
// environment and its working directory; steps cached by content; a
// failed step, a bad recipe, a kill and an interrupt leave nothing behind.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import {
  mkdtempSync, mkdirSync, rmSync, writeFileSync, symlinkSync, existsSync, readdirSync, readFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BIN, Daemon, Client, sleep, until } from "./lib/daemon.mjs";

let images, ctx, d, c;

const build = (name, recipe, extra = [], opts = {}) => {
  const file = join(ctx, `${name}.recipe`);
  writeFileSync(file, recipe);
  const r = spawnSync(BIN, ["image", "build", name, "-f", file, "--images", images, ...extra],
    { encoding: "utf8", timeout: 120000, ...opts });
  return { status: r.status, out: `${r.stdout}${r.stderr}` };
};
const leftovers = () => readdirSync(images).filter((e) => e.startsWith("."));
const out = async (name, line) => {
  const r = await c.sh(name, line);
  assert.equal(r.exitCode, 0, JSON.stringify(r));
  return r.stdout;
};
const attachFrom = async (name, image) => {
  const r = await c.control("POST", `/v1/sandboxes/${name}/attach`, { image });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  c.handles.set(name, r.body);
};
// Processes whose command line holds marker.
const withMarker = (marker) => readdirSync("/proc").filter((p) => {
  if (!/^\d+$/.test(p)) return false;
  try {
    return readFileSync(`/proc/${p}/cmdline`, "utf8").includes(marker);
  } catch {
    return false;
  }
});

before(async () => {
  images = mkdtempSync(join(tmpdir(), "sandboxd-build-images-"));
  ctx = mkdtempSync(join(tmpdir(), "sandboxd-build-ctx-"));
  const t = spawnSync(BIN, ["image", "build", "tiny", "--images", images], { encoding: "utf8" });
  assert.equal(t.status, 0, t.stderr);
  d = await new Daemon({ images, args: ["--pool-size", "0"] }).start();
  c = new Client(d);
});
after(async () => {
  if (d) await d.destroy();
  for (const dir of [images, ctx]) if (dir) rmSync(dir, { recursive: true, force: true });
});

test("a recipe's files, environment and working directory are what its sandboxes see", async () => {
  mkdirSync(join(ctx, "src/sub"), { recursive: true });
  const blob = randomBytes(300000);
  writeFileSync(join(ctx, "src/sub/blob.bin"), blob);
  writeFileSync(join(ctx, "src/hello.txt"), "hello\n");
  symlinkSync("hello.txt", join(ctx, "src/link"));
  const r = build("app", [
    "# comments and blank lines are skipped",
    "",
    "from tiny",
    'ENV GREETING="hello world" LEVEL=3',
    "ENV PLAIN the rest of the line",
    "WORKDIR /app",
    "COPY src /app/",
    "COPY src/hello.txt /etc/greeting",
    "RUN echo \"$GREETING from $(pwd) at $LEVEL\" > made.txt && \\",
    "    echo step-output-marker",
    'RUN ["/bin/sh", "-c", "id -u > /app/uid"]',
    "WORKDIR sub",
  ].join("\n"));
  assert.equal(r.status, 0, r.out);
  assert.match(r.out, /step-output-marker/, "a RUN's output is shown as it runs");
  assert.match(r.out, /step 9\/9: WORKDIR sub/);
  const list = execFileSync(BIN, ["image", "list", "--images", images], { encoding: "utf8" });
  assert.match(list, /^app\s.*\sbuilt\s/m);
  const cfg = JSON.parse(readFileSync(join(images, "app/image.json"), "utf8")).config;
  assert.equal(cfg.WorkingDir, "/app/sub");
  assert.deepEqual(cfg.Env, ["GREETING=hello world", "LEVEL=3", "PLAIN=the rest of the line"]);

  await attachFrom("from-app", "app");
  assert.equal(await out("from-app", "pwd"), "/app/sub\n");
  assert.equal(await out("from-app", "echo $GREETING/$PLAIN"), "hello world/the rest of the line\n");
  assert.equal(await out("from-app", "cat /app/made.txt"), "hello world from /app at 3\n");
  assert.equal(await out("from-app", "cat /app/uid /etc/greeting /app/hello.txt"), "0\nhello\nhello\n");
  assert.equal(await out("from-app", "readlink /app/link"), "hello.txt\n");
  const sum = (await out("from-app", "sha256sum /app/sub/blob.bin")).split(" ")[0];
  assert.equal(sum, createHash("sha256").update(blob).digest("hex"));
  assert.equal(await out("from-app", "stat -c '%u:%g' /app/hello.txt /app/sub"), "0:0\n0:0\n");
  assert.deepEqual(leftovers(), [".cache"], "only the cache is left of the build");
});

test("a rebuild runs nothing again; a changed file runs its step and those after it", () => {
  const recipe = ["FROM tiny", "COPY input.txt /in.txt", "RUN cat /in.txt > /out.txt",
    "RUN echo second >> /out.txt"].join("\n");
  writeFileSync(join(ctx, "input.txt"), "one\n");
  const first = build("cached", recipe);
  assert.equal(first.status, 0, first.out);
  assert.match(first.out, /\(4 steps run, 0 cached\)|\(3 steps run, 1 cached\)/);
  const again = build("cached", recipe);
  assert.equal(again.status, 0, again.out);
  assert.match(again.out, /\(0 steps run, 4 cached\)/, again.out);
  // A touch is no change; new content is.
  writeFileSync(join(ctx, "input.txt"), "one\n");
  assert.match(build("cached", recipe).out, /\(0 steps run, 4 cached\)/);
  writeFileSync(join(ctx, "input.txt"), "two\n");
  const changed = build("cached", recipe);
  assert.equal(changed.status, 0, changed.out);
  assert.match(changed.out, /\(3 steps run, 1 cached\)/, changed.out);
  // --no-cache runs everything.
  assert.match(build("cached", recipe, ["--no-cache"]).out, /\(4 steps run, 0 cached\)/);
});

test("the image from a rebuild has the new files", async () => {
  writeFileSync(join(ctx, "input.txt"), "three\n");
  const r = build("cached", ["FROM tiny", "COPY input.txt /in.txt", "RUN cat /in.txt > /out.txt",
    "RUN echo second >> /out.txt"].join("\n"));
  assert.equal(r.status, 0, r.out);
  await attachFrom("from-cached", "cached");
  assert.equal(await out("from-cached", "cat /out.txt"), "three\nsecond\n");
});

test("a failed step is a clear error with its output; no image, nothing left behind", () => {
  const r = build("broken", ["FROM tiny", "RUN echo before-the-failure", "RUN echo oops >&2; exit 3",
    "RUN echo never"].join("\n"));
  assert.equal(r.status, 1, r.out);
  assert.match(r.out, /oops/);
  assert.match(r.out, /line 3: RUN failed: exit code 3/);
  assert.doesNotMatch(r.out, /step 4\/4/);
  assert.equal(existsSync(join(images, "broken")), false);
  assert.deepEqual(leftovers(), [".cache"]);
  // The step before the failure is cached: fixing the recipe goes on from it.
  const fixed = build("broken", ["FROM tiny", "RUN echo before-the-failure", "RUN true"].join("\n"));
  assert.equal(fixed.status, 0, fixed.out);
  assert.match(fixed.out, /\(1 steps run, 2 cached\)/);
});

test("bad recipes are refused by line, naming what is wrong; nothing is made", () => {
  mkdirSync(join(ctx, "esc"), { recursive: true });
  try { symlinkSync("/etc", join(ctx, "esc/out")); } catch {}
  const cases = [
    [["FROM tiny", "ADD x /x"], /line 2: ADD is not supported/],
    [["FROM tiny", "CMD [\"sh\"]"], /line 2: CMD is not supported/],
    [["RUN true"], /line 1: a recipe starts with FROM/],
    [["# nothing"], /no FROM/],
    [["FROM tiny", "FROM tiny"], /line 2: a second FROM/],
    [["FROM tiny AS x"], /more than one stage/],
    [["FROM no-such-image"], /FROM no-such-image: there is no such image/],
    [["FROM @nope"], /unknown built-in base/],
    [["FROM tiny", "FROBNICATE x"], /line 2: unknown instruction 'FROBNICATE'/],
    [["FROM tiny", "COPY ../etc/passwd /x"], /a source is inside the context/],
    [["FROM tiny", "COPY esc/out/passwd /x"], /COPY esc\/out\/passwd/],
    [["FROM tiny", "COPY --chown=1:1 a /x"], /COPY --chown=1:1 is not supported/],
    [["FROM tiny", "COPY only-one"], /COPY SOURCE\.\.\. DESTINATION/],
    [["FROM tiny", "ENV 1BAD=x"], /line 2: ENV/],
    [["FROM tiny", "ENV K=\"open"], /unterminated quote/],
    [["FROM tiny", "WORKDIR /a/../b"], /WORKDIR takes one path/],
    [["FROM tiny", "RUN [\"sh\", 3]"], /JSON array of strings/],
    [["FROM tiny", "RUN"], /RUN needs a command/],
  ];
  for (const [lines, want] of cases) {
    const r = build("bad", lines.join("\n"));
    assert.equal(r.status, 1, `${lines.join(" | ")}: ${r.out}`);
    assert.match(r.out, want, lines.join(" | "));
    assert.equal(existsSync(join(images, "bad")), false);
  }
  const nul = build("bad", "FROM tiny\nRUN echo \0\n");
  assert.match(nul.out, /line 2: a NUL byte/);
  assert.deepEqual(leftovers(), [".cache"]);
});

test("an image that is not a build's is replaced only with --force", () => {
  execFileSync("cp", ["-a", join(images, "tiny"), join(images, "copy")]);
  const j = JSON.parse(readFileSync(join(images, "copy/image.json"), "utf8"));
  writeFileSync(join(images, "copy/image.json"), JSON.stringify({ ...j, name: "copy", source: "oci" }));
  const r = build("copy", "FROM tiny\n");
  assert.equal(r.status, 1, r.out);
  assert.match(r.out, /there is an image 'copy' \(oci\) already: --force replaces it/);
  const f = build("copy", "FROM tiny\n", ["--force"]);
  assert.equal(f.status, 0, f.out);
  assert.equal(JSON.parse(readFileSync(join(images, "copy/image.json"), "utf8")).source, "built");
});

// Its output says "go-<marker>-go", which the step's line does not.
const slowRecipe = (marker) => `FROM tiny\nRUN X=${marker}; echo "go-$X-go"; sleep 3000; echo $X\n`;

async function startSlow(name, marker) {
  const file = join(ctx, `${name}.recipe`);
  writeFileSync(file, slowRecipe(marker));
  const p = spawn(BIN, ["image", "build", name, "-f", file, "--images", images],
    { stdio: ["ignore", "pipe", "pipe"] });
  let text = "";
  p.stdout.on("data", (b) => { text += b; });
  p.stderr.on("data", (b) => { text += b; });
  const exited = new Promise((r) => p.on("exit", (code, sig) => r({ code, sig })));
  await until(() => text.includes(`go-${marker}-go`), 60000);
  assert.ok(withMarker(marker).length > 0, "the step's process runs");
  return { p, exited, out: () => text };
}

test("a build killed with SIGKILL mid-step leaves no image; the next build cleans up after it", async () => {
  const marker = `m${randomBytes(6).toString("hex")}`;
  const { p, exited } = await startSlow("killed", marker);
  p.kill("SIGKILL");
  await exited;
  assert.equal(existsSync(join(images, "killed")), false);
  assert.ok(leftovers().some((e) => e === `.state-build-${p.pid}`), leftovers().join(" "));
  // The next build (of anything) deletes the dead build's sandbox.
  const r = build("after-kill", "FROM tiny\nRUN true\n");
  assert.equal(r.status, 0, r.out);
  assert.match(r.out, /cleaning up after a build that died/);
  await until(() => withMarker(marker).length === 0, 20000);
  assert.deepEqual(leftovers(), [".cache"]);
});

test("an interrupted build (SIGINT, SIGTERM) stops its step and removes what it made", async () => {
  for (const sig of ["SIGINT", "SIGTERM"]) {
    const marker = `m${randomBytes(6).toString("hex")}`;
    const { p, exited, out } = await startSlow("interrupted", marker);
    p.kill(sig);
    const { code } = await exited;
    assert.equal(code, 1, out());
    assert.match(out(), /interrupted/);
    assert.equal(existsSync(join(images, "interrupted")), false);
    assert.deepEqual(withMarker(marker), []);
    assert.deepEqual(leftovers(), [".cache"]);
  }
});

test("the shipped images are recipes: printed by `image recipe`, built from them", () => {
  const tiny = execFileSync(BIN, ["image", "recipe", "tiny"], { encoding: "utf8" });
  assert.match(tiny, /^FROM @busybox$/m);
  const deb = execFileSync(BIN, ["image", "recipe", "debian"], { encoding: "utf8" });
  assert.match(deb, /^FROM @mmdebstrap bookworm \S*python3/m);
  const list = execFileSync(BIN, ["image", "list", "--images", images], { encoding: "utf8" });
  assert.match(list, /^tiny\s.*\sbuilt\s+1\s+current$/m);
  // Current: built again only with --force.
  const again = spawnSync(BIN, ["image", "build", "tiny", "--images", images], { encoding: "utf8" });
  assert.equal(again.status, 0);
  assert.match(again.stderr, /already present/);
  const unknown = spawnSync(BIN, ["image", "build", "nope", "--images", images], { encoding: "utf8" });
  assert.equal(unknown.status, 1);
  assert.match(unknown.stderr, /not an image sandboxd ships/);
});

test("image prune empties the build cache, refused while a build runs", async () => {
  const marker = `m${randomBytes(6).toString("hex")}`;
  const { p, exited } = await startSlow("pruned", marker);
  const busy = spawnSync(BIN, ["image", "prune", "--images", images], { encoding: "utf8" });
  assert.equal(busy.status, 1);
  assert.match(busy.stderr, /a build is running/);
  p.kill("SIGINT");
  await exited;
  assert.ok(readdirSync(join(images, ".cache")).length > 0);
  const r = spawnSync(BIN, ["image", "prune", "--images", images], { encoding: "utf8" });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /removed [1-9]\d* cached build steps?/);
  assert.deepEqual(readdirSync(join(images, ".cache")), []);
  // The images stay, whole; the next build runs every step.
  await attachFrom("after-prune", "app");
  assert.equal(await out("after-prune", "cat /app/made.txt"), "hello world from /app at 3\n");
  const again = build("app-2", "FROM tiny\nRUN echo x > /x\n");
  assert.match(again.out, /\(2 steps run, 0 cached\)/, again.out);
});
