// A daemon sized for twenty thousand sandboxes: it claims 20,000 x 65536
// host uids and a /15 of NAT addresses (20,000 /30s), its sandboxes take
// uids and addresses from them, and beyond the largest size it is refused
// with a message that says why.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Daemon, Client, BIN, GVISOR } from "./lib/daemon.mjs";
import { spawnSync } from "node:child_process";

const d = new Daemon({ args: ["--max-sandboxes", "20000", "--max-per-deployment", "20000", "--network", "nat",
  "--dns", "198.18.0.53", "--pool-size", "0", "--disk-limit", "64M"] });
after(() => d.destroy());

const ip = (s) => s.split(".").reduce((a, b) => a * 256 + Number(b), 0);

test("max_sandboxes 20000: a uid range of 20000 x 65536 and a /15 of addresses, used by its sandboxes", async () => {
  await d.start();
  const ranges = Object.fromEntries(readFileSync(join(d.state, "ranges"), "utf8").trim().split("\n")
    .map((l) => l.split(" ")));
  const [net, prefix] = ranges.net_range.split("/");
  assert.equal(Number(prefix), 15, `a /15 holds 20000 /30s (${ranges.net_range})`);
  const c = new Client(d);
  const r = await c.sh("one", "cat /proc/self/uid_map; ip -4 -o addr show eth0 2>/dev/null || cat /proc/net/fib_trie | grep -m1 -o '10\\.[0-9.]*'");
  assert.equal(r.exitCode, 0, r.stderr);
  if (!GVISOR) { // under gvisor the ids are the sandbox's own (docs/security.md)
    const [inside, host, count] = r.stdout.trim().split("\n")[0].trim().split(/\s+/).map(Number);
    assert.equal(inside, 0);
    assert.equal(count, 65536);
    const base = Number(ranges.uid_base);
    assert.ok(host >= base && host + count <= base + 20000 * 65536, `its uids ${host}+${count} are the daemon's`);
  }
  const addr = /(10\.\d+\.\d+\.\d+)/.exec(r.stdout.split("\n").slice(1).join("\n"));
  assert.ok(addr, `the sandbox has an address (${r.stdout})`);
  assert.ok(ip(addr[1]) >= ip(net) && ip(addr[1]) < ip(net) + 2 ** 17, `${addr[1]} is in ${ranges.net_range}`);
});

test("max_sandboxes past 32768 is refused at start-up, with why", () => {
  const r = spawnSync(BIN, ["serve", "--max-sandboxes", "32769", "--state", join(d.state, "never"), "--listen", "127.0.0.1:1"],
    { encoding: "utf8", timeout: 10000 });
  assert.notEqual(r.status, 0);
  assert.match(r.stderr + r.stdout, /max_sandboxes/);
});
