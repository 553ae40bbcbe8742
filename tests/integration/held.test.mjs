// Many requests held at once by one daemon: 1500 long polls (waitMs 20000)
// over five sandboxes and 100 streams of the same processes, each on a
// connection of its own. While they are all held none is dropped, the
// daemon still runs an exec and opens a new stream, and output reaches the
// held streams and polls; once they are closed it still answers and holds
// no more threads than it did before them (a leak, not a speed, is what
// that last check is about). Nothing here is timed but the bounds.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import net from "node:net";
import { readFileSync } from "node:fs";
import { Daemon, Client, until, sleep } from "./lib/daemon.mjs";
import { startReader } from "./lib/stream.mjs";

const POLLS = 1500;
const STREAMS = 100;
const BOXES = 5;
const WAIT_MS = 20000;
const LINE = "held-line";
const THREAD_SLACK = 8;

const d = new Daemon({ args: ["--network", "none", "--pool-size", "0",
  "--max-connections", "3000", "--max-connections-per-ip", "3000"] });
const polls = [];
const readers = [];
after(async () => {
  for (const p of polls) p.close();
  for (const r of readers) r.abort();
  await d.destroy();
});

const threads = () => Number(/^Threads:\s+(\d+)/m.exec(readFileSync(`/proc/${d.proc.pid}/status`, "utf8"))[1]);
async function requestsSeen() {
  const text = await (await fetch(`${d.url}/metrics`)).text();
  return Number(/^sandboxd_http_requests_total (\d+)$/m.exec(text)[1]);
}
const within = (p, ms, what) => Promise.race([p, sleep(ms).then(() => { throw new Error(`${what}: nothing within ${ms} ms`); })]);

// A long poll on a connection of its own (no agent: nothing shares or keeps
// it). `answer` once it is answered, `error` if it broke first.
function holdPoll(handle, name, id) {
  const p = { name, answer: null, error: null, closing: false };
  p.req = http.get(new URL(`${handle.endpoint}/processes/${id}?waitMs=${WAIT_MS}`), { agent: false, headers: handle.headers });
  p.req.on("response", (res) => {
    let body = "";
    res.setEncoding("utf8");
    res.on("data", (s) => (body += s));
    res.on("end", () => (p.answer = { status: res.statusCode, body }));
    res.on("error", (e) => (p.error ??= e));
  });
  p.req.on("error", (e) => {
    if (!p.closing) p.error ??= e;
  });
  p.held = () => !p.answer && !p.error && p.req.socket !== null && !p.req.socket.destroyed;
  p.close = () => {
    p.closing = true;
    p.req.destroy();
  };
  return p;
}

const summary = (xs) => {
  const seen = new Map();
  for (const p of xs) {
    const k = p.error ? `error ${p.error.code || p.error.message}` : p.answer ? `answered ${p.answer.status}` : p.held() ? "held" : "not connected";
    seen.set(k, (seen.get(k) || 0) + 1);
  }
  return [...seen].map(([k, n]) => `${n} ${k}`).join(", ");
};

