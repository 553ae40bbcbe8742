// Test harness of cluster mode: a real three-member etcd cluster on
// loopback ports picked here, and sandboxd hosts (the real daemon) joined
// to it, each with its own state dir, port and ranges. Everything started
// here is stopped by pid and its files removed by the test that made it.
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, mkdirSync, readdirSync, copyFileSync, readFileSync, writeFileSync,
  existsSync } from "node:fs";
import { tmpdir } from "node:os";
import net from "node:net";
import { join } from "node:path";
import { Daemon, freePort, sleep, removeCgroups } from "../../integration/lib/daemon.mjs";

export const ETCD = process.env.ETCD_BIN || "/usr/bin/etcd";
export const HAVE_ETCD = existsSync(ETCD);
export const ISSUER = "sandboxd-cluster-test";

const b64 = (s) => Buffer.from(s).toString("base64");
const unb64 = (s) => Buffer.from(s || "", "base64").toString();

// The key just past every key starting with prefix.
function prefixEnd(p) {
  const b = Buffer.from(p);
  b[b.length - 1]++;
  return b.toString("base64");
}

export class Etcd {
  // bind: an address of a bridge the test made, for hosts in network
  // namespaces (the test itself talks to etcd on loopback).
  constructor(n = 3, bind = null) {
    this.n = n;
    this.bind = bind;
    this.dir = mkdtempSync(join(tmpdir(), `sandboxd-etcd-${process.pid}-`));
    this.members = [];
  }

  async start() {
    for (let i = 0; i < this.n; i++)
      this.members.push({ name: `e${i}`, client: await freePort(), peer: await freePort() });
    const initial = this.members.map((m) => `${m.name}=http://127.0.0.1:${m.peer}`).join(",");
    for (const m of this.members) this.spawn(m, initial, "new");
    await this.waitHealthy();
    return this;
  }

  spawn(m, initial, state) {
    m.log = "";
    m.proc = spawn(ETCD, [
      "--name", m.name,
      "--data-dir", join(this.dir, m.name),
      "--listen-client-urls", `http://127.0.0.1:${m.client}` +
        (this.bind ? `,http://${this.bind}:${m.client}` : ""),
      "--advertise-client-urls", `http://${this.bind || "127.0.0.1"}:${m.client}`,
      "--listen-peer-urls", `http://127.0.0.1:${m.peer}`,
      "--initial-advertise-peer-urls", `http://127.0.0.1:${m.peer}`,
      "--initial-cluster", initial,
      "--initial-cluster-token", `sandboxd-test-${process.pid}`,
      "--initial-cluster-state", state,
      "--heartbeat-interval", "100",
      "--election-timeout", "1000",
      "--log-level", "warn",
    ], { stdio: ["ignore", "pipe", "pipe"] });
    m.proc.stdout.on("data", (d) => (m.log += d));
    m.proc.stderr.on("data", (d) => (m.log = (m.log + d).slice(-20000)));
    m.exited = new Promise((r) => m.proc.on("exit", r));
  }

  get endpoints() {
    return this.members.map((m) => `http://${this.bind || "127.0.0.1"}:${m.client}`).join(",");
  }

  async call(path, body, member) {
    const ms = member ? [member] : this.members.filter((m) => m.proc.exitCode === null && !m.proc.signalCode);
    let last;
    for (const m of ms) {
      try {
        const r = await fetch(`http://127.0.0.1:${m.client}${path}`, {
          method: "POST", body: JSON.stringify(body), signal: AbortSignal.timeout(3000),
        });
        if (r.status === 200) return await r.json();
        last = new Error(`etcd ${path}: ${r.status}`);
      } catch (e) {
        last = e;
      }
    }
    throw last;
  }

  async waitHealthy(ms = 20000) {
    const t0 = Date.now();
    for (;;) {
      try {
        await this.call("/v3/kv/put", { key: b64("/health"), value: b64("1") });
        return;
      } catch (e) {
        if (Date.now() - t0 > ms) throw new Error(`etcd did not come up: ${e}\n${this.members.map((m) => m.log).join("\n")}`);
        await sleep(100);
      }
    }
  }

  // Every key under prefix, decoded: [{key, value, mod}].
  async list(prefix) {
    const r = await this.call("/v3/kv/range", { key: b64(prefix), range_end: prefixEnd(prefix) });
    return (r.kvs || []).map((kv) => ({ key: unb64(kv.key), value: unb64(kv.value),
      mod: Number(kv.mod_revision || 0) }));
  }

  // The member that leads now.
  async leader() {
    for (const m of this.members) {
      if (m.proc.exitCode !== null || m.proc.signalCode) continue;
      try {
        const s = await this.call("/v3/maintenance/status", {}, m);
        if (s.leader && s.header && s.leader === s.header.member_id) return m;
      } catch {}
    }
    return null;
  }

  async kill(m) {
    if (m.proc.exitCode === null && !m.proc.signalCode) {
      m.proc.kill("SIGKILL");
      await m.exited;
    }
  }

