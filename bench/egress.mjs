// Benchmark: DNS answer latency through the daemon's policy forwarder,
// against the same resolver asked directly. A resolver on loopback (the
// tests' fake one) answers every name under bench.test with an address of
// its own; one client, a query at a time, p50/p99 of each:
//   direct     the host asks the resolver itself (the peer)
//   forwarder  a nat sandbox without a policy asks its resolv.conf's
//              nameserver: redirect, forwarder, resolver and back
//   policy     a sandbox whose allow list has *.bench.test: the name is
//              checked and its answer's address pinned into the sandbox's
//              nftables set before the answer goes back. Each name is new
//              and its address too, so every answer is a new pin (at most
//              150 of them: past a burst of 200 a sandbox gets 100 new pins
//              a second, SERVFAIL beyond, which the line counts)
//   repeat     the same, one name asked again (its pin is fresh: no nft)
// No packet leaves the machine. Figures, no assertions.
//   node bench/egress.mjs [--n 500]
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { Daemon, Client, HAVE_DEBIAN } from "../tests/integration/lib/daemon.mjs";
import { fakeDns } from "../tests/integration/lib/dns.mjs";

const arg = (k, d) => {
  const i = process.argv.indexOf(`--${k}`);
  return i > 0 ? process.argv[i + 1] : d;
};
const N = Number(arg("n", "500"));
if (!HAVE_DEBIAN) {
  console.error("bench/egress.mjs needs the debian image (python3 in the sandbox)");
  process.exit(77);
}

// One query at a time to SERVER:PORT for NAME (or NAME with a counter),
// microseconds per answer on stdout, one a line.
const CLIENT = `
import socket, struct, sys, time
server, port, n, name, distinct = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5] == "1"
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(5)
out = []
for i in range(n):
    q = ("q%d.%s" % (i, name)) if distinct else name
    pkt = struct.pack(">HHHHHH", i & 0xffff, 0x0100, 1, 0, 0, 0)
    pkt += b"".join(bytes([len(l)]) + l.encode() for l in q.split(".")) + b"\\0" + struct.pack(">HH", 1, 1)
    t = time.perf_counter()
    s.sendto(pkt, (server, port))
    while True:
        a = s.recv(4096)
        if a[:2] == pkt[:2]:
            break
    out.append(int((time.perf_counter() - t) * 1e6))
    if a[3] & 15 == 2:
        out[-1] = -1  # SERVFAIL: over the sandbox's budget of new pins
    elif a[3] & 15:
        sys.exit("rcode %d for %s" % (a[3] & 15, q))
print("\\n".join(map(str, out)))
`;

const pct = (v, p) => v[Math.min(v.length - 1, Math.floor((p / 100) * v.length))];
function report(label, us) {
  const v = us.filter((x) => x >= 0).sort((a, b) => a - b);
  const failed = us.length - v.length;
  console.log(`${label.padEnd(10)} n=${v.length}  p50 ${(pct(v, 50) / 1000).toFixed(3)} ms  p99 ${(pct(v, 99) / 1000).toFixed(3)} ms` +
    (failed ? `  (${failed} SERVFAIL: over the pin budget)` : ""));
  return pct(v, 50);
}

// Every name under bench.test gets an address of its own (198.18.0.0/15).
const addr = (name) => {
  const i = Number(/^q(\d+)\./.exec(name)?.[1] ?? 0) + 1;
  return `198.${18 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}`;
};
const up = await fakeDns({ map: (n) => (n.endsWith(".bench.test") ? addr(n) : null), ttl: 300 });
const d = await new Daemon({
  image: "debian",
  args: ["--network", "nat", "--pool-size", "0", "--dns-upstream", `127.0.0.1:${up.port}`],
}).start();
try {
  const c = new Client(d);
  const inSandbox = async (name, host, distinct, n = N) => {
    const ns = (await c.sh(name, "sed -n 's/^nameserver //p' /etc/resolv.conf | head -1")).stdout.trim();
    const r = await c.exec(name, ["python3", "-c", CLIENT, ns, "53", String(n), host, distinct ? "1" : "0"], { timeoutMs: 600000 });
    if (r.exitCode !== 0) throw new Error(`${name}: ${r.stderr}`);
    return r.stdout.trim().split("\n").map(Number);
  };
  // Not execFileSync: the resolver answers from this process's event loop.
  const { stdout } = await promisify(execFile)("python3", ["-c", CLIENT, "127.0.0.1", String(up.port), String(N), "bench.test", "1"]);
  const direct = stdout.trim().split("\n").map(Number);
  const base = report("direct", direct);
  await c.control("POST", "/v1/sandboxes/open/attach", { network: "nat" });
  const fwd = report("forwarder", await inSandbox("open", "bench.test", true));
  const r = await c.control("POST", "/v1/sandboxes/pol/attach", { network: "nat", egress: { allow: ["*.bench.test"] } });
  if (r.status !== 200) throw new Error(JSON.stringify(r.body));
  const pol = report("policy", await inSandbox("pol", "bench.test", true, Math.min(N, 150)));
  const rep = report("repeat", await inSandbox("pol", "q1.bench.test", false));
  console.log(`p50 vs direct: forwarder x${(fwd / base).toFixed(1)}, policy (new pin each) x${(pol / base).toFixed(1)}, policy (pinned) x${(rep / base).toFixed(1)}`);
} finally {
  await d.destroy();
  up.close();
}