test(`${POLLS} long polls and ${STREAMS} streams held at once: none dropped, the daemon answers meanwhile, and lets go of them after`, { timeout: 58000 }, async () => {
  await d.start();
  const c = new Client(d);
  const names = Array.from({ length: BOXES }, (_, i) => `held-${i}`);
  const ids = {};
  for (const name of names) {
    await c.sh(name, "true");
    ids[name] = (await c.spawn(name, ["sh", "-c", 'read line; echo "$line"; exec sleep 3600'], { stdin: true })).processId;
  }
  assert.equal((await c.sh("other", "true")).exitCode, 0);
  await sleep(500);
  const threadsBefore = threads();

  const seen0 = await requestsSeen();
  for (let i = 0; i < POLLS; i++) {
    const name = names[i % BOXES];
    polls.push(holdPoll(c.handles.get(name), name, ids[name]));
  }
  for (let i = 0; i < STREAMS; i++) {
    const name = names[i % BOXES];
    const rd = startReader(c, name, ids[name], { ownConnection: true, deadlineMs: 55000 });
    rd.name = name;
    readers.push(rd);
  }
  // Every request's head has reached the daemon: it counts them as they come.
  let arrived = 0;
  await until(async () => (arrived = (await requestsSeen()) - seen0 - 1) >= POLLS + STREAMS, 15000).catch(() => {});
  const started = await within(Promise.allSettled(readers.map((r) => r.started)), 15000, "the held streams' start frames");
  const seenHere = `(the daemon counted ${arrived} of the ${POLLS + STREAMS} requests, holds ${threads()} threads)`;

  // (a) all of them still open.
  const heldPolls = polls.filter((p) => p.held()).length;
  assert.equal(heldPolls, POLLS, `${heldPolls} of ${POLLS} long polls are still held; the others: ` +
    `${summary(polls.filter((p) => !p.held()))} ${seenHere}`);
  const notStarted = started.filter((x) => x.status === "rejected");
  assert.equal(notStarted.length, 0, `${notStarted.length} of ${STREAMS} held streams got no start frame: ` +
    `${[...new Set(notStarted.map((x) => x.reason?.message))].slice(0, 3).join("; ")} ${seenHere}`);
  const endedStreams = readers.filter((rd) => rd.stream?.end);
  assert.equal(endedStreams.length, 0, `${endedStreams.length} of ${STREAMS} held streams ended: ` +
    `${[...new Set(endedStreams.map((rd) => `${rd.stream.end} ${rd.stream.cutError?.message ?? ""}`))].join("; ")} ${seenHere}`);
  assert.ok(arrived >= POLLS + STREAMS, `all held, yet ${seenHere}`);

  // (b) an exec in another sandbox, (c) a new stream's start frame.
  const r = await c.sh("other", "echo fresh");
  assert.deepEqual({ exitCode: r.exitCode, stdout: r.stdout }, { exitCode: 0, stdout: "fresh\n" }, `exec while held: ${JSON.stringify(r)}`);
  const fresh = startReader(c, names[1], ids[names[1]], { ownConnection: true, deadlineMs: 30000 });
  readers.push(fresh);
  const start = await within(fresh.started, 10000, "a new stream's start frame while held");
  assert.equal(start.processId, ids[names[1]], `the new stream's start frame: ${JSON.stringify(start)}`);
  assert.equal(start.state, "running", `the new stream's start frame: ${JSON.stringify(start)}`);

  // One process prints a line: its streams and polls get it, the rest stay held.
  const target = names[0];
  const w = await c.data(target, "POST", `/processes/${ids[target]}/stdin`, Buffer.from(`${LINE}\n`), true);
  assert.equal(w.status, 204, `stdin write: ${w.status} ${JSON.stringify(w.body)}`);
  const itsStreams = readers.filter((rd) => rd.name === target);
  await until(() => itsStreams.every((rd) => rd.stdout.length >= LINE.length + 1), 10000).catch(() => {});
  const lines = itsStreams.map((rd) => rd.stdout.text());
  assert.ok(lines.every((l) => l === `${LINE}\n`), `the ${itsStreams.length} streams of the process that printed got: ` +
    `${JSON.stringify([...new Set(lines)])}`);
  const itsPolls = polls.filter((p) => p.name === target);
  await until(() => itsPolls.every((p) => p.answer || p.error), 10000).catch(() => {});
  const outs = itsPolls.map((p) => (p.answer ? `${p.answer.status} ${JSON.parse(p.answer.body).stdout ?? p.answer.body}` :
    p.error ? `error ${p.error.code || p.error.message}` : "no answer"));
  assert.ok(outs.every((o) => o === `200 ${LINE}\n`), `the ${itsPolls.length} polls of the process that printed got: ` +
    `${JSON.stringify([...new Set(outs)].slice(0, 5))}`);
  const others = polls.filter((p) => p.name !== target);
  const stillHeld = others.filter((p) => p.held()).length;
  assert.equal(stillHeld, others.length, `${stillHeld} of the ${others.length} other polls are still held: ` +
    `${summary(others.filter((p) => !p.held()))}`);

  // Close them all: the daemon answers, and lets go of what they held.
  for (const p of polls) p.close();
  for (const rd of readers) rd.abort();
  const health = await fetch(`${d.url}/healthz`);
  assert.equal(health.status, 200, `/healthz after the close: ${health.status}`);
  let now = threads();
  await until(() => (now = threads()) <= threadsBefore + THREAD_SLACK, 25000).catch(() => {});
  assert.ok(now <= threadsBefore + THREAD_SLACK, `the daemon holds ${now} threads 25 s after the close, ` +
    `${threadsBefore} before the held requests (slack ${THREAD_SLACK})`);
  assert.equal((await c.sh("other", "echo after")).stdout, "after\n");
});

// Past max_connections a new connection is closed at once, not left
// waiting in the listen queue: of 40 long polls against a limit of 24, each
// either reaches the daemon (counted) or is closed unanswered, and no more
// than 24 reach it; once one held connection goes, a new one is served.
test("past max_connections a connection is refused at once; a freed slot serves the next", async () => {
  const small = new Daemon({ args: ["--network", "none", "--pool-size", "0",
    "--max-connections", "24", "--max-connections-per-ip", "24"] });
  const mine = [];
  const seen = async () => Number((await (await fetch(`${small.url}/metrics`)).text()).match(/^sandboxd_http_requests_total (\d+)$/m)[1]);
  try {
    await small.start();
    const c = new Client(small);
    const h = await c.attach("few");
    const id = (await c.spawn("few", ["sleep", "60"])).processId;
    const base = await seen();
    for (let i = 0; i < 40; i++) mine.push(holdPoll(h, "few", id));
    const closed = () => mine.filter((p) => p.error || (p.req.socket && p.req.socket.destroyed)).length;
    // The metrics request itself counts once per look.
    let looks = 0;
    await until(async () => {
      looks++;
      return closed() + (await seen()) - base - looks >= 40;
    }, 20000).catch(() => assert.fail(`${closed()} of 40 closed; the rest neither reached the daemon nor were refused`));
    const reached = 40 - closed();
    assert.ok(reached <= 24 && reached >= 1, `${reached} of 40 long polls held against max_connections 24`);
    assert.ok(mine.every((p) => !p.answer), "a poll was answered: they hold 20 s");
    mine.find((p) => p.held()).close();
    const r = await until(async () => {
      try {
        return (await fetch(`${small.url}/healthz`)).status === 200;
      } catch {
        return false;
      }
    }, 20000);
    assert.equal(r, true);
  } finally {
    for (const p of mine) p.close();
    await small.destroy();
  }
});
