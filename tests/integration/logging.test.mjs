// The daemon's log lines in each log_format: every line of a run (start,
// attaches, execs, refusals, a stop) is one record a log shipper parses:
// text "time level message", logfmt `ts= level= msg="..."`, or a JSON
// object {ts, level, msg}.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Daemon, Client } from "./lib/daemon.mjs";

async function run(format) {
  const d = await new Daemon({ args: ["--log-format", format, "--log-level", "debug", "--pool-size", "0"] }).start();
  try {
    const c = new Client(d);
    await c.sh("logged", "echo 'a \"quoted\" line'; echo to-stderr >&2");
    await c.control("POST", "/v1/sandboxes/Bad%20Name/attach", {});
    await c.control("GET", "/v1/sandboxes/no-such");
    await c.control("DELETE", "/v1/sandboxes/logged");
  } finally {
    await d.destroy();
  }
  const lines = d.log.split("\n").filter((l) => l.length);
  assert.ok(lines.length >= 3, d.log);
  return lines;
}

const TS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
const LEVEL = /^(debug|info|warn|error)$/;

test("log_format json: every line is one JSON object with ts, level and msg", async () => {
  for (const line of await run("json")) {
    const o = JSON.parse(line);
    assert.deepEqual(Object.keys(o), ["ts", "level", "msg"], line);
    assert.match(o.ts, TS);
    assert.match(o.level, LEVEL);
    assert.equal(typeof o.msg, "string");
  }
});

test("log_format logfmt: every line is ts= level= msg=\"...\"", async () => {
  for (const line of await run("logfmt"))
    assert.match(line, /^ts=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z level=(debug|info|warn|error) msg="(?:[^"\\]|\\.)*"$/, line);
});

test("log_format text (the default): time, level, message", async () => {
  for (const line of await run("text")) {
    const [ts, level] = line.split(" ");
    assert.match(ts, TS, line);
    assert.match(level, LEVEL, line);
  }
});