  // Back into the cluster it left, with its data dir.
  restart(m) {
    const initial = this.members.map((x) => `${x.name}=http://127.0.0.1:${x.peer}`).join(",");
    this.spawn(m, initial, "existing");
  }

  async destroy() {
    for (const m of this.members) await this.kill(m);
    rmSync(this.dir, { recursive: true, force: true });
  }
}

// A TCP relay from a port of its own to an etcd member: a host given
// relays instead of the members can be cut off from etcd (cut: new and
// open connections are held without a byte passing, like a link that is
// down) while its clients still reach it, and healed.
export class Relay {
  constructor(port, bind = "127.0.0.1") {
    this.to = port;
    this.bind = bind;
    this.cutOff = false;
    this.socks = new Set();
    this.conns = 0; // each etcd call of a host is one connection
    this.bytes = 0;
  }

  async start() {
    this.port = await freePort();
    this.server = net.createServer((c) => {
      this.socks.add(c);
      c.on("close", () => this.socks.delete(c));
      c.on("error", () => {});
      if (this.cutOff) return; // held: nothing passes
      this.conns++;
      const up = net.connect(this.to, "127.0.0.1");
      c.on("data", (d) => (this.bytes += d.length));
      up.on("data", (d) => (this.bytes += d.length));
      this.socks.add(up);
      up.on("close", () => { this.socks.delete(up); c.destroy(); });
      up.on("error", () => c.destroy());
      c.on("close", () => up.destroy());
      c.pipe(up);
      up.pipe(c);
    });
    await new Promise((r) => this.server.listen(this.port, this.bind, r));
    return this;
  }

  cut() {
    this.cutOff = true;
    for (const s of this.socks) { s.unpipe?.(); s.pause(); }
  }

  heal() {
    this.cutOff = false;
    for (const s of this.socks) s.destroy();
  }

  close() {
    for (const s of this.socks) s.destroy();
    return new Promise((r) => this.server.close(r));
  }
}

export async function relays(etcd) {
  const v = [];
  for (const m of etcd.members) v.push(await new Relay(m.client, etcd.bind || "127.0.0.1").start());
  return v;
}

// A sandboxd host of the cluster.
export class Host extends Daemon {
  constructor(id, etcd, opts = {}) {
    const endpoints = opts.relays
      ? opts.relays.map((r) => `http://${r.bind}:${r.port}`).join(",") : etcd.endpoints;
    super({ ...opts, args: [
      "--cluster-etcd", endpoints,
      "--host-id", id,
      "--cluster-prefix", `/sandboxd-${process.pid}/`,
      "--cluster-lease-ttl", opts.ttl || "4s",
      "--issuer", ISSUER,
      "--pool-size", "0",
      ...(opts.args || []),
    ] });
    this.id = id;
    this.prefix = `/sandboxd-${process.pid}/`;
    // In a network namespace ({name, addr}): the same daemon, entered into
    // it with nsenter (the net namespace only: mounts, cgroups and /sys
    // stay the host's).
    if (opts.netns) {
      this.opts.addr = opts.netns.addr;
      this.opts.wrap = ["nsenter", `--net=/run/netns/${opts.netns.name}`];
    }
  }

  token(deployment = "dep-a", account = "acct-a") {
    this.minted.set(deployment, account);
    return super.token(deployment, account, ["--issuer", ISSUER]);
  }

  // Cluster hosts sign with the same identity keys: the first one's,
  // copied before this one starts. The credential key stays each host's
  // own: a credential is good only on the host that minted it.
  shareKeysFrom(other) {
    const from = join(other.state, "keys"), to = join(this.state, "keys");
    mkdirSync(to, { recursive: true, mode: 0o700 });
    for (const f of readdirSync(from))
      if (f !== "credential.key") copyFileSync(from + "/" + f, join(to, f));
  }

  // Until this host serves (it answers 503 until it holds a lease and has
  // reconciled its sandboxes under it).
  async waitServing(ms = 30000) {
    const tok = this.token("dep-probe", "acct-a");
    const t0 = Date.now();
    for (;;) {
      const r = await fetch(`${this.url}/v1/sandboxes`, { headers: { authorization: `Bearer ${tok}` } })
        .catch(() => null);
      if (r && r.status === 200) return Date.now() - t0;
      if (Date.now() - t0 > ms) throw new Error(`${this.id} not serving:\n${this.log.slice(-4000)}`);
      await sleep(50);
    }
  }

  // Kill every process of this host's sandboxes (cgroup.kill of its subtree).
  killSandboxes() {
    let inst;
    try { inst = readFileSync(join(this.state, "instance-id"), "utf8").trim(); } catch { return 0; }
    let n = 0;
    for (const h of readdirSync("/sys/fs/cgroup")) {
      const base = join("/sys/fs/cgroup", h, "sandboxd", inst);
      if (!existsSync(base)) continue;
      for (const e of readdirSync(base, { withFileTypes: true })) {
        if (!e.isDirectory()) continue;
        try { writeFileSync(join(base, e.name, "cgroup.kill"), "1"); n++; } catch {}
      }
    }
    try { writeFileSync(join("/sys/fs/cgroup/sandboxd", inst, "cgroup.kill"), "1"); } catch {}
    return n;
  }
}

