// A resolver on loopback, for tests that need "the outside" without sending
// a packet anywhere else: it records every name asked (lower case), answers
// an A query for a name `answers(name)` accepts with 198.18.0.53, says
// NXDOMAIN for the rest, and does not answer at all for a name
// `silent(name)` accepts.
import dgram from "node:dgram";

export async function fakeDns({ answers = () => false, silent = () => false } = {}) {
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
    const hit = answers(name) && q.readUInt16BE(i + 1) === 1;
    const head = Buffer.from([q[0], q[1], 0x81, hit ? 0x80 : 0x83, 0, 1, 0, hit ? 1 : 0, 0, 0, 0, 0]);
    const answer = hit ? Buffer.from([0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 198, 18, 0, 53]) : Buffer.alloc(0);
    sock.send(Buffer.concat([head, question, answer]), rinfo.port, rinfo.address);
  });
  await new Promise((r) => sock.bind(0, "127.0.0.1", r));
  return { port: sock.address().port, seen, close: () => sock.close() };
}
