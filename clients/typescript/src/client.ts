import type { Readable } from "node:stream";
import {
  SandboxNotEnabledError,
  SandboxRequestError,
  SandboxUnavailableError,
} from "./errors.js";
import { ProcessStream, type StreamOpener } from "./stream.js";
import type {
  AttachOptions,
  CheckpointInfo,
  CheckpointOptions,
  CombinedResult,
  DirEntry,
  EgressEvent,
  EgressPolicy,
  ExecRequest,
  ExecResult,
  GrepMatch,
  ImageInfo,
  PortTarget,
  SandboxPorts,
  Share,
  ShareOptions,
  SnapshotInfo,
  Network,
  NetworkPolicy,
  PollOptions,
  ProcessChunk,
  ProcessOutput,
  ProcessStatus,
  ReadableOptions,
  RunOptions,
  RunResult,
  SandboxHandle,
  SandboxOptions,
  SandboxRecord,
  Signal,
  SpawnRequest,
  StdinOptions,
  StreamExit,
  StreamOptions,
} from "./types.js";

/** Sandbox names, as the server checks them. */
const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
/**
 * Process ids, as the server checks them: a copy of agent_proc_id_valid() in
 * src/agent/proto.h. They go into a URL path; without a dot, an id can never
 * be a `.` or `..` segment that the URL parser would fold.
 */
const PROCESS_ID_RE = /^[A-Za-z0-9-]{1,64}$/;
/** An image name, as the server spells them. */
const IMAGE_RE = /^[a-z0-9][a-z0-9_-]{0,63}$/;
const SIGNALS: ReadonlySet<string> = new Set(["TERM", "KILL", "INT", "HUP", "QUIT", "USR1", "USR2"]);

const DEFAULT_TIMEOUT_SECONDS = 30;
/** Refresh a cached handle this long before it expires (less for short-lived ones). */
const REFRESH_MARGIN_MS = 30_000;
/** How long `run` reads on after killing its process (timeout or abort), for the exit. */
const RUN_DRAIN_MS = 5_000;
/** Longest delay setTimeout keeps; a `timeoutMs` beyond it is no deadline. */
const MAX_TIMER_MS = 2 ** 31 - 1;
/** A terminal's side, in cells, as the server bounds it. */
const PTY_MAX = 4096;
const STREAM_TYPE = "application/vnd.sandboxd.stream";

const encoder = new TextEncoder();

type Reader<T> = (res: Response) => Promise<T>;

interface RequestSpec {
  method: "GET" | "POST" | "PUT" | "DELETE";
  url: string;
  headers: Record<string, string>;
  body?: Uint8Array | string;
  contentType?: string;
  /** Aborts the request besides the client's own timeout (run's `signal`). */
  signal?: AbortSignal;
  /**
   * The client's timeout bounds the wait for the answer's head only, not its
   * body (a stream, which lasts as long as its process).
   */
  untimedBody?: boolean;
  /** The Accept header. Default `application/json`. */
  accept?: string;
}

interface CachedHandle {
  handle: SandboxHandle;
  sandboxClass: string;
  /** The network it has: a re-attach (after a reclaim or delete) asks for it again. */
  network?: Network;
  /** Its image, asked for again the same way. */
  image?: string;
  /** Its egress policy, asked for again the same way (kept up to date by network.set). */
  egress?: EgressPolicy;
  /** Date.now() after which the handle is refreshed before use. */
  refreshAt: number;
}

/**
 * Client of a sandboxd server.
 *
 * Every method takes the sandbox name first. Data-plane methods attach on
 * first use; the handle is cached per name, refreshed before it expires and
 * re-fetched once when the sandbox rejects its credentials (401).
 */
export class SandboxClient {
  readonly #token: string | undefined;
  readonly #serverUrl: string | undefined;
  readonly #timeoutMs: number;
  readonly #fetch: typeof fetch;
  readonly #handles = new Map<string, CachedHandle>();
  readonly #attaching = new Map<string, Promise<CachedHandle>>();
  /** Bumped by stop/delete so an attach already in flight does not re-cache. */
  readonly #generation = new Map<string, number>();