// A bridge and a network namespace per host, all named after this test's
// pid, made by it and removed by it (remove()): hosts on 10.254.N.0/24.
export class Net {
  constructor(n) {
    // Not "sbx*": the hosts' own nft tables treat those as sandboxes' links.
    this.tag = `sdc${process.pid}`;
    this.bridge = `${this.tag}b`.slice(0, 15);
    this.ns = Array.from({ length: n }, (_, i) => `${this.tag}h${i + 1}`);
    this.veth = Array.from({ length: n }, (_, i) => `${this.tag}v${i + 1}`.slice(0, 15));
    this.peer = Array.from({ length: n }, (_, i) => `${this.tag}p${i + 1}`.slice(0, 15));
  }

  static usable() {
    try {
      execFileSync("ip", ["-V"], { stdio: "ignore" });
      execFileSync("nsenter", ["--version"], { stdio: "ignore" });
      return process.getuid() === 0;
    } catch {
      return false;
    }
  }

  // A /24 of 10.254.0.0/16 that no address or route of the host touches
  // (other tests make namespaces of their own on other 10.x ranges).
  pickSubnet() {
    const used = execFileSync("ip", ["-4", "-o", "addr"]).toString() + execFileSync("ip", ["-4", "route"]).toString();
    for (let k = 0; k < 250; k++) {
      const n = (process.pid + k) % 250;
      if (!used.includes(` 10.254.${n}.`) && !used.includes(`\n10.254.${n}.`) && !used.startsWith(`10.254.${n}.`)) return n;
    }
    throw new Error("no free 10.254.N.0/24");
  }

  up() {
    const ip = (...a) => execFileSync("ip", a, { stdio: ["ignore", "ignore", "pipe"] });
    const n = this.pickSubnet();
    this.gw = `10.254.${n}.1`;
    this.addrs = this.ns.map((_, i) => `10.254.${n}.${11 + i}`);
    ip("link", "add", this.bridge, "type", "bridge");
    ip("addr", "add", `${this.gw}/24`, "dev", this.bridge);
    ip("link", "set", this.bridge, "up");
    for (let i = 0; i < this.ns.length; i++) {
      ip("netns", "add", this.ns[i]);
      ip("link", "add", this.veth[i], "type", "veth", "peer", "name", this.peer[i]);
      ip("link", "set", this.peer[i], "netns", this.ns[i]);
      ip("link", "set", this.veth[i], "master", this.bridge, "up");
      ip("-n", this.ns[i], "addr", "add", `${this.addrs[i]}/24`, "dev", this.peer[i]);
      ip("-n", this.ns[i], "link", "set", this.peer[i], "up");
      ip("-n", this.ns[i], "link", "set", "lo", "up");
      ip("-n", this.ns[i], "route", "add", "default", "via", this.gw);
    }
    return this;
  }

  // Host i's link, down or up (a partition of it from everything).
  link(i, up) {
    execFileSync("ip", ["link", "set", this.veth[i], up ? "up" : "down"]);
  }

  remove() {
    for (const ns of this.ns) try { execFileSync("ip", ["netns", "del", ns], { stdio: "ignore" }); } catch {}
    try { execFileSync("ip", ["link", "del", this.bridge], { stdio: "ignore" }); } catch {}
  }
}

// n hosts; the one of index relayed (every one: "all") reaches etcd through relays.
// opts.netns: each host in a network namespace of its own, on a bridge
// (when the machine allows it: root, ip, nsenter); else all on loopback.
export async function startCluster(n = 3, opts = {}) {
  const netw = opts.netns && Net.usable() ? new Net(n).up() : null;
  let etcd;
  try {
    etcd = await new Etcd(3, netw ? netw.gw : null).start();
  } catch (e) {
    netw?.remove();
    throw e;
  }
  etcd.net = netw;
  const hosts = [];
  etcd.relays = await relays(etcd);
  try {
    for (let i = 0; i < n; i++) {
      const relayed = opts.relayed === "all" || i === opts.relayed;
      const args = [...(opts.args || []), ...((opts.hostArgs || {})[i] || [])];
      const h = new Host(`h${i + 1}`, etcd, { ...opts, args, relays: relayed ? etcd.relays : null,
        netns: netw ? { name: netw.ns[i], addr: netw.addrs[i] } : null });
      if (i > 0) h.shareKeysFrom(hosts[0]);
      await h.start();
      hosts.push(h);
      await h.waitServing();
    }
  } catch (e) {
    for (const h of hosts) await h.destroy().catch(() => {});
    for (const r of etcd.relays || []) await r.close();
    await etcd.destroy();
    netw?.remove();
    throw e;
  }
  return { etcd, hosts };
}

export async function stopCluster({ etcd, hosts }) {
  for (const h of hosts) {
    await h.destroy().catch(() => {});
    removeCgroups(h.state);
  }
  for (const r of etcd.relays || []) await r.close();
  await etcd.destroy();
  etcd.net?.remove();
}

export { sleep };
