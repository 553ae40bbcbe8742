// The wire contract itself (docs/openapi.yaml) and the validator that holds
// every test's answers to it (tests/contract/openapi.mjs): the document is
// whole, its error codes are the ones the daemon's source emits, a drifted
// answer fails the fetch that got it, and a real daemon's answers pass.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { Daemon, Client, ROOT } from "./lib/daemon.mjs";
import { Contract, ContractViolation, contract, validatingFetch } from "../contract/openapi.mjs";

const doc = contract.doc;
const METHODS = ["get", "put", "post", "delete", "patch", "head", "options", "trace"];

function* operations() {
  for (const [path, item] of Object.entries(doc.paths))
    for (const m of METHODS) if (item[m]) yield { path, method: m, item, op: item[m] };
}

test("the contract is whole: refs resolve, every operation is named and every schema compiles", () => {
  assert.match(doc.openapi, /^3\.1\./);
  const ids = new Set();
  const walk = (node, where) => {
    if (Array.isArray(node)) return node.forEach((n, i) => walk(n, `${where}/${i}`));
    if (!node || typeof node !== "object") return;
    if (typeof node.$ref === "string") assert.doesNotThrow(() => contract.deref(node), `${where}: ${node.$ref}`);
    for (const [k, v] of Object.entries(node)) walk(v, `${where}/${k}`);
  };
  walk(doc, "#");
  for (const { path, method, item, op } of operations()) {
    const where = `${method.toUpperCase()} ${path}`;
    assert.ok(op.operationId, `${where}: no operationId`);
    assert.ok(!ids.has(op.operationId), `${where}: operationId ${op.operationId} twice`);
    ids.add(op.operationId);
    const params = [...(item.parameters ?? []), ...(op.parameters ?? [])].map((p) => contract.deref(p));
    for (const [, name] of path.matchAll(/\{([^}]+)\}/g))
      assert.ok(params.some((p) => p.in === "path" && p.name === name), `${where}: path parameter ${name} undeclared`);
    assert.ok(Object.keys(op.responses).some((s) => /^2/.test(s)), `${where}: no success answer`);
    for (const [status, r0] of Object.entries(op.responses)) {
      const r = contract.deref(r0);
      assert.ok(r.headers?.["Cache-Control"], `${where} ${status}: Cache-Control undocumented`);
      for (const media of Object.values(r.content ?? {}))
        if (media.schema) assert.doesNotThrow(() => contract.validator(media.schema), `${where} ${status}`);
      if (Number(status) >= 400) assert.ok(r.content?.["application/json"], `${where} ${status}: an error without its JSON body`);
    }
  }
  for (const name of Object.keys(doc.components.schemas))
    assert.doesNotThrow(() => contract.validator({ $ref: `#/components/schemas/${name}` }), name);
});