  constructor(options: SandboxOptions = {}) {
    const env = typeof process !== "undefined" ? process.env : {};
    this.#token = nonEmpty(options.identityToken) ?? nonEmpty(env.ASTRO_AUTHZ_TOKEN) ?? nonEmpty(env.SANDBOXD_TOKEN);
    const server = nonEmpty(options.serverUrl) ?? issuerOf(this.#token);
    this.#serverUrl = server === undefined ? undefined : stripSlashes(server);
    const seconds = options.timeoutSeconds ?? DEFAULT_TIMEOUT_SECONDS;
    if (typeof seconds !== "number" || !Number.isFinite(seconds) || seconds <= 0) {
      throw new RangeError("timeoutSeconds must be a positive number");
    }
    this.#timeoutMs = Math.ceil(seconds * 1000);
    this.#fetch = options.fetchImpl ?? ((input, init) => fetch(input, init));
  }

  // ------------------------------------------------------------ control plane

  /** Creates the sandbox on first call, reuses a running one, resumes a suspended one. */
  async attach(name: string, sandboxClass?: string, options?: AttachOptions): Promise<SandboxHandle> {
    checkName(name);
    const entry = await this.#attachNow(name, sandboxClass ?? "default", options?.network, options?.image, options?.egress);
    return copyHandle(entry.handle);
  }

  /**
   * A sandbox's egress policy: `get` the one in force, `set` another (for
   * new connections at once; `{}` removes it), and its `log` of refused
   * connections and DNS answers (oldest first, at most 256).
   */
  readonly network = {
    get: async (name: string): Promise<NetworkPolicy> =>
      toNetworkPolicy(await this.#data(name, (ep) => bareSpec("GET", `${ep}/network`), readJson)),
    set: async (name: string, policy: EgressPolicy): Promise<NetworkPolicy> => {
      const body = await this.#data(name, (ep) => jsonSpec("PUT", `${ep}/network`, policy), readJson);
      const cur = this.#handles.get(name);
      if (cur) cur.egress = egressActive(policy) ? { ...policy } : undefined;
      return toNetworkPolicy(body);
    },
    log: async (name: string): Promise<EgressEvent[]> => {
      const body = await this.#data(name, (ep) => bareSpec("GET", `${ep}/network/log`), readJson);
      const rows = field(body, "events");
      if (!Array.isArray(rows)) throw badResponse("network.log: no events array");
      return rows.map(toEgressEvent);
    },
  };

  /**
   * Saves the sandbox: its processes, their memory and its files (the
   * `gvisor` class; `ns` answers 409 `unsupported_class`). A start after its
   * processes ended (a host reboot) resumes exactly that state, and `fork`
   * starts new sandboxes from it.
   */
  async checkpoint(name: string, options: CheckpointOptions = {}): Promise<CheckpointInfo> {
    if (options.keepRunning !== undefined && typeof options.keepRunning !== "boolean") {
      throw new TypeError("keepRunning: expected a boolean");
    }
    const body = options.keepRunning === undefined ? {} : { keepRunning: options.keepRunning };
    const res = (await this.#data(name, (ep) => jsonSpec("POST", `${ep}/checkpoint`, body), readJson)) as CheckpointInfo;
    return { sizeBytes: res.sizeBytes, durationMs: res.durationMs, createdAt: res.createdAt, running: res.running };
  }

  /**
   * The sandbox's files, at this moment, as a new image `image` (beyond the
   * documented client; every class): the sandbox is frozen meanwhile and
   * runs on. New sandboxes start from it with `attach(..., { image })`.
   * 409 `already_exists` when the name is taken.
   */
  async snapshot(name: string, image: string): Promise<SnapshotInfo> {
    if (typeof image !== "string" || !IMAGE_RE.test(image)) {
      throw new SandboxRequestError(400, "invalid_argument", `invalid image name ${JSON.stringify(image)}`);
    }
    const res = await this.#data(name, (ep) => jsonSpec("POST", `${ep}/snapshot`, { image }), readJson);
    return {
      image: str(field(res, "image")),
      sizeBytes: num(field(res, "sizeBytes")),
      copiedBytes: num(field(res, "copiedBytes")),
      linkedFiles: num(field(res, "linkedFiles")),
      durationMs: num(field(res, "durationMs")),
      createdAt: str(field(res, "createdAt")),
    };
  }

  /**
   * A new sandbox `newName` (same class and network) started from `name`'s
   * last checkpoint: its processes, memory and files as saved, its own name
   * from then on. 409 `no_checkpoint` without one, `already_exists` when
   * `newName` is taken.
   */
  async fork(name: string, newName: string): Promise<SandboxHandle> {
    checkName(newName);
    const body = await this.#data(name, (ep) => jsonSpec("POST", `${ep}/fork`, { name: newName }), readJson);
    const handle = toHandle(body);
    const received = Date.now();
    const lifetime = Math.max(0, Date.parse(handle.expiresAt) - received);
    this.#handles.set(newName, {
      handle,
      sandboxClass: handle.class,
      network: handle.network,
      refreshAt: received + lifetime - Math.min(REFRESH_MARGIN_MS, lifetime / 4),
    });
    return copyHandle(handle);
  }

  /** The sandbox's record. Carries no credentials. */
  async get(name: string): Promise<SandboxRecord> {
    checkName(name);
    const body = await this.#control("GET", `/v1/sandboxes/${encodeURIComponent(name)}`, undefined, readJson);
    return toRecord(body);
  }

  /** Every sandbox of the deployment. */
  async list(): Promise<SandboxRecord[]> {
    const body = await this.#control("GET", "/v1/sandboxes", undefined, readJson);
    const rows = field(body, "sandboxes");
    if (!Array.isArray(rows)) throw badResponse("list: no sandboxes array");
    return rows.map(toRecord);
  }

  /** The images a sandbox can be made from (`attach`'s `image`), beyond the documented client. */
  async images(): Promise<ImageInfo[]> {
    const body = await this.#control("GET", "/v1/images", undefined, readJson);
    const rows = field(body, "images");
    if (!Array.isArray(rows)) throw badResponse("images: no images array");
    return rows.map((r) => ({
      name: str(field(r, "name")),
      sizeBytes: num(field(r, "sizeBytes")),
      builtAt: str(field(r, "builtAt")),
      source: str(field(r, "source")),
      layers: num(field(r, "layers")),
    }));
  }

  /** Suspends the sandbox's compute early. The next use resumes it. */
  async stop(name: string): Promise<void> {
    checkName(name);
    this.#forget(name);
    await this.#control("POST", `/v1/sandboxes/${encodeURIComponent(name)}/stop`, undefined, discard);
    this.#forget(name);
  }

  /** Drops the sandbox and its filesystem. */
  async delete(name: string): Promise<void> {
    checkName(name);
    this.#forget(name);
    await this.#control("DELETE", `/v1/sandboxes/${encodeURIComponent(name)}`, undefined, discard);
    this.#forget(name);
  }

  // ------------------------------------------------------------ commands

  /** Runs argv to completion in one request; output buffered up to 1 MiB per stream. */
  async exec(name: string, request: ExecRequest): Promise<ExecResult> {
    const limit = Math.max(1, this.#timeoutMs - 1000);
    let timeoutMs = request.timeoutMs;
    if (timeoutMs === undefined || !Number.isFinite(timeoutMs) || timeoutMs <= 0) timeoutMs = limit;
    const body = {
      command: request.command,
      user: request.user,
      cwd: request.cwd,
      env: request.env,
      timeoutMs: Math.min(Math.ceil(timeoutMs), limit),
    };
    const res = await this.#data(name, (ep) => jsonSpec("POST", `${ep}/exec`, body), readJson);
    return toExecResult(res);
  }

  /**
   * Runs a shell line with stderr folded into stdout, interleaved as a
   * terminal shows it. Through `run`: the whole output, no cap. Without
   * `timeoutMs` the line is killed after one second under the client's
   * request timeout, as `exec` bounds it.
   */
  async execCombined(name: string, command: string, timeoutMs?: number): Promise<CombinedResult> {
    // `exec 2>&1` first, rather than appending `2>&1`, so the redirection covers
    // every command of a list or pipeline and the shell's own syntax errors.
    let t = timeoutMs;
    if (t === undefined || !Number.isFinite(t) || t <= 0) t = Math.max(1, this.#timeoutMs - 1000);
    const r = await this.run(name, { command: ["/bin/sh", "-c", `exec 2>&1\n${command}`] }, { timeoutMs: Math.ceil(t) });
    return { output: r.stdout, exitCode: r.exitCode ?? -1, truncated: false };
  }

  /**
   * Spawns the command (`lossless`) and reads its output as a stream until it
   * exits: no output cap, nothing dropped, no request timeout.
   */
  async run(name: string, request: SpawnRequest, options: RunOptions = {}): Promise<RunResult> {
    const signal = options.signal;
    signal?.throwIfAborted();
    const proc = await this.spawn(name, { ...request, lossless: true });
    const id = proc.processId;
    const stop = new AbortController();
    const stream = this.stream(name, id, { signal: stop.signal });
    const run = new RunState(proc, stream, options.onOutput);
    // A timeout or an abort kills the process, then reads on to its exit
    // frame for a few seconds at most.
    let ended: "timeout" | "abort" | undefined;
    let killing: Promise<unknown> | undefined;
    let drain: ReturnType<typeof setTimeout> | undefined;
    const halt = (why: "timeout" | "abort"): void => {
      if (ended !== undefined) return;
      ended = why;
      killing = this.signal(name, id, "KILL").then(
        () => undefined,
        // Already exited or gone: nothing left to stop.
        (err: unknown) => (err instanceof SandboxRequestError ? undefined : err),
      );
      drain = setTimeout(() => stop.abort(new DOMException("run: the drain after the kill is over", "TimeoutError")), RUN_DRAIN_MS);
    };
    const onAbort = (): void => halt("abort");
    const t = options.timeoutMs;
    const deadline =
      t !== undefined && Number.isFinite(t) && t >= 0 && t < MAX_TIMER_MS ? setTimeout(() => halt("timeout"), t) : undefined;
    signal?.addEventListener("abort", onAbort, { once: true });
    if (signal?.aborted) halt("abort");
    try {
      try {
        for await (const chunk of stream) run.add(chunk);
        run.exited(await stream.exit);
      } catch (err) {
        // Once killed, a stream that ends short of the exit (the drain ran
        // out, the process is gone) still makes a result.
        if (ended === undefined || !(stop.signal.aborted || err instanceof SandboxRequestError)) throw err;
      } finally {
        clearTimeout(deadline);
        clearTimeout(drain);
        signal?.removeEventListener("abort", onAbort);
      }
      const failed = await killing;
      if (failed !== undefined) throw failed;
    } catch (err) {
      // Do not leave the process running behind a failed run, unless the
      // server is unreachable anyway.
      if (!(err instanceof SandboxUnavailableError)) await this.#reap(name, id);
      throw err;
    }
    await this.#reap(name, id);
    return run.result(ended === "timeout", ended !== undefined);
  }

  /** Starts a command and returns at once; read its output with `poll`. */
  async spawn(name: string, request: SpawnRequest): Promise<ProcessStatus> {
    const body: Record<string, unknown> = { command: request.command, cwd: request.cwd, env: request.env };
    if (request.user !== undefined) body.user = request.user;
    if (request.stdin) body.stdin = true;
    if (request.lossless) body.lossless = true;
    if (request.pty !== undefined) {
      const pty: unknown = request.pty;
      body.pty = checkPty(field(pty, "cols"), field(pty, "rows"));
    }
    const res = await this.#data(name, (ep) => jsonSpec("POST", `${ep}/processes`, body), readJson);
    return toStatus(res);
  }

  /** A process's status and the output after the offsets asked from. */
  async poll(name: string, processId: string, options: PollOptions = {}): Promise<ProcessOutput> {
    return this.#poll(name, processId, options.stdoutFrom ?? 0, options.stderrFrom ?? 0, options.waitMs ?? 0);
  }

  /**
   * Every process the sandbox holds: running, or exited and not yet killed
   * (the server keeps the newest 64 exited records).
   */
  async processes(name: string): Promise<ProcessStatus[]> {
    const body = await this.#data(name, (ep) => bareSpec("GET", `${ep}/processes`), readJson);
    const rows = field(body, "processes");
    if (!Array.isArray(rows)) throw badResponse("processes: no processes array");
    return rows.map(toStatus);
  }

  /** Sends a signal (default TERM) to the process's group. */
  async signal(name: string, processId: string, signal: Signal = "TERM"): Promise<void> {
    const id = checkProcessId(processId);
    if (!SIGNALS.has(signal)) throw new SandboxRequestError(400, "invalid_argument", `unknown signal '${String(signal)}'`);
    await this.#data(name, (ep) => jsonSpec("POST", `${ep}/processes/${id}/signal`, { signal }), discard);
  }

  /** Stops the process if still running, then forgets it. */
  async kill(name: string, processId: string): Promise<void> {
    const id = checkProcessId(processId);
    await this.#data(name, (ep) => bareSpec("DELETE", `${ep}/processes/${id}`), discard);
  }

  /**
   * Writes to the stdin of a process spawned with `stdin: true`; `close` ends it.
   * A process that does not take all of `data` within 10 s: 408 `timeout`,
   * with `written` on the error (the rest was discarded; stdin stays open).
   */
  async stdin(name: string, processId: string, data: string | Uint8Array, options: StdinOptions = {}): Promise<void> {
    const id = checkProcessId(processId);
    const bytes = typeof data === "string" ? encoder.encode(data) : data;
    const query = options.close ? "?close=true" : "";
    await this.#data(name, (ep) => bytesSpec("POST", `${ep}/processes/${id}/stdin${query}`, bytes), discard);
  }

  /**
   * A process's output as it is produced, then its exit (see
   * {@link ProcessStream}). Nothing is sent until the stream is iterated.
   */
  stream(name: string, processId: string, options: StreamOptions = {}): ProcessStream {
    checkName(name);
    const id = checkProcessId(processId);
    const stdoutFrom = offset(options.stdoutFrom ?? 0);
    const stderrFrom = offset(options.stderrFrom ?? 0);
    const reconnect = options.reconnect ?? true;
    if (typeof reconnect !== "boolean") throw new TypeError("reconnect: expected a boolean");
    const open: StreamOpener = (so, se, signal) => {
      const q = new URLSearchParams({ stdoutFrom: String(so), stderrFrom: String(se) });
      return this.#data(
        name,
        (ep) => ({
          ...bareSpec("GET", `${ep}/processes/${id}/stream?${q.toString()}`),
          signal,
          untimedBody: true,
          accept: `${STREAM_TYPE}, application/json`,
        }),
        readStream,
      );
    };
    return new ProcessStream(open, { stdoutFrom, stderrFrom, signal: options.signal, reconnect, readStatus: toStatus });
  }

  /**
   * One stream of a process (`stdout` by default) as a Node `Readable`, from
   * offset `from`: `stream(...).toReadable(...)`.
   */
  readable(name: string, processId: string, options: ReadableOptions = {}): Readable {
    const which = options.stream ?? "stdout";
    if (which !== "stdout" && which !== "stderr") throw new TypeError(`readable: unknown stream ${String(which)}`);
    const from = options.from ?? 0;
    const s = this.stream(name, processId, {
      ...(which === "stdout" ? { stdoutFrom: from } : { stderrFrom: from }),
      signal: options.signal,
    });
    return s.toReadable(which);
  }

  /**
   * Resizes the terminal of a process spawned with `pty` (its foreground
   * group gets SIGWINCH). 409 `invalid_state` for a process without one, or
   * one that has exited.
   */
  async resize(name: string, processId: string, cols: number, rows: number): Promise<void> {
    const id = checkProcessId(processId);
    const size = checkPty(cols, rows);
    await this.#data(name, (ep) => jsonSpec("POST", `${ep}/processes/${id}/resize`, size), discard);
  }

  // ------------------------------------------------------------ ports

  /** One sandbox's ports: `client.ports("thread-42").url(8000)`, `.share(8000, { ttl: "1h" })`. */
  ports(name: string): SandboxPorts {
    checkName(name);
    return {
      url: (port, path) => this.portUrl(name, port, path),
      fetch: (port, path, init) => this.portFetch(name, port, path, init),
      share: (port, options) => this.share(name, port, options),
      unshare: (port, id) => this.unshare(name, port, id),
      shares: () => this.shares(name),
    };
  }

  /**
   * Where TCP `port` inside the sandbox is reached through the server, and
   * the credential to send along (beyond the documented client). `path`
   * (default `/`) is the server's own path, with its query.
   */
  async portUrl(name: string, port: number, path = "/"): Promise<PortTarget> {
    checkName(name);
    const p = portPath(port, path);
    const { handle } = await this.#handle(name);
    return { url: `${handle.endpoint}${p}`, headers: { ...handle.headers } };
  }

  /**
   * fetch() of `path` on TCP `port` inside the sandbox, with the
   * credential (refreshed before it expires; a request is not sent twice,
   * its body may be a stream). The answer is the sandbox's server's,
   * streamed; the client's timeout does not apply.
   */
  async portFetch(name: string, port: number, path = "/", init: RequestInit = {}): Promise<Response> {
    checkName(name);
    const p = portPath(port, path);
    const { handle } = await this.#handle(name);
    return this.#fetch(`${handle.endpoint}${p}`, {
      ...init,
      headers: { ...headersOf(init.headers), ...handle.headers },
      redirect: init.redirect ?? "manual",
    });
  }

