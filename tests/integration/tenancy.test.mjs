// Tenancy, caps and credentials: one sandboxd, many deployments of many
// accounts, none of which may see, starve or reach another.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import {
  createHmac, createPrivateKey, createPublicKey, generateKeyPairSync, randomBytes, sign as cryptoSign,
} from "node:crypto";
import { mkdtempSync, writeFileSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execFileSync } from "node:child_process";
import { Daemon, Client, sleep, BIN } from "./lib/daemon.mjs";

// ---- identity tokens made here, as an external issuer would ----

const b64u = (v) => Buffer.from(typeof v === "string" ? v : JSON.stringify(v)).toString("base64url");
const nowS = () => Math.floor(Date.now() / 1000);
const claimsFor = (d, sub, acct, extra = {}) => ({ iss: d.url, sub, acct, iat: nowS(), exp: nowS() + 600, ...extra });

function signHS256(key, claims, header = { alg: "HS256", typ: "JWT" }) {
  const signing = `${b64u(header)}.${b64u(claims)}`;
  return `${signing}.${createHmac("sha256", key).update(signing).digest("base64url")}`;
}

function signES256(privateKey, claims) {
  const signing = `${b64u({ alg: "ES256", typ: "JWT" })}.${b64u(claims)}`;
  const sig = cryptoSign("sha256", Buffer.from(signing), { key: privateKey, dsaEncoding: "ieee-p1363" });
  return `${signing}.${sig.toString("base64url")}`;
}

const header = (tok) => JSON.parse(Buffer.from(tok.split(".")[0], "base64url").toString());

// The server's own public key (what an algorithm-confusion attacker knows).
function serverPublicKey(d) {
  const file = readdirSync(join(d.state, "keys")).find((f) => /^signing-[0-9a-f]{16}\.pem$/.test(f));
  const pub = createPublicKey(createPrivateKey(readFileSync(join(d.state, "keys", file))));
  return { kid: file.slice(8, 24), pem: pub.export({ type: "spki", format: "pem" }) };
}

// ---- every secret a test handles; none may come back in a log, /metrics or a body ----

const secrets = new Set();
const keep = (s) => (s && secrets.add(s), s);
const credOf = (h) => keep(h.headers.Authorization.slice("Bearer ".length));

