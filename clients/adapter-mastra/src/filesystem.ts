/**
 * The files of a sandboxd sandbox as a Mastra workspace filesystem.
 *
 * Reads, writes and listings go through the server's native file endpoints
 * (`GET`/`PUT {endpoint}/files`, `GET {endpoint}/files/list`): raw bytes, no
 * shell, parents created on write. What the API has no endpoint for runs as
 * one command in the sandbox through `SandboxClient.exec`, always as an argv
 * whose paths are separate arguments after `--` (never a shell line):
 * `stat` (stat), `mkdir` (mkdir), `rm`/`rmdir` (delete), `cp`/`mv`
 * (copy/move, inside the sandbox, so the bytes never travel), `grep -E`
 * (grep), and `dd oflag=append` fed through stdin (append, so the file is
 * never read back).
 */
import { posix } from "node:path";
import type { SandboxClient } from "@sandboxd/client";
import {
  DirectoryNotEmptyError,
  DirectoryNotFoundError,
  FileExistsError,
  FileNotFoundError,
  IsDirectoryError,
  MastraFilesystem,
  NotDirectoryError,
  PermissionError,
  StaleFileError,
  UnsupportedGrepPatternError,
  WorkspaceReadOnlyError,
} from "@mastra/core/workspace";
import type {
  CopyOptions,
  FileContent,
  FileEntry,
  FileStat,
  FilesystemGrepOptions,
  FilesystemGrepResult,
  FilesystemInfo,
  InstructionsOption,
  ListOptions,
  ProviderStatus,
  ReadOptions,
  RemoveOptions,
  WriteOptions,
} from "@mastra/core/workspace";
import type { RequestContext } from "@mastra/core/request-context";
import { parseGrepOutput, toExtendedRegex } from "./grep.js";
import {
  DEFAULT_WORKING_DIRECTORY,
  checkName,
  clientOf,
  errnoOf,
  isRequestError,
  resolveIn,
  resolveInstructions,
} from "./internal.js";
import { mimeTypeOf } from "./mime.js";
import type { SandboxdFilesystemOptions } from "./options.js";
import type { SandboxdSandbox } from "./sandbox.js";

const encoder = new TextEncoder();

/** Bytes per stdin write of an append. */
const APPEND_CHUNK = 4 << 20;

/** What a command in the sandbox printed and how it ended. */
interface Ran {
  exitCode: number;
  stdout: string;
  stderr: string;
  truncated: boolean;
}

/**
 * The sandbox's own filesystem as a Mastra `WorkspaceFilesystem`, so the
 * workspace file tools (read, write, edit, list, stat, mkdir, delete, grep)
 * work on the files the sandbox's commands see.
 *
 * ```ts
 * const sandbox = new SandboxdSandbox({ name: threadId });
 * new Workspace({ sandbox, filesystem: new SandboxdFilesystem({ sandbox }) });
 * ```
 *
 * Paths are paths inside the sandbox; relative ones resolve from the
 * working directory (`/workspace` by default).
 */
export class SandboxdFilesystem extends MastraFilesystem {
  readonly id: string;
  readonly name = "SandboxdFilesystem";
  readonly provider = "sandboxd";
  readonly readOnly: boolean;
  status: ProviderStatus = "pending";
  /** The client every call goes through. */
  readonly client: SandboxClient;
  /** The sandbox name every call uses. */
  readonly sandboxName: string;
  /** The sandbox these files belong to, when given. */
  readonly sandbox: SandboxdSandbox | undefined;
  readonly #workingDirectory: string;
  readonly #instructions: InstructionsOption | undefined;
  readonly #attachArgs: [string, { network: NonNullable<SandboxdFilesystemOptions["network"]> } | undefined];