  /** A preview URL of `port` for people: signed, expiring, revocable (beyond the documented client). */
  async share(name: string, port: number, options: ShareOptions = {}): Promise<Share> {
    const body: Record<string, unknown> = {};
    if (options.ttl !== undefined) body.ttl = options.ttl;
    if (options.public !== undefined) {
      if (typeof options.public !== "boolean") throw new TypeError("public: expected a boolean");
      body.public = options.public;
    }
    const res = await this.#data(name, (ep) => jsonSpec("POST", `${ep}${portPath(port, "/")}share`, body), readJson);
    return toShare(res);
  }

  /** Revokes a share: its URL answers 404 from then on. */
  async unshare(name: string, port: number, id: string): Promise<void> {
    if (typeof id !== "string" || !/^[0-9a-f]{16}$/.test(id)) {
      throw new SandboxRequestError(400, "invalid_argument", `invalid share id ${JSON.stringify(id)}`);
    }
    await this.#data(name, (ep) => bareSpec("DELETE", `${ep}${portPath(port, "/")}share/${id}`), discard);
  }

  /** The sandbox's valid shares, oldest first. */
  async shares(name: string): Promise<Share[]> {
    const body = await this.#data(name, (ep) => bareSpec("GET", `${ep}/ports/shares`), readJson);
    const rows = field(body, "shares");
    if (!Array.isArray(rows)) throw badResponse("shares: no shares array");
    return rows.map(toShare);
  }