// (status, code) of every error the daemon's source can answer with: the
// calls that make one name both.
function sourceErrors() {
  const found = new Map();
  const files = [];
  const walk = (dir) => {
    for (const e of readdirSync(dir)) {
      const p = join(dir, e);
      if (statSync(p).isDirectory()) walk(p);
      else if (/\.[ch]$/.test(e)) files.push(p);
    }
  };
  walk(join(ROOT, "src"));
  for (const f of files) {
    const text = readFileSync(f, "utf8");
    for (const m of text.matchAll(/api_error\(\s*[^,()]+,\s*(\d{3})\s*,\s*"([a-z_]+)"/g)) found.set(`${m[1]} ${m[2]}`, f);
    // An error body built by hand (408 timeout, with its `written`).
    for (const m of text.matchAll(/api_json\(\s*[^,()]+,\s*(\d{3})\s*,[^;]*?"code"\s*,\s*"([a-z_]+)"/gs)) found.set(`${m[1]} ${m[2]}`, f);
    // The errno-to-HTTP table (src/api/errors.h): X(context, errno, status, "code", reason).
    for (const m of text.matchAll(/\bX\(\s*[A-Z_]+\s*,\s*[A-Z0-9]+\s*,\s*(\d{3})\s*,\s*"([a-z_]+)"/g)) found.set(`${m[1]} ${m[2]}`, f);
    // The fallback written out whole, for when even an error cannot be built.
    for (const m of text.matchAll(/\\"code\\":\\"([a-z_]+)\\"/g)) found.set(`500 ${m[1]}`, f);
  }
  return found;
}

// (status, code) pairs the contract documents anywhere.
function documentedErrors() {
  const pairs = new Set();
  const codesOf = (schema) => {
    const out = [];
    const visit = (s) => {
      if (!s || typeof s !== "object") return;
      const d = s.$ref ? contract.deref(s) : s;
      const code = d.properties?.error?.properties?.code;
      if (code?.enum) out.push(code.enum);
      else if (code?.const) out.push([code.const]);
      for (const sub of d.allOf ?? []) visit(sub);
    };
    visit(schema);
    // The generic Error names no code; its overlay (or a schema of its own) does.
    return out.flat();
  };
  const responsesObjects = [...[...operations()].map((o) => o.op.responses), ...Object.values(doc["x-unrouted"])];
  for (const responses of responsesObjects)
    for (const [status, r0] of Object.entries(responses)) {
      const schema = contract.deref(r0).content?.["application/json"]?.schema;
      if (Number(status) >= 400 && schema) for (const code of codesOf(schema)) pairs.add(`${status} ${code}`);
    }
  return pairs;
}

test("error codes: the ones the daemon's source emits, each under a status documented for it", () => {
  const enumCodes = new Set(doc.components.schemas.ErrorCode.enum);
  const src = sourceErrors();
  const documented = documentedErrors();
  assert.ok(src.size >= 10, `found only ${src.size} error sites in src/: has the way errors are made changed?`);
  for (const [pair, file] of src) {
    const code = pair.split(" ")[1];
    assert.ok(enumCodes.has(code), `${file} answers ${pair}: the code is not in ErrorCode`);
    assert.ok(documented.has(pair), `${file} answers ${pair}: no operation documents that status with that code`);
  }
  const emitted = new Set([...src.keys()].map((p) => p.split(" ")[1]));
  for (const code of enumCodes) assert.ok(emitted.has(code), `ErrorCode lists ${code}, which src/ never answers with`);
});

// A loopback server that answers what it is told, for the validator to judge.
let fake, fakeUrl;
const answers = new Map();
before(async () => {
  fake = http.createServer((req, res) => {
    const a = answers.get(`${req.method} ${req.url.split("?")[0]}`) ?? { status: 404, body: { error: { code: "not_found", message: "no such route" } } };
    const headers = { "cache-control": "no-store", ...(a.headers ?? {}) };
    if (a.body !== undefined && !headers["content-type"]) headers["content-type"] = "application/json";
    res.writeHead(a.status, headers);
    res.end(a.body === undefined ? undefined : typeof a.body === "string" ? a.body : JSON.stringify(a.body));
  });
  await new Promise((r) => fake.listen(0, "127.0.0.1", r));
  fakeUrl = `http://127.0.0.1:${fake.address().port}`;
});
after(() => new Promise((r) => fake.close(r)));

const T = "2026-01-01T00:00:00.000Z";
const record = { name: "x", class: "default", state: "running", createdAt: T, lastActiveAt: T, ceilingAt: T, network: "nat", image: "tiny" };

test("a drifted answer fails the fetch that got it, naming method, path, status and what is wrong", async () => {
  // Its own contract and fetch: these violations are meant, not the run's.
  const c = Contract.load();
  c.addServer(fakeUrl);
  const f = validatingFetch(globalThis.fetch, c);
  const expectViolation = async (method, path, answer, ...what) => {
    answers.set(`${method} ${path}`, answer);
    const err = await f(`${fakeUrl}${path}`, { method }).then(() => null, (e) => e);
    assert.ok(err instanceof ContractViolation, `${method} ${path}: ${err}`);
    assert.equal(err.method, method);
    assert.equal(err.status, answer.status);
    assert.ok(err.message.includes(`${method} ${fakeUrl}${path} -> ${answer.status}`), err.message);
    for (const w of what) assert.match(err.message, w);
    return err;
  };
  answers.set("GET /v1/sandboxes/x", { status: 200, body: record });
  assert.equal((await f(`${fakeUrl}/v1/sandboxes/x`)).status, 200, "a good answer passes");

  const { ceilingAt, network, ...partial } = record;
  await expectViolation("GET", "/v1/sandboxes/x", { status: 200, body: { ...partial, state: "running", extra: 1 } },
    /getSandbox/, /required property 'network'/, /additional properties: extra/, /ceilingAt/);
  await expectViolation("GET", "/v1/sandboxes/y", { status: 200, body: { ...record, state: "paused" } }, /state: must be equal to one of the allowed values/);
  await expectViolation("GET", "/healthz", { status: 201, body: { ok: true } }, /status 201 is not documented/);
  await expectViolation("GET", "/v1/sandboxes", { status: 200, body: "{}", headers: { "content-type": "text/html" } }, /Content-Type text\/html is not documented/);
  await expectViolation("GET", "/v1/sandboxes/z", { status: 404, body: { error: { code: "file_not_found", message: "m" } } }, /code: must be equal to one of the allowed values \(sandbox_not_found\)/);
  await expectViolation("POST", "/v1/sandboxes/x/stop", { status: 204, headers: { "content-type": "application/json" } }, /without content has Content-Type/);
  await expectViolation("GET", "/metrics", { status: 200, body: "<html>", headers: { "content-type": "text/plain; version=0.0.4" } }, /must match pattern/);
  await expectViolation("GET", "/v1/sandboxes", { status: 429, body: { error: { code: "rate_limited", message: "m" } } }, /header Retry-After is missing/);
  await expectViolation("GET", "/healthz", { status: 200, body: { ok: true }, headers: { "cache-control": "max-age=60" } }, /header Cache-Control/);
  await expectViolation("GET", "/no/route", { status: 200, body: {} }, /no route/, /status 200 is not documented/);

  // The data plane, at the endpoint an attach answered with.
  const handle = { name: "x", class: "default", state: "running", endpoint: `${fakeUrl}/elsewhere/x`, headers: { Authorization: "Bearer abc" }, expiresAt: T, network: "nat", image: "tiny" };
  answers.set("POST /v1/sandboxes/x/attach", { status: 200, body: handle });
  await f(`${fakeUrl}/v1/sandboxes/x/attach`, { method: "POST" });
  answers.set("POST /elsewhere/x/exec", { status: 200, body: { exitCode: 0, stdout: "", stderr: "", durationMs: 1, timedOut: false, truncated: false } });
  assert.equal((await f(`${fakeUrl}/elsewhere/x/exec`, { method: "POST" })).status, 200);
  const e = await expectViolation("POST", "/elsewhere/x/exec", { status: 200, body: { exitCode: "0" } }, /\(exec\)/, /exitCode: must be integer/);
  assert.equal(e.operationId, "exec");
  // Credentials in a body are not repeated in the message.
  const r = await expectViolation("POST", "/v1/sandboxes/w/attach", { status: 200, body: { ...handle, state: "stopped" } }, /Bearer <redacted>/);
  assert.ok(!r.message.includes("Bearer abc"));
  assert.equal(c.violations.length, 12);
});

test("a real daemon's answers pass, the data plane matched at the endpoint attach names", async () => {
  const d = await new Daemon({ args: ["--pool-size", "0"] }).start();
  try {
    const c = new Client(d);
    const before = contract.violations.length;
    const h = await c.attach("contract");
    assert.ok(contract.endpoints.some((e) => e.base === h.endpoint), "attach's endpoint was learned");
    const m = contract.match("POST", `${h.endpoint}/exec`);
    assert.equal(m.operationId, "exec");
    assert.equal((await c.exec("contract", ["true"])).exitCode, 0);
    assert.equal((await c.data("contract", "PUT", "/files?path=a.txt", "x", true)).status, 204);
    assert.equal((await c.data("contract", "GET", "/files?path=a.txt")).body, "x");
    assert.equal((await c.data("contract", "GET", "/files/list")).body.entries.length, 1);
    const p = await c.data("contract", "POST", "/processes", { command: ["sleep", "30"], stdin: true });
    assert.equal(p.status, 200);
    assert.equal((await c.data("contract", "POST", `/processes/${p.body.processId}/stdin`, "hi", true)).status, 204);
    assert.equal((await c.data("contract", "POST", `/processes/${p.body.processId}/signal`, { signal: "KILL" })).status, 204);
    assert.equal((await c.data("contract", "GET", `/processes/${p.body.processId}?waitMs=5000`)).status, 200);
    assert.equal((await c.data("contract", "GET", "/processes")).status, 200);
    assert.equal((await c.data("contract", "DELETE", `/processes/${p.body.processId}`)).status, 204);
    assert.equal((await c.data("contract", "PATCH", "/exec")).status, 405);
    assert.equal((await c.control("PUT", "/v1/sandboxes")).status, 405);
    assert.equal((await c.control("GET", "/v1/sandboxes/contract")).status, 200);
    assert.equal((await c.control("POST", "/v1/sandboxes/contract/stop")).status, 204);
    assert.equal((await c.control("GET", "/v1/sandboxes")).status, 200);
    assert.equal((await fetch(`${d.url}/metrics`)).status, 200);
    assert.equal((await c.control("DELETE", "/v1/sandboxes/contract")).status, 204);
    assert.equal(contract.violations.length, before);
  } finally {
    await d.destroy();
  }
});
