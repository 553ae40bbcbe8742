import { SandboxClient, SandboxRequestError, SandboxUnavailableError } from "@sandboxd/client";
import type { SandboxOptions } from "@sandboxd/client";
import { BaseSandbox, SandboxError } from "deepagents";
import type {
  DeleteResult,
  ExecuteResponse,
  FileDownloadResponse,
  FileInfo,
  FileOperationError,
  FileUploadResponse,
  GlobResult,
  GrepResult,
  LsResult,
  ReadResult,
} from "deepagents";
import { applyGrepMaxCount } from "deepagents";
import { readLineWindow } from "./lines.js";
import { binaryMimeType, joinPath, normalizePath } from "./paths.js";
import { globPlan, grepArgv, parseGlob, parseGrep } from "./search.js";
import { FileStreams, readChunk } from "./stream.js";

/** Options of {@link SandboxdSandbox}: a name plus the `SandboxClient` options. */
export interface SandboxdSandboxOptions extends SandboxOptions {
  /**
   * The sandbox name (`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`): use the thread
   * or conversation id, so a resumed conversation finds its own files.
   * Default: a new `deepagents-<random>` name.
   */
  name?: string;
  /**
   * A `SandboxClient` to share (one per process is enough). When given,
   * `identityToken` and `serverUrl` are the client's; `fetchImpl` and
   * `timeoutSeconds` here still apply to the adapter's streamed reads.
   */
  client?: SandboxClient;
}

/** Options of {@link SandboxdSandbox.create}. */
export interface SandboxdSandboxCreateOptions extends SandboxdSandboxOptions {
  /** Files written after attaching: path -> contents (text or bytes). */
  initialFiles?: Record<string, string | Uint8Array>;
}

/** Options of one {@link SandboxdSandbox.execute} call. */
export interface ExecuteOptions {
  /**
   * Seconds before the command's process group is killed. Bounded, like
   * every exec, to one second under the client's `timeoutSeconds`, which is
   * also the default.
   */
  timeout?: number;
}

const DEFAULT_TIMEOUT_SECONDS = 30;
/** deepagents' cap on a binary file read_file returns inline. */
const MAX_BINARY_READ_BYTES = 10 * 1024 * 1024;
/** Downloads in flight at once for one batch. */
const FILE_CONCURRENCY = 4;
const EMPTY_CONTENT_WARNING = "System reminder: File exists but has empty contents";
const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

/**
 * A deepagents sandbox backend on a sandboxd sandbox.
 *
 * ```ts
 * createDeepAgent({ model, backend: new SandboxdSandbox({ name: threadId }) });
 * ```
 *
 * `execute` runs a shell line with stderr folded into stdout; files move
 * through the sandbox's native file endpoints; `grep` and `glob` run the
 * sandbox's own find/grep/stat as argv. The sandbox is attached on first
 * use (or by `initialize()`); when it is reclaimed or deleted behind the
 * adapter's back, the next call reaches a new, empty one.
 */
export class SandboxdSandbox extends BaseSandbox {
  readonly #name: string;
  readonly #client: SandboxClient;
  readonly #streams: FileStreams;
  readonly #timeoutMs: number;
  #state: "new" | "running" | "closed" = "new";
  #attaching: Promise<void> | undefined;