  // ------------------------------------------------------------ files

  /** A file as text (UTF-8). 404 when the path cannot be read. */
  async readFile(name: string, path: string): Promise<string> {
    const bytes = await this.readFileBytes(name, path);
    return new TextDecoder("utf-8", { ignoreBOM: true }).decode(bytes);
  }

  /** A file's bytes. 404 when the path cannot be read. */
  async readFileBytes(name: string, path: string): Promise<Uint8Array> {
    return this.#data(name, (ep) => bareSpec("GET", `${ep}/files?${pathQuery(path)}`), readBytes);
  }

  /** Writes text (UTF-8), creating parent directories. */
  async writeFile(name: string, path: string, contents: string): Promise<void> {
    await this.writeFileBytes(name, path, encoder.encode(contents));
  }

  /** Writes bytes, creating parent directories. */
  async writeFileBytes(name: string, path: string, contents: Uint8Array): Promise<void> {
    await this.#data(name, (ep) => bytesSpec("PUT", `${ep}/files?${pathQuery(path)}`, contents), discard);
  }

  /** A directory's entries. `path` defaults to `.` (the working directory). */
  async listDir(name: string, path = "."): Promise<DirEntry[]> {
    const body = await this.#data(name, (ep) => bareSpec("GET", `${ep}/files/list?${pathQuery(path)}`), readJson);
    const rows = field(body, "entries");
    if (!Array.isArray(rows)) throw badResponse("listDir: no entries array");
    return rows.map((row) => ({ name: str(field(row, "name")), isDirectory: field(row, "isDirectory") === true }));
  }

