// An image's config (image.json "config": an imported image's OCI Env,
// WorkingDir, User, Entrypoint, Cmd) are the defaults of every command run
// in a sandbox of it; what a request names wins.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync, appendFileSync, mkdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Daemon, Client, IMAGES } from "./lib/daemon.mjs";

let d, c, images;
before(async () => {
  // An images dir of our own: tiny as it is, and a copy of it with a user
  // and a config.
  images = mkdtempSync(join(tmpdir(), "sandboxd-images-"));
  execFileSync("cp", ["-a", join(IMAGES, "tiny"), join(images, "tiny")]);
  execFileSync("cp", ["-a", join(IMAGES, "tiny"), join(images, "cfg")]);
  const root = join(images, "cfg/rootfs");
  appendFileSync(join(root, "etc/passwd"), "app:x:1000:1001:app:/home/app:/bin/sh\n");
  appendFileSync(join(root, "etc/group"), "app:x:1001:\nstaff:x:50:\n");
  mkdirSync(join(root, "srv"), { mode: 0o777 });
  writeFileSync(join(images, "cfg/image.json"), JSON.stringify({
    name: "cfg", builtAt: new Date().toISOString(), size: 1,
    config: {
      Env: ["FOO=from-image", "PATH=/usr/bin:/bin", "BAR=image"],
      WorkingDir: "/srv",
      User: "app",
      Entrypoint: ["/bin/sh", "-c"],
      Cmd: ["echo default-cmd $FOO $(id -u)"],
    },
  }));
  d = await new Daemon({ image: "cfg", args: ["--images", images, "--pool-size", "0"] }).start();
  c = new Client(d);
});
after(async () => {
  if (d) await d.destroy();
  if (images) rmSync(images, { recursive: true, force: true });
});

test("a command runs as the image's user, in its WorkingDir, with its Env under the request's", async () => {
  const r = await c.exec("a", ["/bin/sh", "-c", "id -u; id -g; pwd; echo $FOO $BAR $HOME"], { env: { BAR: "request" } });
  assert.equal(r.exitCode, 0, r.stderr);
  assert.equal(r.stdout, "1000\n1001\n/srv\nfrom-image request /home/app\n");
  // What the request names wins: cwd, user (name, uid, name:group, uid:gid).
  const o = await c.exec("a", ["/bin/sh", "-c", "id -u; id -g; pwd"], { cwd: "/tmp", user: "root" });
  assert.equal(o.stdout, "0\n0\n/tmp\n");
  assert.equal((await c.exec("a", ["id", "-u"], { user: "4242" })).stdout, "4242\n");
  assert.equal((await c.exec("a", ["id", "-g"], { user: "app:staff" })).stdout, "50\n");
  assert.equal((await c.exec("a", ["id", "-g"], { user: "0:7" })).stdout, "7\n");
});

test("a request without a command runs the image's Entrypoint and Cmd", async () => {
  const r = await c.data("a", "POST", "/exec", {});
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.equal(r.body.stdout, "default-cmd from-image 1000\n");
  const s = await c.data("a", "POST", "/processes", { env: { FOO: "spawned" } });
  assert.equal(s.status, 200, JSON.stringify(s.body));
  assert.deepEqual(s.body.command, ["/bin/sh", "-c", "echo default-cmd $FOO $(id -u)"]);
});

test("an unknown user is a 400 naming it; a bad one too", async () => {
  const r = await c.data("a", "POST", "/exec", { command: ["true"], user: "nobody-here" });
  assert.equal(r.status, 400);
  assert.match(r.body.error.message, /no user 'nobody-here'/);
  const g = await c.data("a", "POST", "/exec", { command: ["true"], user: "app:nogroup" });
  assert.equal(g.status, 400);
  assert.match(g.body.error.message, /no group 'nogroup'/);
  for (const bad of ["", 7, "a\u0000b"]) {
    const b = await c.data("a", "POST", "/exec", { command: ["true"], user: bad });
    assert.equal(b.status, 400, JSON.stringify(bad));
  }
});

test("an image without a config leaves commands as they were: root, /workspace", async () => {
  const r = await c.control("POST", "/v1/sandboxes/plain/attach", { image: "tiny" });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  c.handles.set("plain", r.body);
  const e = await c.exec("plain", ["/bin/sh", "-c", "id -u; pwd; echo ${FOO-unset}"]);
  assert.equal(e.stdout, "0\n/workspace\nunset\n");
  const none = await c.data("plain", "POST", "/exec", {});
  assert.equal(none.status, 400); // no command, and the image has none
});