  constructor(options: SandboxdFilesystemOptions) {
    super({ ...options, name: "SandboxdFilesystem" });
    const sandbox = options.sandbox;
    this.sandbox = sandbox;
    this.client = sandbox ? sandbox.client : clientOf(options);
    this.sandboxName = sandbox ? sandbox.sandboxName : checkName(options.name);
    this.#workingDirectory = resolveIn(
      "/",
      options.workingDirectory ?? sandbox?.workingDirectory ?? DEFAULT_WORKING_DIRECTORY,
    );
    this.id = options.id ?? `sandboxd-fs-${this.sandboxName}`;
    this.readOnly = options.readOnly ?? false;
    this.#instructions = options.instructions;
    const sandboxClass = sandbox ? sandbox.sandboxClass : (options.sandboxClass ?? "default");
    this.#attachArgs = [sandboxClass, options.network ? { network: options.network } : undefined];
  }

  /** What relative paths resolve from. */
  get basePath(): string {
    return this.#workingDirectory;
  }

  /** A path inside the sandbox made absolute against the working directory. */
  resolvePath(path: string): string {
    return resolveIn(this.#workingDirectory, path);
  }

  /**
   * With a sandbox: nothing (each operation starts the sandbox first).
   * Alone with a `network`: attaches, so a sandbox it creates has that
   * network (otherwise the first call attaches, as every client call does).
   */
  override async init(): Promise<void> {
    if (this.sandbox || !this.#attachArgs[1]) return;
    await this.client.attach(this.sandboxName, ...this.#attachArgs);
  }

  /** Leaves the sandbox and its files alone (the sandbox's `destroy` deletes them). */
  override async destroy(): Promise<void> {}

  getInfo(): FilesystemInfo {
    return {
      id: this.id,
      name: this.name,
      provider: this.provider,
      readOnly: this.readOnly,
      status: this.status,
      ...(this.error !== undefined ? { error: this.error } : {}),
      metadata: { sandboxName: this.sandboxName, workingDirectory: this.#workingDirectory },
    };
  }

  getInstructions(opts?: { requestContext?: RequestContext }): string {
    return resolveInstructions(
      this.#instructions,
      () =>
        `Files live in the sandboxd sandbox "${this.sandboxName}": the same filesystem its commands see. Relative paths resolve from ${this.#workingDirectory}; absolute paths are paths inside the sandbox.${this.readOnly ? " This filesystem is read-only." : ""}`,
      opts?.requestContext,
    );
  }

  // ---------------------------------------------------------------- native

  override async readFile(path: string, options?: ReadOptions): Promise<string | Buffer> {
    const abs = await this.#ready(path);
    let bytes: Uint8Array;
    try {
      bytes = await this.client.readFileBytes(this.sandboxName, abs);
    } catch (err) {
      if (isRequestError(err, 404)) {
        if (await this.#isDirectory(abs)) throw new IsDirectoryError(path);
        throw new FileNotFoundError(path);
      }
      throw this.#mapError(err, path, "read");
    }
    const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    return options?.encoding ? buf.toString(options.encoding) : buf;
  }

  override async writeFile(path: string, content: FileContent, options?: WriteOptions): Promise<void> {
    this.#assertWritable("writeFile");
    const abs = await this.#ready(path);
    if (options?.recursive === false) await this.#assertParent(path, abs);
    if (options?.overwrite === false && (await this.#exists(abs))) throw new FileExistsError(path);
    if (options?.expectedMtime) {
      const current = await this.#statOrUndefined(abs, path);
      if (current && current.modifiedAt.getTime() !== options.expectedMtime.getTime()) {
        throw new StaleFileError(path, options.expectedMtime, current.modifiedAt);
      }
    }
    try {
      await this.client.writeFileBytes(this.sandboxName, abs, bytesOf(content));
    } catch (err) {
      if (isRequestError(err, 400) && (await this.#isDirectory(abs))) throw new IsDirectoryError(path);
      throw this.#mapError(err, path, "write");
    }
  }

  override async readdir(path: string, options?: ListOptions): Promise<FileEntry[]> {
    const abs = await this.#ready(path);
    const depth = options?.recursive ? (options.maxDepth ?? 100) : 0;
    return this.#list(abs, path, options, depth, "");
  }

  override async exists(path: string): Promise<boolean> {
    const abs = await this.#ready(path);
    return this.#exists(abs);
  }

  // ---------------------------------------------------------------- through exec

  override async stat(path: string): Promise<FileStat> {
    const abs = await this.#ready(path);
    const st = await this.#statOrUndefined(abs, path);
    if (!st) throw new FileNotFoundError(path);
    return st;
  }

  override async mkdir(path: string, options?: { recursive?: boolean }): Promise<void> {
    this.#assertWritable("mkdir");
    const abs = await this.#ready(path);
    const recursive = options?.recursive ?? true;
    const r = await this.#exec(recursive ? ["mkdir", "-p", "--", abs] : ["mkdir", "--", abs]);
    if (r.exitCode === 0) return;
    const errno = errnoOf(r.stderr);
    if (errno === "EEXIST" || errno === "ENOTDIR") {
      if (await this.#isDirectory(abs)) return;
      if (await this.#exists(abs)) throw new FileExistsError(path);
      throw new NotDirectoryError(posix.dirname(path));
    }
    if (errno === "ENOENT") throw new DirectoryNotFoundError(posix.dirname(path));
    throw this.#commandError(r, path, "mkdir");
  }

  override async deleteFile(path: string, options?: RemoveOptions): Promise<void> {
    this.#assertWritable("deleteFile");
    const abs = await this.#ready(path);
    const r = await this.#exec(["rm", "--", abs]);
    if (r.exitCode === 0) return;
    const errno = errnoOf(r.stderr);
    if (errno === "EISDIR" || /directory/i.test(r.stderr)) {
      if (await this.#isDirectory(abs)) throw new IsDirectoryError(path);
    }
    if (errno === "ENOENT") {
      if (options?.force) return;
      throw new FileNotFoundError(path);
    }
    throw this.#commandError(r, path, "delete");
  }

  override async rmdir(path: string, options?: RemoveOptions): Promise<void> {
    this.#assertWritable("rmdir");
    const abs = await this.#ready(path);
    if (options?.recursive) {
      const st = await this.#statOrUndefined(abs, path);
      if (!st) {
        if (options.force) return;
        throw new DirectoryNotFoundError(path);
      }
      if (st.type !== "directory") throw new NotDirectoryError(path);
      const r = await this.#exec(["rm", "-r", "-f", "--", abs]);
      if (r.exitCode !== 0) throw this.#commandError(r, path, "rmdir");
      return;
    }
    const r = await this.#exec(["rmdir", "--", abs]);
    if (r.exitCode === 0) return;
    const errno = errnoOf(r.stderr);
    if (errno === "ENOENT") {
      if (options?.force) return;
      throw new DirectoryNotFoundError(path);
    }
    if (errno === "ENOTDIR") throw new NotDirectoryError(path);
    if (errno === "ENOTEMPTY" || errno === "EEXIST") throw new DirectoryNotEmptyError(path);
    throw this.#commandError(r, path, "rmdir");
  }

  override async copyFile(src: string, dest: string, options?: CopyOptions): Promise<void> {
    this.#assertWritable("copyFile");
    const from = await this.#ready(src);
    const to = this.resolvePath(dest);
    const st = await this.#statOrUndefined(from, src);
    if (!st) throw new FileNotFoundError(src);
    if (st.type === "directory" && !options?.recursive) throw new IsDirectoryError(src);
    if (options?.overwrite === false && st.type === "file" && (await this.#exists(to))) throw new FileExistsError(dest);
    const target = st.type === "directory" ? to : posix.dirname(to);
    const made = await this.#exec(["mkdir", "-p", "--", target]);
    if (made.exitCode !== 0) throw this.#commandError(made, dest, "copy");
    // A directory's contents go into dest (created above), as a file goes to dest.
    const argv =
      st.type === "directory"
        ? ["cp", "-R", ...(options?.overwrite === false ? ["-n"] : []), "--", `${from}/.`, to]
        : ["cp", "--", from, to];
    const r = await this.#exec(argv);
    if (r.exitCode !== 0) throw this.#commandError(r, src, "copy");
  }

  override async moveFile(src: string, dest: string, options?: CopyOptions): Promise<void> {
    this.#assertWritable("moveFile");
    const from = await this.#ready(src);
    const to = this.resolvePath(dest);
    if (!(await this.#exists(from))) throw new FileNotFoundError(src);
    if (options?.overwrite === false && (await this.#exists(to))) throw new FileExistsError(dest);
    const made = await this.#exec(["mkdir", "-p", "--", posix.dirname(to)]);
    if (made.exitCode !== 0) throw this.#commandError(made, dest, "move");
    const r = await this.#exec(["mv", "-f", "-T", "--", from, to]);
    if (r.exitCode !== 0) throw this.#commandError(r, src, "move");
  }

  /**
   * Appends without reading the file back: `dd oflag=append` in the sandbox,
   * fed the content through its stdin pipe.
   */
  override async appendFile(path: string, content: FileContent): Promise<void> {
    this.#assertWritable("appendFile");
    const abs = await this.#ready(path);
    const made = await this.#exec(["mkdir", "-p", "--", posix.dirname(abs)]);
    if (made.exitCode !== 0) throw this.#commandError(made, path, "append");
    const bytes = bytesOf(content);
    const name = this.sandboxName;
    const proc = await this.client.spawn(name, {
      command: ["dd", `of=${abs}`, "oflag=append", "conv=notrunc", "status=none"],
      stdin: true,
    });
    try {
      let at = 0;
      do {
        const end = Math.min(bytes.length, at + APPEND_CHUNK);
        await this.client.stdin(name, proc.processId, bytes.subarray(at, end), { close: end === bytes.length });
        at = end;
      } while (at < bytes.length);
      let out = await this.client.poll(name, proc.processId, { waitMs: 10_000 });
      let stderr = out.stderr;
      while (out.state !== "exited") {
        out = await this.client.poll(name, proc.processId, { stderrFrom: out.stderrNext, waitMs: 10_000 });
        stderr += out.stderr;
      }
      if (out.exitCode !== 0) {
        throw this.#commandError({ exitCode: out.exitCode ?? -1, stdout: "", stderr, truncated: false }, path, "append");
      }
    } finally {
      await this.client.kill(name, proc.processId).catch(() => {});
    }
  }

  /**
   * Content search in one `grep -rnHE` in the sandbox (C locale). The
   * pattern is translated to a POSIX ERE matching at least the lines the
   * JavaScript pattern matches, and each line found is checked with the
   * JavaScript pattern (which gives the column). Patterns that do not
   * translate, and context lines, throw `UnsupportedGrepPatternError`: Mastra
   * then searches host-side over the native listing and reads.
   */
  async grep(options: FilesystemGrepOptions): Promise<FilesystemGrepResult[]> {
    const abs = await this.#ready(options.path);
    if (options.contextLines && options.contextLines > 0) {
      throw new UnsupportedGrepPatternError(options.pattern, "context lines");
    }
    let regex: RegExp;
    try {
      regex = new RegExp(options.pattern, options.caseSensitive ? "" : "i");
    } catch (err) {
      throw new UnsupportedGrepPatternError(options.pattern, String(err));
    }
    const translated = toExtendedRegex(options.pattern, options.caseSensitive);
    if ("reason" in translated) throw new UnsupportedGrepPatternError(options.pattern, translated.reason);
    const argv = ["grep", "-r", "-n", "-H", "-E"];
    if (!options.caseSensitive) argv.push("-i");
    argv.push("-e", translated.ere, "--", abs);
    const r = await this.#exec(argv, { LC_ALL: "C" });
    const lines = parseGrepOutput(r.stdout, r.truncated);
    if (r.exitCode !== 0 && r.exitCode !== 1 && lines.length === 0) {
      if (errnoOf(r.stderr) === "ENOENT") throw new FileNotFoundError(options.path);
      throw new Error(`grep in the sandbox failed (${r.exitCode}): ${r.stderr.trim()}`);
    }
    const prefix = abs.endsWith("/") ? abs : `${abs}/`;
    const byFile = new Map<string, FilesystemGrepResult>();
    let total = 0;
    const perFile = options.maxCountPerFile;
    const cap = options.maxTotalMatches;
    for (const line of lines) {
      if (cap !== undefined && total >= cap) break;
      const rel = line.path.startsWith(prefix) ? line.path.slice(prefix.length) : line.path;
      if (!options.includeHidden && rel.split("/").some((s) => s.startsWith("."))) continue;
      const m = regex.exec(line.text);
      if (!m) continue; // the ERE is wider than the pattern
      let file = byFile.get(rel);
      if (!file) {
        file = { path: rel, matches: [] };
        byFile.set(rel, file);
      }
      if (perFile !== undefined && file.matches.length >= perFile) continue;
      file.matches.push({ line: line.line, column: m.index, text: line.text });
      total++;
    }
    // grep walks in directory order; answer in path order.
    return [...byFile.values()]
      .filter((f) => f.matches.length > 0)
      .sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  }

  // ---------------------------------------------------------------- internals

  /** Ready to operate: the sandbox started (when given), the path made absolute. */
  async #ready(path: string): Promise<string> {
    await this.ensureReady();
    if (this.sandbox) await this.sandbox.ensureRunning();
    return this.resolvePath(path);
  }

  #assertWritable(operation: string): void {
    if (this.readOnly) throw new WorkspaceReadOnlyError(operation);
  }

  async #exec(command: string[], env?: Record<string, string>): Promise<Ran> {
    const r = await this.client.exec(this.sandboxName, env ? { command, env } : { command });
    return { exitCode: r.exitCode, stdout: r.stdout, stderr: r.stderr, truncated: r.truncated };
  }

  async #list(abs: string, path: string, options: ListOptions | undefined, depth: number, prefix: string): Promise<FileEntry[]> {
    let rows: { name: string; isDirectory: boolean }[];
    try {
      rows = await this.client.listDir(this.sandboxName, abs);
    } catch (err) {
      if (isRequestError(err, 404)) {
        if (await this.#exists(abs)) throw new NotDirectoryError(path);
        throw new DirectoryNotFoundError(path);
      }
      throw this.#mapError(err, path, "list");
    }
    const extensions = options?.extension === undefined ? undefined : [options.extension].flat();
    const out: FileEntry[] = [];
    for (const row of rows) {
      const type = row.isDirectory ? "directory" : "file";
      if (extensions && type === "file") {
        const ext = posix.extname(row.name);
        if (!extensions.some((e) => e === ext || e === ext.slice(1))) continue;
      }
      out.push({ name: prefix + row.name, type });
      if (type === "directory" && depth > 0) {
        const child = posix.join(abs, row.name);
        out.push(...(await this.#list(child, posix.join(path, row.name), options, depth - 1, `${prefix}${row.name}/`)));
      }
    }
    return out;
  }

  /** Whether something is at `abs`: its name in its parent's native listing. */
  async #exists(abs: string): Promise<boolean> {
    if (abs === "/") return true;
    try {
      const rows = await this.client.listDir(this.sandboxName, posix.dirname(abs));
      return rows.some((row) => row.name === posix.basename(abs));
    } catch (err) {
      if (isRequestError(err, 404)) return false;
      throw err;
    }
  }

  async #isDirectory(abs: string): Promise<boolean> {
    if (abs === "/") return true;
    try {
      const rows = await this.client.listDir(this.sandboxName, posix.dirname(abs));
      return rows.some((row) => row.name === posix.basename(abs) && row.isDirectory);
    } catch (err) {
      if (isRequestError(err, 404)) return false;
      throw err;
    }
  }

  async #assertParent(path: string, abs: string): Promise<void> {
    const parent = posix.dirname(abs);
    if (await this.#isDirectory(parent)) return;
    if (await this.#exists(parent)) throw new NotDirectoryError(posix.dirname(path));
    throw new DirectoryNotFoundError(posix.dirname(path));
  }

  /** `stat -L` in the sandbox: type, size, mtime, and birth time where the tool knows it. */
  async #statOrUndefined(abs: string, path: string): Promise<FileStat | undefined> {
    const r = await this.#exec(["stat", "-L", "-c", "%F|%s|%Y|%Z|%W", "--", abs]);
    if (r.exitCode !== 0) {
      if (errnoOf(r.stderr) === "ENOENT" || errnoOf(r.stderr) === "ENOTDIR") return undefined;
      throw this.#commandError(r, path, "stat");
    }
    const [kind = "", size = "0", mtime = "0", ctime = "0", birth = ""] = r.stdout.trim().split("|");
    const type = kind.startsWith("directory") ? "directory" : "file";
    const modifiedAt = new Date(Number(mtime) * 1000);
    const born = Number(birth);
    const createdAt = new Date((Number.isFinite(born) && born > 0 ? born : Number(ctime)) * 1000);
    const st: FileStat = {
      name: posix.basename(abs),
      path: abs,
      type,
      size: type === "directory" ? 0 : Number(size) || 0,
      createdAt,
      modifiedAt,
    };
    const mime = type === "file" ? mimeTypeOf(abs) : undefined;
    if (mime) st.mimeType = mime;
    return st;
  }

  #mapError(err: unknown, path: string, operation: string): unknown {
    if (isRequestError(err, 404)) return new FileNotFoundError(path);
    if (isRequestError(err, 403)) return new PermissionError(path, operation);
    return err;
  }

  #commandError(r: Ran, path: string, operation: string): Error {
    const message = r.stderr.trim() || `exited with ${r.exitCode}`;
    switch (errnoOf(message)) {
      case "ENOENT":
        return new FileNotFoundError(path);
      case "EACCES":
        return new PermissionError(path, operation);
      case "EISDIR":
        return new IsDirectoryError(path);
      case "ENOTDIR":
        return new NotDirectoryError(path);
      case "ENOTEMPTY":
        return new DirectoryNotEmptyError(path);
      case "EEXIST":
        return new FileExistsError(path);
      default:
        return new Error(`${operation} ${path} in the sandbox failed: ${message}`);
    }
  }
}

function bytesOf(content: FileContent): Uint8Array {
  return typeof content === "string" ? encoder.encode(content) : content;
}