  /** `grep -rn` for a pattern under a path (default `.`). Empty when nothing matches. */
  async grep(name: string, pattern: string, path = "."): Promise<GrepMatch[]> {
    // -H so a single file operand still prints its path; -- so a pattern or
    // path starting with '-' is not taken as an option.
    const r = await this.exec(name, { command: ["grep", "-rnH", "--", pattern, path] });
    let text = r.stdout;
    if (r.truncated && !text.endsWith("\n")) text = text.slice(0, text.lastIndexOf("\n") + 1);
    const matches = parseGrep(text);
    if (r.exitCode === 0 || r.exitCode === 1 || matches.length > 0) return matches;
    const message = r.stderr.trim() || `grep exited with ${r.exitCode}`;
    if (/no such file|not found|permission denied/i.test(message)) {
      throw new SandboxRequestError(404, "file_not_found", message);
    }
    throw new SandboxRequestError(400, "invalid_argument", message);
  }

  // ------------------------------------------------------------ internals

  async #poll(
    name: string,
    processId: string,
    stdoutFrom: number,
    stderrFrom: number,
    waitMs: number,
    signal?: AbortSignal,
  ): Promise<ProcessOutput> {
    const id = checkProcessId(processId);
    const q = new URLSearchParams({ stdoutFrom: String(offset(stdoutFrom)), stderrFrom: String(offset(stderrFrom)) });
    const wait = Math.min(Math.max(0, Math.floor(waitMs) || 0), this.#maxWaitMs());
    if (wait > 0) q.set("waitMs", String(wait));
    const body = await this.#data(
      name,
      (ep) => ({ ...bareSpec("GET", `${ep}/processes/${id}?${q.toString()}`), ...(signal ? { signal } : {}) }),
      readJson,
    );
    return toOutput(body);
  }

  /** Longest server-side wait that still answers inside the request timeout. */
  #maxWaitMs(): number {
    return Math.max(0, this.#timeoutMs - 1000);
  }

  /**
   * Best-effort kill-and-forget, so finished runs do not push other exited
   * records out of the sandbox's table.
   */
  async #reap(name: string, processId: string): Promise<void> {
    try {
      await this.kill(name, processId);
    } catch {
      // The result is already known; a failed clean-up must not hide it.
    }
  }

  /** A request to the control plane with the identity token. */
  async #control<T>(method: RequestSpec["method"], path: string, body: unknown, read: Reader<T>): Promise<T> {
    const base = this.#base();
    const headers: Record<string, string> = { authorization: `Bearer ${this.#identityToken()}` };
    const spec: RequestSpec =
      body === undefined
        ? { method, url: base + path, headers }
        : { method, url: base + path, headers, body: JSON.stringify(body), contentType: "application/json" };
    return this.#call(spec, read);
  }

  /**
   * A request to a sandbox's data plane: attaches on first use, and re-attaches
   * and retries exactly once when the credential is rejected (401). A 401 means
   * the request was refused before it ran, so retrying cannot run it twice.
   */
  async #data<T>(name: string, build: (endpoint: string) => RequestSpec, read: Reader<T>): Promise<T> {
    checkName(name);
    const first = await this.#handle(name);
    try {
      return await this.#call(withHeaders(build(first.handle.endpoint), first.handle.headers), read);
    } catch (err) {
      if (!(err instanceof SandboxRequestError) || err.status !== 401) throw err;
    }
    const second = await this.#handle(name, first);
    return this.#call(withHeaders(build(second.handle.endpoint), second.handle.headers), read);
  }

  /** A usable handle: the cached one unless stale (or the one that just failed). */
  async #handle(name: string, failed?: CachedHandle): Promise<CachedHandle> {
    const cur = this.#handles.get(name);
    if (cur && cur !== failed && Date.now() < cur.refreshAt) return cur;
    if (cur && cur === failed) this.#handles.delete(name);
    // Concurrent callers share one attach.
    let pending = this.#attaching.get(name);
    if (!pending) {
      const was = cur ?? failed;
      pending = this.#attachNow(name, was?.sandboxClass ?? "default", was?.network, was?.image, was?.egress).finally(() => {
        if (this.#attaching.get(name) === pending) this.#attaching.delete(name);
      });
      this.#attaching.set(name, pending);
    }
    return pending;
  }

  async #attachNow(
    name: string,
    sandboxClass: string,
    network?: Network,
    image?: string,
    egress?: EgressPolicy,
  ): Promise<CachedHandle> {
    const generation = this.#generation.get(name) ?? 0;
    const request: Record<string, unknown> = { class: sandboxClass };
    if (network) request.network = network;
    if (image !== undefined) request.image = image;
    if (egress && egressActive(egress)) request.egress = egress;
    const [body, received, serverNow] = await this.#control(
      "POST",
      `/v1/sandboxes/${encodeURIComponent(name)}/attach`,
      request,
      async (res) => [await readJson(res), Date.now(), Date.parse(res.headers.get("date") ?? "")] as const,
    );
    const handle = toHandle(body);
    // Measure the lifetime against the server's clock when it sent one, so a
    // skewed local clock does not make every call re-attach. `Date` has
    // one-second resolution: take the late end of that second.
    const expires = Date.parse(handle.expiresAt);
    const sentAt = Number.isFinite(serverNow) ? serverNow + 1000 : received;
    const lifetime = Number.isFinite(expires) ? expires - sentAt : 0;
    const margin = Math.min(REFRESH_MARGIN_MS, Math.max(0, lifetime) / 4);
    const entry: CachedHandle = {
      handle,
      sandboxClass,
      network: handle.network ?? network,
      image: handle.image ?? image,
      egress: egress && egressActive(egress) ? egress : undefined,
      refreshAt: received + lifetime - margin,
    };
    if ((this.#generation.get(name) ?? 0) === generation) this.#handles.set(name, entry);
    return entry;
  }

  #forget(name: string): void {
    this.#handles.delete(name);
    this.#attaching.delete(name);
    this.#generation.set(name, (this.#generation.get(name) ?? 0) + 1);
  }

  #identityToken(): string {
    if (this.#token === undefined) {
      throw new SandboxRequestError(
        401,
        "unauthenticated",
        "no identity token: pass identityToken or set ASTRO_AUTHZ_TOKEN (or SANDBOXD_TOKEN)",
      );
    }
    return this.#token;
  }

  #base(): string {
    if (this.#serverUrl === undefined) {
      this.#identityToken();
      throw new SandboxRequestError(
        400,
        "invalid_argument",
        "no server URL: pass serverUrl or use an identity token with an 'iss' claim",
      );
    }
    return this.#serverUrl;
  }

  /**
   * One HTTP exchange, bounded by the client's timeout (body included).
   * Non-2xx becomes SandboxRequestError; no answer becomes
   * SandboxUnavailableError and is never retried.
   */
  async #call<T>(spec: RequestSpec, read: Reader<T>): Promise<T> {
    // A body that may outlast the timeout (a stream) is bounded by a timer
    // stopped once the answer is read; any other by AbortSignal.timeout.
    const timer = spec.untimedBody ? new AbortController() : undefined;
    const stopTimer = timer ? armTimeout(timer, this.#timeoutMs) : () => {};
    const timeout = timer ? timer.signal : AbortSignal.timeout(this.#timeoutMs);
    const signal = spec.signal ? AbortSignal.any([timeout, spec.signal]) : timeout;
    const headers: Record<string, string> = { ...spec.headers, accept: spec.accept ?? "application/json" };
    if (spec.contentType) headers["content-type"] = spec.contentType;
    const init: RequestInit = { method: spec.method, headers, signal, redirect: "manual" };
    if (spec.body !== undefined) init.body = spec.body;
    try {
      const res = await this.#fetch(spec.url, init);
      if (!res.ok) throw await toRequestError(res);
      return await read(res);
    } catch (err) {
      if (err instanceof SandboxRequestError) throw err;
      if (spec.signal?.aborted) throw spec.signal.reason;
      const why = timeout.aborted ? `no answer within ${this.#timeoutMs} ms` : describe(err);
      throw new SandboxUnavailableError(`${spec.method} ${redact(spec.url)}: ${why}`, err);
    } finally {
      stopTimer();
    }
  }
}