  constructor(options: SandboxdSandboxOptions = {}) {
    super();
    const { name, client, ...clientOptions } = options;
    this.#name = name ?? generatedName();
    if (!NAME_RE.test(this.#name)) {
      throw new SandboxError(
        `invalid sandbox name ${JSON.stringify(this.#name)}: must match ${NAME_RE.source}`,
        "INVALID_NAME",
      );
    }
    this.#client = client ?? new SandboxClient(clientOptions);
    const seconds = clientOptions.timeoutSeconds ?? DEFAULT_TIMEOUT_SECONDS;
    if (typeof seconds !== "number" || !Number.isFinite(seconds) || seconds <= 0) {
      throw new RangeError("timeoutSeconds must be a positive number");
    }
    this.#timeoutMs = Math.ceil(seconds * 1000);
    const fetchImpl = clientOptions.fetchImpl ?? ((input, init) => fetch(input, init));
    this.#streams = new FileStreams(this.#client, this.#name, { fetchImpl, timeoutMs: this.#timeoutMs });
  }

  /** The sandbox name. */
  get id(): string {
    return this.#name;
  }

  /** The SandboxClient this backend uses (the shared one, when one was given). */
  get client(): SandboxClient {
    return this.#client;
  }

  /** True once attached (by `initialize()` or a first call) and until `close()`. */
  get isRunning(): boolean {
    return this.#state === "running";
  }

  /**
   * Attaches: creates the sandbox, or reuses or resumes the one of this
   * name. Optional, as every call attaches on first use. Throws SandboxError
   * `ALREADY_INITIALIZED` when already attached; after `close()` it attaches
   * again (to a new, empty sandbox).
   */
  async initialize(): Promise<void> {
    if (this.#state === "running") {
      throw new SandboxError(
        `Sandbox '${this.#name}' is already initialized. Each SandboxdSandbox instance can only be initialized once.`,
        "ALREADY_INITIALIZED",
      );
    }
    this.#state = "new";
    await this.#ready();
  }

  /** Deletes the sandbox and its filesystem. Later calls throw until `initialize()`. */
  async close(): Promise<void> {
    if (this.#state === "closed") return;
    this.#state = "closed";
    this.#attaching = undefined;
    this.#streams.reset();
    try {
      await this.#client.delete(this.#name);
    } catch (err) {
      if (!(err instanceof SandboxRequestError && err.status === 404)) throw err;
    }
  }

  /**
   * Creates (or attaches) a sandbox and writes `initialFiles` into it. Throws
   * SandboxError `FILE_OPERATION_FAILED` naming the files that could not be
   * written; a sandbox whose name was generated here is deleted first.
   */
  static async create(options: SandboxdSandboxCreateOptions = {}): Promise<SandboxdSandbox> {
    const { initialFiles, ...rest } = options;
    const sandbox = new SandboxdSandbox(rest);
    await sandbox.initialize();
    if (initialFiles) {
      const encoder = new TextEncoder();
      const files = Object.entries(initialFiles).map(
        ([path, content]): [string, Uint8Array] => [path, typeof content === "string" ? encoder.encode(content) : content],
      );
      let failed: FileUploadResponse[];
      try {
        failed = (await sandbox.uploadFiles(files)).filter((r) => r.error !== null);
      } catch (err) {
        if (options.name === undefined) await sandbox.close().catch(() => {});
        throw err;
      }
      if (failed.length > 0) {
        if (options.name === undefined) await sandbox.close().catch(() => {});
        const list = failed.map((r) => `${r.path} (${r.error})`).join(", ");
        throw new SandboxError(`could not write initial files: ${list}`, "FILE_OPERATION_FAILED");
      }
    }
    return sandbox;
  }

  // ------------------------------------------------------------ commands

  /**
   * Runs a shell line (`/bin/sh -c`) in `/workspace`. `output` is stdout and
   * stderr as one stream, in the order the command wrote them: the line runs
   * after `exec 2>&1`, so both are the same pipe (the client's documented
   * `execCombined`). `truncated` when output passed exec's 1 MiB cap; a
   * command killed at its timeout gets a note appended and keeps the exit
   * code the sandbox reports (137).
   */
  async execute(command: string, options: ExecuteOptions = {}): Promise<ExecuteResponse> {
    await this.#ready();
    const request: { command: string[]; timeoutMs?: number } = {
      command: ["/bin/sh", "-c", `exec 2>&1\n${command}`],
    };
    const seconds = options.timeout;
    if (seconds !== undefined && Number.isFinite(seconds) && seconds > 0) request.timeoutMs = Math.ceil(seconds * 1000);
    const r = await this.#client.exec(this.#name, request);
    let output = r.stdout;
    if (r.timedOut) {
      // The deadline exec applied: the one asked for, bounded as the client bounds it.
      const bound = Math.max(1, this.#timeoutMs - 1000);
      const ms = Math.min(request.timeoutMs ?? bound, bound);
      const sep = output === "" || output.endsWith("\n") ? "" : "\n";
      output += `${sep}Error: Command timed out after ${(ms / 1000).toFixed(1)} seconds.`;
    }
    return { output, exitCode: r.exitCode, truncated: r.truncated };
  }

  // ------------------------------------------------------------ files

  /**
   * Writes each file through the native file endpoint (parent directories
   * created), one after the other in the order given. Per-file errors: `permission_denied`, `is_directory`,
   * `invalid_path` (a bad path, or a component of it that is a file).
   * Failures that are not about the path (the server unreachable, a cap or
   * size limit) are thrown.
   */
  async uploadFiles(files: Array<[string, Uint8Array]>): Promise<FileUploadResponse[]> {
    await this.#ready();
    // One at a time, in order: a later file may be under an earlier one's
    // path (or the other way round), and the outcome must not depend on timing.
    return mapLimit(files, 1, async ([path, content]) => {
      if (path === "") return { path, error: "invalid_path" };
      try {
        await this.#client.writeFileBytes(this.#name, normalizePath(path), content);
        return { path, error: null };
      } catch (err) {
        return { path, error: await this.#fileError(err, path, "write") };
      }
    });
  }

  /**
   * Reads each file through the native file endpoint. Per-file errors:
   * `file_not_found`, `is_directory`, `permission_denied` (the file is
   * listed in its directory but cannot be read), `invalid_path`.
   */
  async downloadFiles(paths: string[]): Promise<FileDownloadResponse[]> {
    await this.#ready();
    return mapLimit(paths, FILE_CONCURRENCY, async (path) => {
      if (path === "") return { path, content: null, error: "invalid_path" };
      try {
        const content = await this.#client.readFileBytes(this.#name, normalizePath(path));
        return { path, content, error: null };
      } catch (err) {
        return { path, content: null, error: await this.#fileError(err, path, "read") };
      }
    });
  }

  /**
   * A window of a text file's lines, read as it streams from the native file
   * endpoint (only the window is kept), as deepagents' read contract has it:
   * the unmodified lines, with `totalLines`, `startLine`, `endLine` and
   * `nextOffset`. Binary files (images, audio, video, PDF) come whole, up to
   * read_file's 10 MiB.
   */
  override async read(filePath: string, offset = 0, limit = 500): Promise<ReadResult> {
    await this.#ready();
    const path = normalizePath(filePath);
    const mimeType = binaryMimeType(filePath);
    try {
      if (mimeType) return await this.#readBinary(path, mimeType);
      const from = Number.isFinite(offset) ? Math.max(0, Math.floor(offset)) : 0;
      const count = Number.isFinite(limit) ? Math.max(0, Math.floor(limit)) : 0;
      if (count === 0) return { content: "" };
      const download = await this.#streams.open(path);
      const w = await readLineWindow(download, from, count, this.#timeoutMs);
      if (w.empty) return { content: EMPTY_CONTENT_WARNING };
      if (w.totalLines !== undefined && from >= w.totalLines) {
        return { error: `Line offset ${from} exceeds file length (${w.totalLines} lines)` };
      }
      const endLine = from + w.lines.length;
      const result: ReadResult = { content: w.lines.join("\n"), startLine: from + 1, endLine };
      if (w.totalLines !== undefined) result.totalLines = w.totalLines;
      if (w.more) result.nextOffset = endLine;
      return result;
    } catch (err) {
      return { error: this.#readError(err, filePath) };
    }
  }

  async #readBinary(path: string, mimeType: string): Promise<ReadResult> {
    const download = await this.#streams.open(path);
    const tooLarge = (size: number): ReadResult => ({
      error: `file too large to read (${Math.round(size / 1048576)}MB exceeds ${MAX_BINARY_READ_BYTES / 1048576}MB limit for binary files)`,
    });
    if (download.length !== undefined && download.length > MAX_BINARY_READ_BYTES) {
      await download.cancel();
      return tooLarge(download.length);
    }
    const reader = download.body.getReader();
    const chunks: Uint8Array[] = [];
    let size = 0;
    try {
      for (;;) {
        const { done, value } = await readChunk(reader, this.#timeoutMs);
        if (done) break;
        size += value.byteLength;
        if (size > MAX_BINARY_READ_BYTES) {
          await reader.cancel().catch(() => {});
          return tooLarge(size);
        }
        chunks.push(value);
      }
    } finally {
      reader.releaseLock();
    }
    const content = new Uint8Array(size);
    let at = 0;
    for (const c of chunks) {
      content.set(c, at);
      at += c.byteLength;
    }
    return { content, mimeType };
  }

  /**
   * A directory's entries from the native listing: absolute paths,
   * directories with a trailing `/` and `is_dir`, sorted. A missing path or
   * one that is not a directory lists nothing. The listing carries no sizes
   * or times, so neither is reported.
   */
  override async ls(path: string): Promise<LsResult> {
    await this.#ready();
    const dir = normalizePath(path || "/");
    try {
      const entries = await this.#client.listDir(this.#name, dir);
      const files: FileInfo[] = entries.map((e) => {
        const full = joinPath(dir, e.name);
        return e.isDirectory ? { path: `${full}/`, is_dir: true } : { path: full, is_dir: false };
      });
      files.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
      return { files };
    } catch (err) {
      if (err instanceof SandboxRequestError && (err.status === 404 || err.status === 400)) return { files: [] };
      return { error: describe(err) };
    }
  }

  /**
   * Literal search with the sandbox's find and grep as argv (see
   * `grepArgv`). A missing path has no matches; output past exec's 1 MiB
   * cap sets `truncated`.
   */
  override async grep(
    pattern: string,
    path: string | null = "/",
    glob: string | null = null,
    maxCount: number | null = null,
  ): Promise<GrepResult> {
    await this.#ready();
    try {
      const r = await this.#client.exec(this.#name, { command: grepArgv(pattern, normalizePath(path || "/"), glob) });
      const matches = parseGrep(r.stdout, r.truncated);
      const result: GrepResult = r.truncated ? { matches, truncated: true } : { matches };
      return applyGrepMaxCount({ result, maxCount });
    } catch (err) {
      return { error: describe(err) };
    }
  }

  /**
   * Files and directories under `path` whose path relative to it matches the
   * pattern (micromatch, dot files included), with absolute paths, sizes and
   * modification times (find and stat as argv, see `globPlan`).
   */
  override async glob(pattern: string, path = "/"): Promise<GlobResult> {
    await this.#ready();
    const base = normalizePath(path || "/");
    const plan = globPlan(pattern, base);
    try {
      const r = await this.#client.exec(this.#name, { command: plan.argv });
      const files = parseGlob(r.stdout, r.truncated, plan, base);
      return r.truncated ? { files, truncated: true } : { files };
    } catch (err) {
      return { error: describe(err) };
    }
  }

  /**
   * Deletes a file or a directory (recursively) in one exec, the path passed
   * as an argument, never spliced into the shell line.
   */
  override async delete(filePath: string): Promise<DeleteResult> {
    await this.#ready();
    const script = 'if [ -e "$1" ] || [ -L "$1" ]; then exec rm -rf -- "$1"; fi; exit 3';
    const r = await this.#client.exec(this.#name, {
      command: ["/bin/sh", "-c", `exec 2>&1\n${script}`, "sh", normalizePath(filePath)],
    });
    if (r.exitCode === 0) return { path: filePath, filesUpdate: null };
    if (r.exitCode === 3 && r.stdout === "") return { error: `Error: '${filePath}' not found` };
    return { error: `Error deleting file '${filePath}': ${r.stdout.trim() || "unknown error"}` };
  }

  // ------------------------------------------------------------ internals

  /** Attaches once; a closed sandbox refuses further use. */
  async #ready(): Promise<void> {
    if (this.#state === "closed") {
      throw new SandboxError(
        `Sandbox '${this.#name}' was closed (deleted). Call initialize() to attach a new one.`,
        "NOT_INITIALIZED",
      );
    }
    if (!this.#attaching) {
      const attaching = this.#client.attach(this.#name).then((handle) => {
        if (this.#attaching !== attaching) return;
        this.#streams.seed(handle);
        if (this.#state === "new") this.#state = "running";
      });
      this.#attaching = attaching;
      attaching.catch(() => {
        if (this.#attaching === attaching) this.#attaching = undefined;
      });
    }
    await this.#attaching;
  }

  /** The deepagents error name for a failed read or write of one path; throws what is not about the path. */
  async #fileError(err: unknown, path: string, op: "read" | "write"): Promise<FileOperationError> {
    if (!(err instanceof SandboxRequestError)) throw err;
    if (err.status === 403) return "permission_denied";
    if (err.status === 404 && op === "read") {
      // The server answers 404 for anything it cannot read: tell a directory
      // and a file that exists (listed in its parent) but may not be read.
      if (await this.#isDirectory(path)) return "is_directory";
      return (await this.#isListed(path)) ? "permission_denied" : "file_not_found";
    }
    if (err.status === 404) return "invalid_path"; // a component of the path is not a directory
    if (err.status === 400) {
      if (err.code === "invalid_argument" && path !== "" && (await this.#isDirectory(path))) return "is_directory";
      return "invalid_path";
    }
    throw err;
  }

  async #isDirectory(path: string): Promise<boolean> {
    try {
      await this.#client.listDir(this.#name, normalizePath(path));
      return true;
    } catch (err) {
      if (err instanceof SandboxRequestError) return false;
      throw err;
    }
  }

  /** Whether the path's parent lists it (so it exists). */
  async #isListed(path: string): Promise<boolean> {
    const full = normalizePath(path);
    if (full === "/") return false;
    const slash = full.lastIndexOf("/");
    const parent = slash === 0 ? "/" : full.slice(0, slash);
    try {
      const entries = await this.#client.listDir(this.#name, parent);
      return entries.some((e) => e.name === full.slice(slash + 1));
    } catch (err) {
      if (err instanceof SandboxRequestError) return false;
      throw err;
    }
  }

  #readError(err: unknown, filePath: string): string {
    if (err instanceof SandboxRequestError && (err.status === 404 || err.status === 400 || err.status === 403)) {
      return `File '${filePath}' not found`;
    }
    if (err instanceof SandboxRequestError || err instanceof SandboxUnavailableError) {
      return `Error reading file '${filePath}': ${err.message}`;
    }
    throw err;
  }
}

/** The name the documented adapter exports, so code written against it changes only its import. */
export const AstroSandbox = SandboxdSandbox;
export type AstroSandbox = SandboxdSandbox;

function generatedName(): string {
  const bytes = new Uint8Array(8);
  crypto.getRandomValues(bytes);
  return `deepagents-${[...bytes].map((b) => b.toString(16).padStart(2, "0")).join("")}`;
}

function describe(err: unknown): string {
  if (err instanceof SandboxRequestError || err instanceof SandboxUnavailableError) return err.message;
  throw err;
}

/** `fn` over `items` with at most `limit` in flight, results in input order. */
async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    for (;;) {
      const i = next++;
      if (i >= items.length) return;
      out[i] = await fn(items[i] as T);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}
