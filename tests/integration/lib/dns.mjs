// A resolver on loopback, for tests that need "the outside" without sending
// a packet anywhere else: it records every name asked (lower case), answers
// an A query for a name `answers(name)` accepts with 198.18.0.53, says
// NXDOMAIN for the rest, and does not answer at all for a name
// `silent(name)` accepts. With `map`, a name map(name) gives an IPv4
// address for is answered with that address (TTL `ttl`), and its other
// types with no record (NOERROR): the egress tests' view of "the internet".
import dgram from "node:dgram";

export async function fakeDns({ answers = () => false, silent = () => false, map = () => null, ttl = 60 } = {}) {
  const sock = dgram.createSocket("udp4");
  const seen = [];
  sock.on("message", (q, rinfo) => {
    let i = 12;
    const labels = [];
    while (i < q.length && q[i] !== 0) {
      labels.push(q.subarray(i + 1, i + 1 + q[i]).toString());
      i += 1 + q[i];
    }
    const name = labels.join(".").toLowerCase();
    seen.push(name);
    if (silent(name) || i + 5 > q.length) return;
    const question = q.subarray(12, i + 5);
    const mapped = map(name);
    const ip = (mapped || "198.18.0.53").split(".").map(Number);
    const hit = (mapped || answers(name)) && q.readUInt16BE(i + 1) === 1;
    const known = hit || mapped;
    const head = Buffer.from([q[0], q[1], 0x81, known ? 0x80 : 0x83, 0, 1, 0, hit ? 1 : 0, 0, 0, 0, 0]);
    const answer = hit ? Buffer.from([0xc0, 0x0c, 0, 1, 0, 1, ttl >>> 24, (ttl >>> 16) & 255, (ttl >>> 8) & 255, ttl & 255, 0, 4, ...ip]) : Buffer.alloc(0);
    sock.send(Buffer.concat([head, question, answer]), rinfo.port, rinfo.address);
  });
  await new Promise((r) => sock.bind(0, "127.0.0.1", r));
  return { port: sock.address().port, seen, close: () => sock.close() };
}