async function call(d, method, path, tok, body) {
  if (tok) keep(tok);
  const r = await fetch(`${d.url}${path}`, {
    method,
    headers: tok ? { authorization: `Bearer ${tok}` } : {},
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  if (tok) assert.ok(!text.includes(tok), `${method} ${path}: the response echoes the bearer`);
  let parsed = null;
  try { parsed = text ? JSON.parse(text) : null; } catch { parsed = text; }
  return { status: r.status, body: parsed, headers: r.headers };
}

// A data-plane call with a handle from attach (or a tampered copy of it).
async function dp(handle, method, path, body, cred = credOf(handle)) {
  keep(cred);
  const r = await fetch(`${handle.endpoint}${path}`, {
    method,
    headers: { authorization: `Bearer ${cred}` },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  assert.ok(!text.includes(cred), "the response echoes the credential");
  let parsed = null;
  try { parsed = text ? JSON.parse(text) : null; } catch { parsed = text; }
  return { status: r.status, body: parsed, headers: r.headers };
}

const sh = (handle, line, cred) => dp(handle, "POST", "/exec", { command: ["/bin/sh", "-c", line] }, cred);

async function attach(d, tok, name) {
  const r = await call(d, "POST", `/v1/sandboxes/${name}/attach`, tok, {});
  assert.equal(r.status, 200, `attach ${name}: ${r.status} ${JSON.stringify(r.body)}`);
  credOf(r.body);
  return r.body;
}

// Delete the given sandboxes (or every one the token lists), waiting out 429s.
async function cleanup(d, tok, names) {
  const retrying = async (fn) => {
    for (let i = 0; i < 20; i++) {
      const r = await fn();
      if (r.status !== 429) return r;
      await sleep(1000 * Number(r.headers.get("retry-after") || 1));
    }
  };
  if (!names) {
    const l = await retrying(() => call(d, "GET", "/v1/sandboxes", tok));
    names = l.status === 200 ? l.body.sandboxes.map((s) => s.name) : [];
  }
  for (const n of names) await retrying(() => call(d, "DELETE", `/v1/sandboxes/${n}`, tok));
}

function expectError(r, status, code) {
  assert.equal(r.status, status, JSON.stringify(r.body));
  assert.equal(r.body.error.code, code);
  assert.equal(typeof r.body.error.message, "string");
}

// Wait until the daemon logged one more "keys reloaded" after a SIGHUP.
async function sighup(d) {
  const before = d.log.split("keys reloaded").length;
  d.proc.kill("SIGHUP");
  for (let i = 0; i < 200 && d.log.split("keys reloaded").length === before; i++) await sleep(10);
  assert.ok(d.log.split("keys reloaded").length > before, "SIGHUP did not reload the keys");
}

// ---- daemons ----

const dir = mkdtempSync(join(tmpdir(), "sandboxd-tenancy-"));
const hsSecret = randomBytes(48).toString("hex");
const hsFile = join(dir, "hs256.secret");
const es = generateKeyPairSync("ec", { namedCurve: "P-256" });
const esFile = join(dir, "es256.pem");
keep(hsSecret);

let d1;   // defaults (cap 20, unknown accounts allowed) + external HS256 and ES256 issuers
let d2;   // short credentials, unknown accounts refused, 1 s token leeway, no external issuer
const daemons = [];

before(async () => {
  writeFileSync(hsFile, hsSecret + "\n", { mode: 0o600 });
  writeFileSync(esFile, es.publicKey.export({ type: "spki", format: "pem" }));
  d1 = await new Daemon({ args: ["--hs256-secret-file", hsFile, "--public-keys", ` ${esFile} ,`] }).start();
  d2 = await new Daemon({
    args: ["--credential-ttl", "2s", "--allow-unknown-accounts", "false", "--token-leeway", "1s"],
  }).start();
  daemons.push(d1, d2);
});

after(async () => {
  for (const d of daemons) await d.destroy();
  rmSync(dir, { recursive: true, force: true });
});

// ---- caps ----

test("the 21st sandbox of a deployment gets 402, the 20 others keep working, a delete frees a place", async () => {
  const c = new Client(d1, "cap", "acct-cap");
  const names = Array.from({ length: 20 }, (_, i) => `cap-${i}`);
  const hs = await Promise.all(names.map((n) => attach(d1, c.tok, n)));

  const r = await call(d1, "POST", "/v1/sandboxes/cap-20/attach", c.tok, {});
  expectError(r, 402, "cap_reached");
  // It created nothing.
  expectError(await call(d1, "GET", "/v1/sandboxes/cap-20", c.tok), 404, "sandbox_not_found");
  const l = await call(d1, "GET", "/v1/sandboxes", c.tok);
  assert.deepEqual(l.body.sandboxes.map((s) => s.name).sort(), [...names].sort());
  // Attaching an existing one always works, and all 20 still run commands.
  assert.equal((await call(d1, "POST", "/v1/sandboxes/cap-7/attach", c.tok, {})).status, 200);
  const rs = await Promise.all(hs.map((h) => sh(h, "hostname")));
  rs.forEach((x, i) => assert.deepEqual([x.status, x.body.stdout], [200, `${names[i]}\n`]));

  // A delete frees its place at once.
  assert.equal((await call(d1, "DELETE", "/v1/sandboxes/cap-0", c.tok)).status, 204);
  await attach(d1, c.tok, "cap-20");
  expectError(await call(d1, "POST", "/v1/sandboxes/cap-21/attach", c.tok, {}), 402, "cap_reached");
  // Another deployment of the same account is not affected by this one's cap.
  const other = new Client(d1, "cap-other", "acct-cap");
  await attach(d1, other.tok, "x");
  await cleanup(d1, other.tok);
  await cleanup(d1, c.tok);
});

test("25 concurrent attaches of new names against a cap of 20 create exactly 20", async () => {
  const c = new Client(d1, "race", "acct-race");
  const rs = await Promise.all(
    Array.from({ length: 25 }, (_, i) => call(d1, "POST", `/v1/sandboxes/r-${i}/attach`, c.tok, {})),
  );
  const ok = rs.filter((r) => r.status === 200);
  const capped = rs.filter((r) => r.status === 402);
  assert.equal(ok.length, 20, rs.map((r) => r.status).join(","));
  assert.equal(capped.length, 5);
  capped.forEach((r) => assert.equal(r.body.error.code, "cap_reached"));
  const l = await call(d1, "GET", "/v1/sandboxes", c.tok);
  assert.equal(l.body.sandboxes.length, 20);
  assert.deepEqual(l.body.sandboxes.map((s) => s.name).sort(), ok.map((r) => r.body.name).sort());
  await cleanup(d1, c.tok);
});

test("the account limit holds across two deployments, also under concurrent attaches", async () => {
  assert.match(d1.cli("account", "enable", "acct-lim", "--limit", "3"), /enabled/);
  assert.match(d1.cli("account", "list"), /^acct-lim\s+yes\s+3$/m);
  const x = new Client(d1, "lim-x", "acct-lim");
  const y = new Client(d1, "lim-y", "acct-lim");
  await attach(d1, x.tok, "a");
  await attach(d1, x.tok, "b");
  await attach(d1, y.tok, "a");
  expectError(await call(d1, "POST", "/v1/sandboxes/b/attach", y.tok, {}), 402, "cap_reached");
  expectError(await call(d1, "POST", "/v1/sandboxes/c/attach", x.tok, {}), 402, "cap_reached");
  assert.equal((await call(d1, "POST", "/v1/sandboxes/a/attach", x.tok, {})).status, 200);
  assert.equal((await call(d1, "DELETE", "/v1/sandboxes/b", x.tok)).status, 204);
  await attach(d1, y.tok, "b");
  await cleanup(d1, x.tok);
  await cleanup(d1, y.tok);

  // Six at once across both deployments: exactly three.
  const rs = await Promise.all(
    Array.from({ length: 6 }, (_, i) => call(d1, "POST", `/v1/sandboxes/p-${i}/attach`, i % 2 ? x.tok : y.tok, {})),
  );
  assert.equal(rs.filter((r) => r.status === 200).length, 3, rs.map((r) => r.status).join(","));
  assert.equal(rs.filter((r) => r.status === 402).length, 3);
  await cleanup(d1, x.tok);
  await cleanup(d1, y.tok);
});

test("reclaiming a sandbox frees its place at once", async () => {
  const d = await new Daemon({ args: ["--max-per-deployment", "1", "--max-age", "1s"] }).start();
  daemons.push(d);
  const c = new Client(d, "reclaim", "acct-r");
  await attach(d, c.tok, "first");
  expectError(await call(d, "POST", "/v1/sandboxes/second/attach", c.tok, {}), 402, "cap_reached");
  let gone = false;
  for (let i = 0; i < 100 && !gone; i++) {
    gone = (await call(d, "GET", "/v1/sandboxes/first", c.tok)).status === 404;
    if (!gone) await sleep(50);
  }
  assert.ok(gone, "not reclaimed after max_age");
  await attach(d, c.tok, "second");
  await cleanup(d, c.tok);
});

// ---- accounts ----

test("a disabled account gets 409 on attach, get, list, stop and delete, telling nothing about names", async () => {
  const c = new Client(d1, "off", "acct-off");
  const h = await attach(d1, c.tok, "exists");
  d1.cli("account", "disable", "acct-off");
  assert.match(d1.cli("account", "list"), /^acct-off\s+no\s/m);
  const verbs = [
    ["POST", (n) => `/v1/sandboxes/${n}/attach`, {}],
    ["GET", (n) => `/v1/sandboxes/${n}`],
    ["POST", (n) => `/v1/sandboxes/${n}/stop`],
    ["DELETE", (n) => `/v1/sandboxes/${n}`],
  ];
  for (const [m, path, body] of verbs) {
    const a = await call(d1, m, path("exists"), c.tok, body);
    const b = await call(d1, m, path("never-was"), c.tok, body);
    const bad = await call(d1, m, path("-bad-name"), c.tok, body);
    expectError(a, 409, "not_enabled");
    assert.deepEqual(b.body, a.body, `${m} ${path("x")}`);
    assert.deepEqual(bad.body, a.body, `${m} ${path("x")} with a bad name`);
  }
  expectError(await call(d1, "GET", "/v1/sandboxes", c.tok), 409, "not_enabled");
  // Authentication still comes first.
  expectError(await call(d1, "GET", "/v1/sandboxes/exists"), 401, "unauthenticated");
  // Nothing was stopped or deleted; enabling again gives it back.
  d1.cli("account", "enable", "acct-off");
  const g = await call(d1, "GET", "/v1/sandboxes/exists", c.tok);
  assert.equal(g.body.state, "running");
  assert.equal((await sh(h, "echo still")).body.stdout, "still\n");
  await cleanup(d1, c.tok);
});

test("with unknown accounts refused, only enabled accounts get sandboxes", async () => {
  const c = new Client(d2, "known", "acct-new");
  expectError(await call(d2, "GET", "/v1/sandboxes", c.tok), 409, "not_enabled");
  expectError(await call(d2, "POST", "/v1/sandboxes/x/attach", c.tok, {}), 409, "not_enabled");
  d2.cli("account", "enable", "acct-new");
  assert.equal((await call(d2, "GET", "/v1/sandboxes", c.tok)).status, 200);
  await attach(d2, c.tok, "x");
  await cleanup(d2, c.tok);
});

test("a deployment's sandboxes are out of reach of a token naming it under another account", async () => {
  const owner = new Client(d1, "bound", "acct-1");
  const h = await attach(d1, owner.tok, "mine");
  const intruder = d1.token("bound", "acct-2");
  expectError(await call(d1, "GET", "/v1/sandboxes/mine", intruder), 404, "sandbox_not_found");
  expectError(await call(d1, "POST", "/v1/sandboxes/mine/stop", intruder), 404, "sandbox_not_found");
  expectError(await call(d1, "DELETE", "/v1/sandboxes/mine", intruder), 404, "sandbox_not_found");
  assert.deepEqual((await call(d1, "GET", "/v1/sandboxes", intruder)).body.sandboxes, []);
  expectError(await call(d1, "POST", "/v1/sandboxes/mine/attach", intruder, {}), 401, "unauthenticated");
  expectError(await call(d1, "POST", "/v1/sandboxes/other/attach", intruder, {}), 401, "unauthenticated");
  assert.equal((await sh(h, "echo ok")).body.stdout, "ok\n");
  const tok = d1.token("bound", "acct-1");
  assert.equal((await call(d1, "GET", "/v1/sandboxes", tok)).body.sandboxes.length, 1);
  await cleanup(d1, tok);
});

// ---- data-plane credentials ----

// Replace the character at i with another one of the base64url alphabet.
function editByte(s, i) {
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  const ch = s[i] === "A" ? "B" : "A";
  assert.ok(alphabet.includes(ch));
  return s.slice(0, i) + ch + s.slice(i + 1);
}

test("a credential is useless for another sandbox, another deployment, after delete, or edited", async () => {
  const x = new Client(d1, "cred-x", "acct-cred");
  const y = new Client(d1, "cred-y", "acct-cred");
  const a = await attach(d1, x.tok, "a");
  const b = await attach(d1, x.tok, "b");
  const twinX = await attach(d1, x.tok, "twin");
  const twinY = await attach(d1, y.tok, "twin");
  const onlyY = await attach(d1, y.tok, "only-y");
  await sh(twinY, "echo y > /workspace/owner");
  await sh(twinX, "echo x > /workspace/owner");
  const probe = "touch /workspace/ran";

  // A's credential on B's endpoint.
  expectError(await sh(b, probe, credOf(a)), 401, "unauthenticated");
  // X's credential on a sandbox only Y has.
  expectError(await sh(onlyY, probe, credOf(twinX)), 401, "unauthenticated");
  // X's credential on the endpoint both deployments' "twin" share reaches X's only.
  assert.equal((await sh(twinY, "cat /workspace/owner", credOf(twinX))).body.stdout, "x\n");
  // Edited by a byte anywhere: prefix, payload (deployment, name, id, expiry), MAC.
  const cred = credOf(a);
  const dot = cred.lastIndexOf(".");
  const spots = [0, 6, 7, 12, 20, dot - 1, dot + 1, dot + 10, cred.length - 1];
  for (const i of spots) expectError(await sh(a, probe, editByte(cred, i)), 401, "unauthenticated");
  expectError(await sh(a, probe, cred.slice(0, -1)), 401, "unauthenticated");
  expectError(await sh(a, probe, cred + "A"), 401, "unauthenticated");
  // An identity token is no credential, and a credential is no identity token.
  expectError(await sh(a, probe, x.tok), 401, "unauthenticated");
  expectError(await call(d1, "GET", "/v1/sandboxes", cred), 401, "unauthenticated");

  // After delete: X's old twin credential finds nothing, even though Y's twin
  // lives on at the same endpoint, and a new "twin" of X is a new incarnation.
  assert.equal((await call(d1, "DELETE", "/v1/sandboxes/twin", x.tok)).status, 204);
  expectError(await sh(twinX, probe, credOf(twinX)), 401, "credential_stale");
  const twinX2 = await attach(d1, x.tok, "twin");
  expectError(await sh(twinX2, probe, credOf(twinX)), 401, "credential_stale");

  // Nothing ran anywhere.
  for (const h of [a, b, twinX2]) assert.equal((await sh(h, "ls /workspace")).body.stdout.includes("ran"), false);
  for (const h of [twinY, onlyY]) assert.equal((await sh(h, "ls /workspace")).body.stdout.includes("ran"), false);
  assert.equal((await sh(twinY, "cat /workspace/owner")).body.stdout, "y\n");
  await cleanup(d1, x.tok);
  await cleanup(d1, y.tok);
});

test("a credential expires after credential_ttl; re-attaching mints a new one", async () => {
  d2.cli("account", "enable", "acct-ttl");
  const c = new Client(d2, "ttl", "acct-ttl");
  const h = await attach(d2, c.tok, "short");
  const left = Date.parse(h.expiresAt) - Date.now();
  assert.ok(left > 1000 && left <= 2100, `expiresAt is ${left} ms away`);
  assert.equal((await sh(h, "true")).status, 200);
  await sleep(Date.parse(h.expiresAt) - Date.now() + 100);
  expectError(await sh(h, "touch /workspace/ran"), 401, "unauthenticated");
  const h2 = await attach(d2, c.tok, "short");
  assert.equal((await sh(h2, "ls /workspace")).body.stdout, "");
  await cleanup(d2, c.tok);
});

// ---- identity tokens ----

test("external issuers: an HS256 secret and an ES256 public key are accepted when configured", async () => {
  const hs = keep(signHS256(hsSecret, claimsFor(d1, "ext-hs", "acct-ext")));
  const h = await attach(d1, hs, "via-hs256");
  assert.equal((await sh(h, "echo hi")).body.stdout, "hi\n");
  const esTok = keep(signES256(es.privateKey, claimsFor(d1, "ext-es", "acct-ext")));
  assert.equal((await call(d1, "GET", "/v1/sandboxes", esTok)).status, 200);
  await cleanup(d1, hs);
  // The same tokens for a server without those keys: refused.
  d2.cli("account", "enable", "acct-ext");
  for (const t of [signHS256(hsSecret, claimsFor(d2, "ext-hs", "acct-ext")),
    signES256(es.privateKey, claimsFor(d2, "ext-es", "acct-ext"))])
    expectError(await call(d2, "GET", "/v1/sandboxes", t), 401, "unauthenticated");
  // An ES256 token signed by some other key: refused.
  const other = generateKeyPairSync("ec", { namedCurve: "P-256" });
  expectError(await call(d1, "GET", "/v1/sandboxes", signES256(other.privateKey, claimsFor(d1, "e", "a"))),
    401, "unauthenticated");
});

test("alg none, algorithm confusion, wrong iss, expired and not-yet-valid tokens are refused", async () => {
  const refused = async (d, tok, why) => {
    const r = await call(d, "GET", "/v1/sandboxes", tok);
    assert.equal(r.status, 401, `${why}: ${r.status} ${JSON.stringify(r.body)}`);
    assert.equal(r.body.error.code, "unauthenticated");
  };
  const ok = async (d, tok, why) => assert.equal((await call(d, "GET", "/v1/sandboxes", tok)).status, 200, why);
  d2.cli("account", "enable", "acct-t");
  for (const d of [d1, d2]) {
    const cl = claimsFor(d, "tok", "acct-t");
    const none = `${b64u({ alg: "none", typ: "JWT" })}.${b64u(cl)}`;
    await refused(d, `${none}.`, "alg none");
    await refused(d, `${none}.${b64u("x")}`, "alg none with a signature");
    await refused(d, `${b64u({ alg: "None" })}.${b64u(cl)}.${b64u("x")}`, "alg None");
    // HS256 keyed with the server's own public key (as PEM and as DER), with and without its kid.
    const pub = serverPublicKey(d);
    const der = createPublicKey(pub.pem).export({ type: "spki", format: "der" });
    for (const key of [pub.pem, der]) {
      await refused(d, signHS256(key, cl, { alg: "HS256", typ: "JWT", kid: pub.kid }), "HS256 with the public key");
      await refused(d, signHS256(key, cl), "HS256 with the public key, no kid");
    }
    // The server's own token, re-labelled.
    const own = d.token("tok", "acct-t");
    const [, p, s] = own.split(".");
    await refused(d, `${b64u({ alg: "HS256", typ: "JWT", kid: header(own).kid })}.${p}.${s}`, "EdDSA relabelled HS256");
    await refused(d, `${b64u({ alg: "ES256", typ: "JWT", kid: header(own).kid })}.${p}.${s}`, "EdDSA relabelled ES256");
    await ok(d, own, "own token");
    // Wrong iss, from our own key.
    const bad = new Daemon({ state: d.state });
    bad.port = d.port + 1;
    await refused(d, bad.token("tok", "acct-t"), "own key, wrong iss");
  }
  // HS256 keyed with the ES256 public key d1 is configured with.
  const esPem = es.publicKey.export({ type: "spki", format: "pem" });
  await refused(d1, signHS256(esPem, claimsFor(d1, "tok", "acct-t")), "HS256 with the ES256 public key");
  // Times and iss, with the external HS256 issuer of d1 (default 60 s leeway).
  const hs = (extra) => signHS256(hsSecret, claimsFor(d1, "tok", "acct-t", extra));
  await ok(d1, hs({}), "valid");
  await refused(d1, hs({ iss: "http://127.0.0.1:1" }), "wrong iss");
  await refused(d1, hs({ iss: `${d1.url}/` }), "iss with a trailing slash");
  await refused(d1, hs({ exp: nowS() - 3600, iat: nowS() - 7200 }), "expired");
  await refused(d1, hs({ exp: undefined }), "no exp");
  await refused(d1, hs({ nbf: nowS() + 3600 }), "nbf in the future");
  await refused(d1, hs({ iat: nowS() + 3600 }), "iat in the future");
  await refused(d1, hs({ sub: "../etc" }), "bad sub");
  await refused(d1, hs({ acct: undefined }), "no acct");
  await ok(d1, hs({ exp: nowS() - 10, iat: nowS() - 600 }), "expired 10 s ago, within the 60 s leeway");
  await ok(d1, hs({ nbf: nowS() + 10 }), "valid in 10 s, within the 60 s leeway");
  await refused(d1, hs({}).replace(/.$/, (ch) => (ch === "A" ? "B" : "A")), "signature edited");
  // d2 runs with a 1 s leeway: 10 s past exp is expired there.
  const own2 = d2.token("tok", "acct-t", ["--ttl", "1s"]);
  await ok(d2, own2, "fresh 1 s token");
  const { exp } = JSON.parse(Buffer.from(own2.split(".")[1], "base64url").toString());
  await sleep((exp + 1) * 1000 + 50 - Date.now());
  await refused(d2, own2, "1 s past exp, 1 s leeway");
});

test("key rotation: old tokens stay valid until the old key is removed", async () => {
  const d = await new Daemon().start();
  daemons.push(d);
  const t1 = d.token("rot", "acct-rot");
  const kid1 = header(t1).kid;
  assert.match(kid1, /^[0-9a-f]{16}$/);
  const kid2 = d.cli("key", "rotate").trim();
  assert.match(kid2, /^[0-9a-f]{16}$/);
  assert.notEqual(kid2, kid1);
  await sighup(d);
  assert.equal((await call(d, "GET", "/v1/sandboxes", t1)).status, 200, "old token after rotation");
  const t2 = d.token("rot", "acct-rot");
  assert.equal(header(t2).kid, kid2);
  assert.equal((await call(d, "GET", "/v1/sandboxes", t2)).status, 200, "new token");
  // The current key cannot be removed; the old one can.
  assert.throws(() => execFileSync(BIN, ["key", "remove", kid2, "--state", d.state], { stdio: "pipe" }), /current/);
  d.cli("key", "remove", kid1);
  assert.doesNotMatch(d.cli("key", "list"), new RegExp(kid1));
  await sighup(d);
  expectError(await call(d, "GET", "/v1/sandboxes", t1), 401, "unauthenticated");
  assert.equal((await call(d, "GET", "/v1/sandboxes", t2)).status, 200);
});

test("local_issuer off: only the external issuer's tokens are accepted", async () => {
  const d = await new Daemon({ args: ["--local-issuer", "false", "--hs256-secret-file", hsFile] }).start();
  daemons.push(d);
  expectError(await call(d, "GET", "/v1/sandboxes", d.token("li", "acct-li")), 401, "unauthenticated");
  const tok = keep(signHS256(hsSecret, claimsFor(d, "li", "acct-li")));
  const h = await attach(d, tok, "x");
  assert.equal((await sh(h, "echo ok")).body.stdout, "ok\n");
  await cleanup(d, tok);
  // And a daemon that would accept no token at all refuses to start.
  const none = new Daemon({ args: ["--local-issuer", "false"] });
  await assert.rejects(none.start(), /no identity token could be accepted/);
  rmSync(none.state, { recursive: true, force: true });
});

// ---- rate limit ----

test("rate limit: a flooding deployment gets 429 with Retry-After, another is still served", async () => {
  const d = await new Daemon({ args: ["--rate-limit", "5", "--rate-burst", "5"] }).start();
  daemons.push(d);
  const noisy = new Client(d, "noisy", "acct-n");
  const quiet = new Client(d, "quiet", "acct-q");
  const hn = await attach(d, noisy.tok, "n");

  const flood = await Promise.all(Array.from({ length: 20 }, () => call(d, "GET", "/v1/sandboxes", noisy.tok)));
  const limited = flood.filter((r) => r.status === 429);
  assert.ok(limited.length >= 10, `only ${limited.length} of 20 refused`);
  assert.ok(flood.every((r) => r.status === 200 || r.status === 429));
  for (const r of limited) {
    assert.equal(r.body.error.code, "rate_limited");
    assert.match(r.headers.get("retry-after"), /^[1-9][0-9]*$/);
  }
  // The data plane counts too.
  const execs = await Promise.all(Array.from({ length: 10 }, () => sh(hn, "true")));
  assert.ok(execs.some((r) => r.status === 429), execs.map((r) => r.status).join(","));

  // Meanwhile another deployment is served.
  assert.equal((await call(d, "GET", "/v1/sandboxes", quiet.tok)).status, 200);
  const hq = await attach(d, quiet.tok, "q");
  assert.equal((await sh(hq, "echo served")).body.stdout, "served\n");

  // After Retry-After the flooder is served again.
  const wait = Number(limited[0].headers.get("retry-after"));
  await sleep(wait * 1000 + 100);
  assert.equal((await sh(hn, "echo back")).body.stdout, "back\n");
  const m = await (await fetch(`${d.url}/metrics`)).text();
  assert.ok(Number(m.match(/^sandboxd_http_rate_limited_total (\d+)$/m)[1]) >= limited.length);
  await cleanup(d, noisy.tok);
  await cleanup(d, quiet.tok);
});

// ---- no secret in a log line, /metrics or an error body ----

test("no token, credential or secret appears in the logs or /metrics", async () => {
  assert.ok(secrets.size > 20);
  // Look for the signature and payload parts too: a log of one half is a leak.
  const needles = [];
  for (const s of secrets) {
    needles.push(s);
    for (const part of s.split(".")) if (part.length >= 16 && !/^eyJ/.test(part)) needles.push(part);
  }
  needles.push(hsSecret);
  for (const d of daemons) {
    const metrics = await (await fetch(`${d.url}/metrics`)).text();
    for (const n of needles) {
      assert.ok(!d.log.includes(n), `a secret is in the log of ${d.url}`);
      assert.ok(!metrics.includes(n), `a secret is in /metrics of ${d.url}`);
    }
  }
});