/** Output accumulated across a run's stream. */
class RunState {
  readonly #proc: ProcessStatus;
  readonly #stream: ProcessStream;
  readonly #onOutput: ((chunk: ProcessOutput) => void) | undefined;
  // One streaming decoder per stream: a UTF-8 sequence split across frames
  // decodes whole.
  readonly #decoders = {
    stdout: new TextDecoder("utf-8", { ignoreBOM: true }),
    stderr: new TextDecoder("utf-8", { ignoreBOM: true }),
  };
  readonly #text: { stdout: string[]; stderr: string[] } = { stdout: [], stderr: [] };
  /** Dropped bytes already handed to onOutput. */
  #stdoutDropped = 0;
  #stderrDropped = 0;
  #exit: StreamExit | undefined;

  constructor(proc: ProcessStatus, stream: ProcessStream, onOutput: ((chunk: ProcessOutput) => void) | undefined) {
    this.#proc = proc;
    this.#stream = stream;
    this.#onOutput = onOutput;
  }

  add(chunk: ProcessChunk): void {
    const text = this.#decoders[chunk.stream].decode(chunk.data, { stream: true });
    this.#keep(chunk.stream, text);
  }

  exited(exit: StreamExit): void {
    this.#exit = exit;
  }

  result(timedOut: boolean, killed: boolean): RunResult {
    // What a decoder still holds: an incomplete sequence at the very end.
    this.#keep("stdout", this.#decoders.stdout.decode());
    this.#keep("stderr", this.#decoders.stderr.decode());
    return {
      ...this.#status(),
      stdout: this.#text.stdout.join(""),
      stderr: this.#text.stderr.join(""),
      stdoutNext: this.#stream.stdoutNext,
      stderrNext: this.#stream.stderrNext,
      stdoutDropped: this.#stream.start?.stdoutDropped ?? 0,
      stderrDropped: this.#stream.start?.stderrDropped ?? 0,
      timedOut,
      killed,
    };
  }

  #keep(stream: "stdout" | "stderr", text: string): void {
    if (text === "") return;
    this.#text[stream].push(text);
    if (!this.#onOutput) return;
    const start = this.#stream.start;
    const stdoutDropped = (start?.stdoutDropped ?? 0) - this.#stdoutDropped;
    const stderrDropped = (start?.stderrDropped ?? 0) - this.#stderrDropped;
    this.#stdoutDropped += stdoutDropped;
    this.#stderrDropped += stderrDropped;
    this.#onOutput({
      ...this.#status(),
      stdout: stream === "stdout" ? text : "",
      stderr: stream === "stderr" ? text : "",
      stdoutNext: this.#stream.stdoutNext,
      stderrNext: this.#stream.stderrNext,
      stdoutDropped,
      stderrDropped,
    });
  }

  /** The latest status known: the exit's, else the latest start frame's, else the spawn's. */
  #status(): ProcessStatus {
    const s: ProcessStatus = this.#exit ?? this.#stream.start ?? this.#proc;
    const out: ProcessStatus = {
      processId: s.processId || this.#proc.processId,
      command: [...s.command],
      state: s.state,
      startedAt: s.startedAt,
    };
    for (const k of ["exitCode", "exitedAt", "pty", "lossless"] as const) {
      if (s[k] !== undefined) (out as unknown as Record<string, unknown>)[k] = s[k];
    }
    return out;
  }
}

// ---------------------------------------------------------------- helpers

