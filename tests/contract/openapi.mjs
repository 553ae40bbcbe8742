// Holds the daemon to its wire contract, docs/openapi.yaml: every answer a
// test gets from a daemon is checked against the operation its request
// matches (method and path, the data plane at the endpoint attach answered
// with): its status must be documented there, its headers and content type
// must be the documented ones and a JSON (or text) body must validate
// against the documented schema.
//
//   import { contract, installFetchValidator } from ".../tests/contract/openapi.mjs";
//   installFetchValidator();       // wraps globalThis.fetch
//   contract.addServer(daemonUrl); // answers from there are checked
//
// A violation is thrown from fetch as a ContractViolation that names the
// method, the URL, the status, the operation and what is wrong. Only
// answers from servers added with addServer (and from the endpoints their
// attach answers name) are checked; anything else passes untouched. Bodies
// other than JSON and text (file downloads) are not read: their status and
// headers are checked, their bytes stream to the caller as they come.
import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import YAML from "yaml";

const here = dirname(fileURLToPath(import.meta.url));
export const SPEC_PATH = resolve(here, "../../docs/openapi.yaml");

const METHODS = ["get", "put", "post", "delete", "options", "head", "patch", "trace"];
const SCHEMAS_ID = "https://sandboxd.invalid/openapi/schemas";
const EXCERPT = 400;

export class ContractViolation extends Error {
  constructor(message, details) {
    super(message);
    this.name = "ContractViolation";
    Object.assign(this, details);
  }
}

const escapeRe = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

// "{origin}/v1/sandboxes/{name}" + "/processes/{processId}" as a regex on
// origin + path: a variable at the very start is the origin, a `{path}`
// at the very end the rest of the path (slashes too: the port proxy's),
// every other one a path segment.
function templateRegex(base, path) {
  let re = "^";
  const names = [];
  const parts = (base + path).split(/(\{[^}]+\})/);
  parts.forEach((part, i) => {
    const v = /^\{([^}]+)\}$/.exec(part);
    if (!v) re += escapeRe(part);
    else {
      names.push(v[1]);
      const rest = v[1] === "path" && i === parts.length - 2 && parts[i + 1] === "";
      re += i === 1 && parts[0] === "" ? "(https?://[^/]+)" : rest ? "(.+)" : "([^/]+)";
    }
  });
  return { re: new RegExp(re + "$"), names, literal: parts.filter((_, i) => i % 2 === 0).join("").length };
}

function mediaEssence(ct) {
  return (ct || "").split(";")[0].trim().toLowerCase();
}

function sameMediaType(key, actual) {
  if (key === "*/*") return true; // any answer at all (what a sandbox's server sends through the port proxy)
  const norm = (s) => s.toLowerCase().replace(/\s+/g, "");
  return key.includes(";") ? norm(key) === norm(actual || "") : mediaEssence(key) === mediaEssence(actual);
}

const isJson = (ct) => /^application\/(.+\+)?json$/.test(mediaEssence(ct));
const isText = (ct) => mediaEssence(ct).startsWith("text/");