function nonEmpty(v: string | undefined): string | undefined {
  return v === undefined || v === "" ? undefined : v;
}

function stripSlashes(url: string): string {
  return url.replace(/\/+$/, "");
}

/** The `iss` claim of a JWT, decoded without verification (the server verifies). */
function issuerOf(token: string | undefined): string | undefined {
  if (!token) return undefined;
  const part = token.split(".")[1];
  if (!part || part.length > 65536) return undefined;
  try {
    const b64 = part.replace(/-/g, "+").replace(/_/g, "/");
    const bin = atob(b64 + "=".repeat((4 - (b64.length % 4)) % 4));
    const bytes = Uint8Array.from(bin, (c) => c.charCodeAt(0));
    const claims: unknown = JSON.parse(new TextDecoder().decode(bytes));
    const iss = field(claims, "iss");
    return typeof iss === "string" && iss !== "" ? iss : undefined;
  } catch {
    return undefined;
  }
}

function checkName(name: string): void {
  if (typeof name !== "string" || !NAME_RE.test(name)) {
    throw new SandboxRequestError(
      400,
      "invalid_argument",
      `invalid sandbox name ${JSON.stringify(name)}: must match ${NAME_RE.source}`,
    );
  }
}

function checkProcessId(id: string): string {
  if (typeof id !== "string" || !PROCESS_ID_RE.test(id)) {
    throw new SandboxRequestError(400, "invalid_argument", `invalid process id ${JSON.stringify(id)}`);
  }
  return encodeURIComponent(id);
}

/** A terminal size, checked as the server checks it: integers 1 to 4096. */
function checkPty(cols: unknown, rows: unknown): { cols: number; rows: number } {
  for (const [what, v] of [["cols", cols], ["rows", rows]] as const) {
    if (typeof v !== "number" || !Number.isInteger(v) || v < 1 || v > PTY_MAX) {
      throw new SandboxRequestError(400, "invalid_argument", `pty ${what} must be an integer from 1 to ${PTY_MAX}, not ${String(v)}`);
    }
  }
  return { cols: cols as number, rows: rows as number };
}

function offset(n: number): number {
  if (!Number.isSafeInteger(n) || n < 0) {
    throw new SandboxRequestError(400, "invalid_argument", `invalid offset ${String(n)}`);
  }
  return n;
}

function pathQuery(path: string): string {
  if (typeof path !== "string" || path === "") {
    throw new SandboxRequestError(400, "invalid_argument", "path must be a non-empty string");
  }
  return new URLSearchParams({ path }).toString();
}

function bareSpec(method: RequestSpec["method"], url: string): RequestSpec {
  return { method, url, headers: {} };
}

function jsonSpec(method: RequestSpec["method"], url: string, body: unknown): RequestSpec {
  return { method, url, headers: {}, body: JSON.stringify(body), contentType: "application/json" };
}

function bytesSpec(method: RequestSpec["method"], url: string, body: Uint8Array): RequestSpec {
  return { method, url, headers: {}, body, contentType: "application/octet-stream" };
}

function withHeaders(spec: RequestSpec, headers: Record<string, string>): RequestSpec {
  return { ...spec, headers: { ...spec.headers, ...headers } };
}

async function readJson(res: Response): Promise<unknown> {
  const text = await res.text();
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw badResponse(`${res.status} answer is not JSON`);
  }
}

/** A stream's answer, kept for its body; anything but the frame media type is not the API's. */
async function readStream(res: Response): Promise<Response> {
  const type = (res.headers.get("content-type") ?? "").split(";")[0]?.trim().toLowerCase();
  if (type !== STREAM_TYPE) {
    await res.body?.cancel().catch(() => {});
    throw badResponse(`a process stream answered with Content-Type ${type || "(none)"}`);
  }
  return res;
}

async function readBytes(res: Response): Promise<Uint8Array> {
  return new Uint8Array(await res.arrayBuffer());
}

async function discard(res: Response): Promise<void> {
  await res.arrayBuffer();
}

async function toRequestError(res: Response): Promise<SandboxRequestError> {
  const text = await res.text();
  let code = "";
  let message = "";
  let written: number | undefined;
  try {
    const err = field(JSON.parse(text), "error");
    code = str(field(err, "code"));
    message = str(field(err, "message"));
    const w = field(err, "written");
    if (typeof w === "number" && Number.isSafeInteger(w) && w >= 0) written = w;
  } catch {
    // Not our error body (a proxy's page, say): keep the status alone.
  }
  if (!code) code = `http_${res.status}`;
  if (!message) message = `HTTP ${res.status}${res.statusText ? ` ${res.statusText}` : ""}`;
  if (res.status === 409 && code === "not_enabled") return new SandboxNotEnabledError(message);
  return new SandboxRequestError(res.status, code, message, written);
}

function badResponse(what: string): SandboxRequestError {
  return new SandboxRequestError(502, "invalid_response", `unexpected answer from the server: ${what}`);
}

function describe(err: unknown): string {
  if (err instanceof Error) {
    const cause = (err as { cause?: unknown }).cause;
    const inner = cause instanceof Error ? `: ${cause.message}` : "";
    return `${err.message}${inner}`;
  }
  return String(err);
}

/** Strips a URL's query (it may carry a path the caller considers private). */
function redact(url: string): string {
  const q = url.indexOf("?");
  return q < 0 ? url : url.slice(0, q);
}

/** Aborts `controller` with a TimeoutError after ms; returns the function that stops the timer. */
function armTimeout(controller: AbortController, ms: number): () => void {
  const timer = setTimeout(() => controller.abort(new DOMException(`no answer within ${ms} ms`, "TimeoutError")), ms);
  return () => clearTimeout(timer);
}

function parseGrep(text: string): GrepMatch[] {
  const out: GrepMatch[] = [];
  for (const line of text.split("\n")) {
    const m = /^(.*?):(\d+):(.*)$/s.exec(line);
    if (!m) continue; // "Binary file ... matches" and the like
    out.push({ path: m[1] ?? "", line: Number(m[2]), text: m[3] ?? "" });
  }
  return out;
}

// ---------------------------------------------------------------- shapes

function field(obj: unknown, key: string): unknown {
  return obj !== null && typeof obj === "object" ? (obj as Record<string, unknown>)[key] : undefined;
}

function str(v: unknown): string {
  return typeof v === "string" ? v : "";
}

function num(v: unknown): number {
  return typeof v === "number" && Number.isFinite(v) ? v : 0;
}

function strings(v: unknown): string[] {
  return Array.isArray(v) ? v.map((s) => String(s)) : [];
}

function toHandle(body: unknown): SandboxHandle {
  const endpoint = field(body, "endpoint");
  const headers = field(body, "headers");
  if (typeof endpoint !== "string" || !/^https?:\/\//i.test(endpoint)) throw badResponse("attach: bad endpoint");
  const clean: Record<string, string> = {};
  if (headers !== null && typeof headers === "object") {
    for (const [k, v] of Object.entries(headers)) if (typeof v === "string") clean[k] = v;
  }
  return {
    name: str(field(body, "name")),
    class: str(field(body, "class")) || "default",
    state: str(field(body, "state")) || "running",
    endpoint: stripSlashes(endpoint),
    headers: clean,
    expiresAt: str(field(body, "expiresAt")),
    ...networkOf(body),
    ...imageOf(body),
  };
}

function imageOf(body: unknown): { image?: string } {
  const i = field(body, "image");
  return typeof i === "string" && i !== "" ? { image: i } : {};
}

function egressActive(p: EgressPolicy): boolean {
  return (p.allow !== undefined && p.allow !== null) || (Array.isArray(p.deny) && p.deny.length > 0);
}

function toNetworkPolicy(body: unknown): NetworkPolicy {
  const mode = field(body, "mode");
  const egress = field(body, "egress");
  const allow = field(egress, "allow");
  return {
    mode: mode === "none" ? "none" : "nat",
    egress: { allow: allow === null || allow === undefined ? null : strings(allow), deny: strings(field(egress, "deny")) },
  };
}

function toEgressEvent(row: unknown): EgressEvent {
  const type = field(row, "type") === "connection" ? "connection" : "dns";
  const e: EgressEvent = { type, time: str(field(row, "time")), allowed: field(row, "allowed") === true };
  if (type === "connection") {
    e.address = str(field(row, "address"));
    e.port = num(field(row, "port"));
    e.protocol = str(field(row, "protocol"));
  } else {
    e.name = str(field(row, "name"));
    e.addresses = strings(field(row, "addresses"));
  }
  return e;
}

function networkOf(body: unknown): { network?: Network } {
  const n = field(body, "network");
  return n === "nat" || n === "none" ? { network: n } : {};
}

function copyHandle(h: SandboxHandle): SandboxHandle {
  return { ...h, headers: { ...h.headers } };
}

function toRecord(body: unknown): SandboxRecord {
  const rec: SandboxRecord = {
    name: str(field(body, "name")),
    class: str(field(body, "class")),
    state: str(field(body, "state")),
    createdAt: str(field(body, "createdAt")),
    lastActiveAt: str(field(body, "lastActiveAt")),
  };
  const ceiling = field(body, "ceilingAt");
  if (typeof ceiling === "string") rec.ceilingAt = ceiling;
  return { ...rec, ...networkOf(body), ...imageOf(body) };
}

function toExecResult(body: unknown): ExecResult {
  return {
    exitCode: num(field(body, "exitCode")),
    stdout: str(field(body, "stdout")),
    stderr: str(field(body, "stderr")),
    durationMs: num(field(body, "durationMs")),
    timedOut: field(body, "timedOut") === true,
    truncated: field(body, "truncated") === true,
  };
}

function toStatus(body: unknown): ProcessStatus {
  const processId = field(body, "processId");
  if (typeof processId !== "string" || processId === "") throw badResponse("no processId");
  const status: ProcessStatus = {
    processId,
    command: strings(field(body, "command")),
    state: field(body, "state") === "exited" ? "exited" : "running",
    startedAt: str(field(body, "startedAt")),
  };
  const exitCode = field(body, "exitCode");
  const exitedAt = field(body, "exitedAt");
  if (typeof exitCode === "number") status.exitCode = exitCode;
  if (typeof exitedAt === "string") status.exitedAt = exitedAt;
  if (field(body, "exec") === true) {
    status.exec = true;
    status.timedOut = field(body, "timedOut") === true;
    status.truncated = field(body, "truncated") === true;
  }
  if (field(body, "pty") === true) status.pty = true;
  if (field(body, "lossless") === true) status.lossless = true;
  return status;
}

function toOutput(body: unknown): ProcessOutput {
  return {
    ...toStatus(body),
    stdout: str(field(body, "stdout")),
    stderr: str(field(body, "stderr")),
    stdoutNext: num(field(body, "stdoutNext")),
    stderrNext: num(field(body, "stderrNext")),
    stdoutDropped: num(field(body, "stdoutDropped")),
    stderrDropped: num(field(body, "stderrDropped")),
  };
}

function portPath(port: number, path: string): string {
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    throw new SandboxRequestError(400, "invalid_argument", `invalid port ${JSON.stringify(port)} (1..65535)`);
  }
  if (typeof path !== "string") throw new TypeError("path: expected a string");
  return `/ports/${port}${path.startsWith("/") ? path : `/${path}`}`;
}

function headersOf(h: RequestInit["headers"]): Record<string, string> {
  const out: Record<string, string> = {};
  new Headers(h).forEach((v, k) => {
    if (k !== "authorization") out[k] = v;
  });
  return out;
}

function toShare(v: unknown): Share {
  const hostUrl = field(v, "hostUrl");
  const out: Share = {
    id: str(field(v, "id")),
    port: num(field(v, "port")),
    url: str(field(v, "url")),
    pathUrl: str(field(v, "pathUrl")),
    token: str(field(v, "token")),
    expiresAt: str(field(v, "expiresAt")),
    createdAt: str(field(v, "createdAt")),
    public: field(v, "public") === true,
  };
  if (typeof hostUrl === "string") out.hostUrl = hostUrl;
  return out;
}