function redact(text) {
  return text.replace(/(Bearer\s+)[^\s"\\]+/gi, "$1<redacted>");
}

function pointerGet(obj, pointer) {
  let cur = obj;
  for (const raw of pointer.split("/").slice(1)) {
    const key = raw.replace(/~1/g, "/").replace(/~0/g, "~");
    if (cur === null || typeof cur !== "object") return undefined;
    cur = cur[key];
  }
  return cur;
}

// Schemas refer to each other as "#/components/schemas/X": point them at
// the one copy of the components registered with ajv.
function rebase(schema) {
  if (Array.isArray(schema)) return schema.map(rebase);
  if (schema === null || typeof schema !== "object") return schema;
  const out = {};
  for (const [k, v] of Object.entries(schema)) {
    if (k === "$ref" && typeof v === "string" && v.startsWith("#/components/schemas/")) {
      out[k] = `${SCHEMAS_ID}#/$defs/${v.slice("#/components/schemas/".length)}`;
    } else if (k === "$ref" && typeof v === "string" && v.startsWith("#")) {
      throw new Error(`a schema refers to ${v}: only #/components/schemas/ is supported`);
    } else out[k] = rebase(v);
  }
  return out;
}

export class Contract {
  constructor(doc, source = "docs/openapi.yaml") {
    this.doc = doc;
    this.source = source;
    this.origins = new Set();
    this.violations = [];
    this.seen = new Map(); // operationId -> Set of statuses answered
    this.ajv = new Ajv2020({ allErrors: true, strict: true, strictTypes: false, strictTuples: false, strictRequired: false });
    addFormats(this.ajv);
    // OpenAPI's own keywords of the schema object.
    this.ajv.addVocabulary(["example", "discriminator", "xml", "externalDocs"]);
    this.ajv.addSchema({ $id: SCHEMAS_ID, $defs: rebase(doc.components?.schemas ?? {}) });
    this.validators = new Map();
    this.routes = [];
    this.endpointRoutes = [];
    const rootServers = doc.servers?.length ? doc.servers : [{ url: "" }];
    for (const [path, item0] of Object.entries(doc.paths ?? {})) {
      const item = this.deref(item0);
      const ops = {};
      for (const m of METHODS) if (item[m]) ops[m.toUpperCase()] = item[m];
      for (const server of item.servers ?? rootServers) {
        const t = templateRegex(server.url, path);
        this.routes.push({ path, item, ops, ...t });
        if (server["x-endpoint"]) this.endpointRoutes.push({ path, item, ops, from: server["x-endpoint"] });
      }
    }
    this.endpoints = [];
  }

  static load(file = SPEC_PATH) {
    return new Contract(YAML.parse(readFileSync(file, "utf8")), file);
  }

  /** Answers from this server (its origin) are checked from now on. */
  addServer(url) {
    this.origins.add(new URL(url).origin);
  }

  /** A data-plane endpoint (as an attach answered): its routes are the data plane's. */
  addEndpoint(endpoint) {
    const base = String(endpoint).replace(/\/+$/, "");
    if (this.endpoints.some((e) => e.base === base)) return;
    this.origins.add(new URL(base).origin);
    for (const r of this.endpointRoutes) {
      const t = templateRegex(escapeBraces(base), r.path);
      this.endpoints.push({ base, route: { ...r, ...t, literal: t.literal + 1e6 } });
    }
  }

  deref(obj) {
    let cur = obj;
    for (let i = 0; cur && typeof cur === "object" && typeof cur.$ref === "string" && i < 16; i++) {
      if (!cur.$ref.startsWith("#/")) throw new Error(`${this.source}: only local $refs are supported (${cur.$ref})`);
      cur = pointerGet(this.doc, cur.$ref.slice(1));
      if (cur === undefined) throw new Error(`${this.source}: unresolved $ref ${obj.$ref}`);
    }
    return cur;
  }

  validator(schema) {
    let v = this.validators.get(schema);
    if (!v) {
      v = this.ajv.compile(rebase(schema));
      this.validators.set(schema, v);
    }
    return v;
  }

  /**
   * What a request is, for the contract: null when it is not to one of the
   * servers checked; else { kind: "operation" | "otherMethod" | "unknownPath",
   * path, operationId, responses }.
   */
  match(method, url) {
    let u;
    try {
      u = new URL(url);
    } catch {
      return null;
    }
    if (!this.origins.has(u.origin)) return null;
    const target = u.origin + u.pathname;
    const hits = [];
    for (const r of [...this.endpoints.map((e) => e.route), ...this.routes]) {
      const m = r.re.exec(target);
      if (m) hits.push(r);
    }
    hits.sort((a, b) => b.literal - a.literal);
    const M = method.toUpperCase();
    const withMethod = hits.find((r) => r.ops[M]);
    if (withMethod) {
      const op = withMethod.ops[M];
      return { kind: "operation", path: withMethod.path, operationId: op.operationId, responses: op.responses ?? {} };
    }
    const unrouted = this.doc["x-unrouted"] ?? {};
    if (hits.length) return { kind: "otherMethod", path: hits[0].path, operationId: `${M} ${hits[0].path} (not offered)`, responses: unrouted.otherMethod ?? {} };
    return { kind: "unknownPath", path: u.pathname, operationId: "no route", responses: unrouted.unknownPath ?? {} };
  }

  /** The documented response for a status, or undefined. */
  responseFor(match, status) {
    const r = match.responses;
    const raw = r[String(status)] ?? r[`${String(status)[0]}XX`] ?? r.default;
    return raw === undefined ? undefined : this.deref(raw);
  }

  /** Whether the body of this answer is to be read for checking. */
  wantsBody(match, status, contentType) {
    return !!match && (isJson(contentType) || isText(contentType)) && this.responseFor(match, status) !== undefined;
  }

  /**
   * Problems of one answer: [] when it keeps the contract. headers: a
   * Headers; body: its text, when read.
   */
  check(match, status, headers, body) {
    const problems = [];
    const documented = Object.keys(match.responses).join(", ") || "none";
    const resp = this.responseFor(match, status);
    if (!resp) return [`status ${status} is not documented (documented: ${documented})`];
    for (const [name, h0] of Object.entries(resp.headers ?? {})) {
      const h = this.deref(h0);
      const value = headers.get(name);
      if (value === null) {
        if (h.required) problems.push(`header ${name} is missing`);
        continue;
      }
      if (h.schema) {
        const v = this.validator(h.schema);
        if (!v(value)) problems.push(...v.errors.map((e) => `header ${name}${e.instancePath}: ${e.message}`));
      }
    }
    const ct = headers.get("content-type");
    const content = resp.content ?? {};
    const keys = Object.keys(content);
    if (keys.length === 0) {
      if (ct !== null) problems.push(`a response without content has Content-Type ${ct}`);
      const len = headers.get("content-length");
      if (len !== null && len !== "0") problems.push(`a response without content has Content-Length ${len}`);
      if (body) problems.push("a response without content has a body");
      return problems;
    }
    const key = keys.find((k) => sameMediaType(k, ct));
    if (key === undefined) {
      problems.push(`Content-Type ${ct ?? "(none)"} is not documented (documented: ${keys.join(", ")})`);
      return problems;
    }
    const schema = content[key].schema;
    if (!schema || body === undefined) return problems;
    let value = body;
    if (isJson(ct)) {
      try {
        value = JSON.parse(body);
      } catch (e) {
        problems.push(`the body is not JSON: ${e.message}`);
        return problems;
      }
    }
    const v = this.validator(schema);
    if (!v(value)) {
      for (const e of v.errors) {
        const extra = e.params?.additionalProperty ?? e.params?.unevaluatedProperty;
        const allowed = e.params?.allowedValues ? ` (${e.params.allowedValues.join(", ")})` : "";
        problems.push(`body${e.instancePath || ""}: ${e.message}${allowed}${extra ? `: ${extra}` : ""} [schema ${e.schemaPath}]`);
      }
    }
    return problems;
  }

  /** The operations answered so far, with their statuses, and the ones not. */
  coverage() {
    const all = this.routes.flatMap((r) => Object.values(r.ops).map((o) => o.operationId));
    const seen = [...this.seen].map(([id, st]) => `${id} ${[...st].sort().join("/")}`);
    const missing = [...new Set(all)].filter((id) => !this.seen.has(id));
    return `${seen.join(", ")}${missing.length ? `; not seen: ${missing.join(", ")}` : ""}`;
  }

  /**
   * Checks one answer and learns from it (the endpoint an attach names);
   * returns the ContractViolation, recorded, or null.
   */
  observe({ method, url, status, headers, body }) {
    const match = this.match(method, url);
    if (!match) return null;
    const problems = this.check(match, status, headers, body);
    if (match.kind === "operation") {
      if (!this.seen.has(match.operationId)) this.seen.set(match.operationId, new Set());
      this.seen.get(match.operationId).add(status);
    }
    if (problems.length === 0) {
      if (match.kind === "operation" && body !== undefined) {
        for (const r of this.endpointRoutes) {
          const f = r.from;
          if (f.operationId !== match.operationId || String(f.status) !== String(status)) continue;
          const ep = pointerGet(JSON.parse(body), f.pointer);
          if (typeof ep === "string") this.addEndpoint(ep);
          break;
        }
      }
      return null;
    }
    const excerpt = body === undefined ? "" : `\n  body: ${redact(body.length > EXCERPT ? `${body.slice(0, EXCERPT)}...` : body)}`;
    const where = `${method.toUpperCase()} ${url} -> ${status} (${match.operationId})`;
    const v = new ContractViolation(
      `contract violation (docs/openapi.yaml): ${where}\n  ${problems.join("\n  ")}${excerpt}`,
      { method: method.toUpperCase(), url: url, status, operationId: match.operationId, problems },
    );
    this.violations.push(v);
    return v;
  }
}

function escapeBraces(s) {
  // A literal base never holds template variables.
  return s.replace(/[{}]/g, (c) => encodeURIComponent(c));
}

/** The method and URL of fetch's arguments. */
function requestOf(input, init) {
  const isReq = typeof Request !== "undefined" && input instanceof Request;
  const url = isReq ? input.url : String(input instanceof URL ? input.href : input);
  const method = init?.method ?? (isReq ? input.method : "GET");
  return { method, url };
}

/** The contract of this repository, loaded once. */
export const contract = Contract.load();

const WRAPPED = Symbol.for("sandboxd.contract.fetch");

/**
 * A fetch that calls `inner` and checks every answer from a server added to
 * `c`; a violation is thrown (and recorded in c.violations).
 */
export function validatingFetch(inner, c = contract) {
  return async function fetch(input, init) {
    const res = await inner(input, init);
    const { method, url } = requestOf(input, init);
    const match = c.match(method, url);
    if (!match) return res;
    let body;
    if (c.wantsBody(match, res.status, res.headers.get("content-type"))) {
      try {
        body = await res.clone().text();
      } catch {
        // The body did not arrive (the connection went away): the caller
        // learns that from its own read; there is nothing to check.
        return res;
      }
    }
    const v = c.observe({ method, url, status: res.status, headers: res.headers, body });
    if (v) throw v;
    return res;
  };
}

/**
 * Wraps globalThis.fetch (once per process) so that every answer from a
 * server added to `c` is checked; a violation is thrown from fetch. One
 * that a test swallowed still fails the run: at exit every violation is
 * printed and the exit code made non-zero. SANDBOXD_CONTRACT_REPORT=1 also
 * prints which operations were answered, with which statuses.
 */
export function installFetchValidator(c = contract) {
  if (globalThis.fetch[WRAPPED]) return globalThis.fetch[WRAPPED];
  // A benchmark of an older daemon (which answers an older contract).
  if (process.env.SANDBOXD_CONTRACT === "off") return c;
  const fetch = validatingFetch(globalThis.fetch, c);
  fetch[WRAPPED] = c;
  globalThis.fetch = fetch;
  process.on("exit", () => {
    if (process.env.SANDBOXD_CONTRACT_REPORT) process.stderr.write(`# contract coverage: ${c.coverage()}\n`);
    if (c.violations.length === 0) return;
    process.stderr.write(`\n# ${c.violations.length} answer(s) broke the contract in docs/openapi.yaml:\n`);
    for (const v of c.violations) process.stderr.write(`# ${v.message.replace(/\n/g, "\n# ")}\n`);
    process.exitCode = 1;
  });
  return c;
}
