/**
 * A sandboxd sandbox as a Mastra workspace sandbox provider.
 */
import type { Network, SandboxClient, SandboxRecord } from "@sandboxd/client";
import { MastraSandbox, SandboxAbortError, validateSandboxFileMode } from "@mastra/core/workspace";
import type {
  InstructionsOption,
  ProviderStatus,
  SandboxCloneOptions,
  SandboxFileInput,
  SandboxInfo,
  SandboxStartOptions,
  SandboxStartResult,
  WriteFilesOptions,
} from "@mastra/core/workspace";
import type { RequestContext } from "@mastra/core/request-context";
import {
  DEFAULT_POLL_WAIT_MS,
  DEFAULT_WORKING_DIRECTORY,
  checkName,
  clientOf,
  isRequestError,
  resolveIn,
  resolveInstructions,
} from "./internal.js";
import type { SandboxdSandboxOptions } from "./options.js";
import { SandboxdProcessManager } from "./processes.js";

/**
 * A named sandboxd sandbox: an isolated Linux machine (own kernel and
 * filesystem) where the agent's commands run, as a Mastra `MastraSandbox`.
 *
 * ```ts
 * new Workspace({ sandbox: new SandboxdSandbox({ name: threadId }) });
 * ```
 *
 * - `start()` attaches: creates the sandbox, reuses a running one or resumes
 *   a suspended one, and reports `created` or `connected`.
 * - `stop()` suspends it (`POST /v1/sandboxes/{name}/stop`); the next use
 *   resumes it. `destroy()` deletes it and its files.
 * - `executeCommand` and `processes` run `/bin/sh -c LINE` in it; output is
 *   streamed to `onStdout`/`onStderr` as it is written.
 * - A sandbox deleted or reclaimed behind the adapter's back is replaced on
 *   the next call by a new, empty one (the client re-attaches on the stale
 *   credential), instead of failing.
 */
export class SandboxdSandbox extends MastraSandbox {
  readonly id: string;
  /** The sandbox name (as given). */
  readonly name: string;
  readonly provider = "sandboxd";
  status: ProviderStatus = "pending";
  declare readonly processes: SandboxdProcessManager;

  /** The client every call goes through (shareable: pass it as `client` elsewhere). */
  readonly client: SandboxClient;
  /** The sandbox class a sandbox this adapter creates gets. */
  readonly sandboxClass: string;
  /** Longest long poll of a process handle, in ms. */
  readonly pollWaitMs: number;

  readonly #options: SandboxdSandboxOptions;
  readonly #instructions: InstructionsOption | undefined;
  readonly #requestedNetwork: Network | undefined;
  readonly #constructedAt = new Date();
  #network: Network | undefined;
  #image: string | undefined;

  constructor(options: SandboxdSandboxOptions) {
    const name = checkName(options?.name);
    const workingDirectory = resolveIn("/", options.workingDirectory ?? DEFAULT_WORKING_DIRECTORY);
    super({
      ...options,
      name,
      workingDirectory,
      processes: new SandboxdProcessManager(),
    });
    this.#options = options;
    this.id = options.id ?? name;
    this.name = name;
    this.client = clientOf(options);
    this.sandboxClass = options.sandboxClass ?? "default";
    this.#requestedNetwork = options.network;
    this.#network = options.network;
    this.#instructions = options.instructions;
    const wait = options.pollWaitMs;
    this.pollWaitMs = wait !== undefined && Number.isFinite(wait) && wait >= 0 ? wait : DEFAULT_POLL_WAIT_MS;
  }

  /** The sandbox name every call uses. */
  get sandboxName(): string {
    return this.name;
  }

  /** `nat` or `none` once known (configured, or reported at start). */
  get network(): Network | undefined {
    return this.#network;
  }

  /** What the sandbox's image says it is (`/etc/os-release`), once started. */
  get image(): string | undefined {
    return this.#image;
  }

  override get workingDirectory(): string {
    return super.workingDirectory ?? DEFAULT_WORKING_DIRECTORY;
  }

  /** A path inside the sandbox made absolute against the working directory. */
  resolvePath(path: string | undefined): string {
    return resolveIn(this.workingDirectory, path);
  }

  /**
   * Attaches (creates, reuses or resumes the sandbox) and reports whether
   * this start created it. Created vs connected is told by the sandbox's
   * record before and after the attach: no record before, or a different
   * `createdAt` after (it was replaced meanwhile), is `created`.
   */
  override async start(options?: SandboxStartOptions): Promise<SandboxStartResult> {
    const signal = options?.abortSignal;
    signal?.throwIfAborted();
    const before = await this.#getRecord();
    signal?.throwIfAborted();
    const attachOptions = this.#requestedNetwork ? { network: this.#requestedNetwork } : undefined;
    const handle = await this.client.attach(this.name, this.sandboxClass, attachOptions);
    const after = await this.#getRecord();
    this.#network = handle.network ?? after?.network ?? this.#network;
    this.#image = await this.#probeImage();
    this.processes.resume();
    const connected = before !== undefined && after !== undefined && before.createdAt === after.createdAt;
    return { outcome: connected ? "connected" : "created" };
  }

  /** Suspends the sandbox early (memory and files kept); the next use resumes it. */
  override async stop(): Promise<void> {
    this.processes.pause();
    try {
      await this.client.stop(this.name);
    } catch (err) {
      if (!isRequestError(err, 404)) throw err; // nothing there to suspend
    }
  }

  /** Deletes the sandbox and its filesystem. A later start creates an empty one. */
  override async destroy(): Promise<void> {
    this.processes.close();
    try {
      await this.client.delete(this.name);
    } catch (err) {
      if (!isRequestError(err, 404)) throw err; // already gone
    }
  }

  /** @deprecated Use `status === 'running'` instead. */
  async isReady(): Promise<boolean> {
    return this.status === "running";
  }

  /** Status and metadata, with the server's record of the sandbox (read now). */
  override async getInfo(): Promise<SandboxInfo> {
    const record = await this.#getRecord();
    const info: SandboxInfo = {
      id: this.id,
      name: this.name,
      provider: this.provider,
      status: this.status,
      createdAt: dateOf(record?.createdAt) ?? this.#constructedAt,
      metadata: {
        sandboxName: this.name,
        state: record?.state ?? "absent",
        class: record?.class ?? this.sandboxClass,
        network: record?.network ?? this.#network,
        image: this.#image,
        workingDirectory: this.workingDirectory,
      },
    };
    const lastUsed = dateOf(record?.lastActiveAt);
    if (lastUsed) info.lastUsedAt = lastUsed;
    const ceiling = dateOf(record?.ceilingAt);
    if (ceiling) info.timeoutAt = ceiling;
    return info;
  }

  /** What the model is told about this sandbox. */
  override getInstructions(opts?: { requestContext?: RequestContext }): string {
    return resolveInstructions(this.#instructions, () => this.#defaultInstructions(), opts?.requestContext);
  }

  /**
   * Writes files into the sandbox through the native file endpoint (parent
   * directories created); a `mode` is applied with `chmod` in the sandbox.
   */
  override async writeFiles(files: SandboxFileInput[], options?: WriteFilesOptions): Promise<void> {
    const signal = options?.abortSignal;
    for (const file of files) if (file.mode !== undefined) validateSandboxFileMode(file.mode);
    if (signal?.aborted) throw new SandboxAbortError("writeFiles", signal.reason);
    await this.ensureRunning();
    for (const file of files) {
      if (signal?.aborted) throw new SandboxAbortError("writeFiles", signal.reason);
      const path = this.resolvePath(file.path);
      const content = typeof file.content === "string" ? new TextEncoder().encode(file.content) : file.content;
      await this.client.writeFileBytes(this.name, path, content);
      if (file.mode !== undefined) {
        const r = await this.client.exec(this.name, { command: ["chmod", file.mode.toString(8), "--", path] });
        if (r.exitCode !== 0) throw new Error(`chmod ${file.mode.toString(8)} ${path}: ${r.stderr.trim()}`);
      }
    }
  }

  /**
   * A sibling sandbox with this one's client and settings: `sandboxId` (or
   * `id`) names it, else a new name is made from this one's.
   */
  clone(options: SandboxCloneOptions = {}): SandboxdSandbox {
    const name = options.sandboxId ?? options.id ?? `${this.name.slice(0, 100)}-${Math.random().toString(36).slice(2, 10)}`;
    const next: SandboxdSandboxOptions = { ...this.#options, client: this.client, name, env: options.env ?? this.getEnv() };
    delete next.id;
    if (options.id !== undefined) next.id = options.id;
    next.workingDirectory = options.workingDirectory ?? this.workingDirectory;
    return new SandboxdSandbox(next);
  }

  async #getRecord(): Promise<SandboxRecord | undefined> {
    try {
      return await this.client.get(this.name);
    } catch (err) {
      if (isRequestError(err, 404)) return undefined;
      throw err;
    }
  }

  /** What the image is: `/etc/os-release`'s PRETTY_NAME, or a BusyBox userland. */
  async #probeImage(): Promise<string | undefined> {
    try {
      const text = await this.client.readFile(this.name, "/etc/os-release");
      const m = /^PRETTY_NAME=(.*)$/m.exec(text) ?? /^NAME=(.*)$/m.exec(text);
      const value = m?.[1]?.trim().replace(/^["']|["']$/g, "");
      if (value) return value;
    } catch (err) {
      if (!isRequestError(err, 404)) return this.#image;
    }
    try {
      const bin = await this.client.listDir(this.name, "/bin");
      if (bin.some((e) => e.name === "busybox")) return "a minimal BusyBox userland";
    } catch {
      // unknown
    }
    return undefined;
  }

  #defaultInstructions(): string {
    const parts = [
      `Commands run in the sandboxd sandbox "${this.name}": an isolated Linux virtual machine with its own kernel and filesystem, separate from the host the agent runs on${this.#image ? ` (image: ${this.#image})` : ""}.`,
      `Commands run through /bin/sh -c, as root inside the sandbox. Working directory: ${this.workingDirectory}; relative paths resolve from it.`,
    ];
    if (this.#network === "none") {
      parts.push("Network: none (loopback only). Nothing can be downloaded: do not try to install packages from the internet.");
    } else if (this.#network === "nat") {
      parts.push("Network: outbound internet through NAT; the host, private networks and other sandboxes are not reachable.");
    } else {
      parts.push("Network: the server's default (NAT to the internet, or none).");
    }
    parts.push(
      "The sandbox is scratch space: it is suspended when idle and may be reclaimed later (it then comes back empty), so keep nothing there that must outlive the conversation.",
    );
    return parts.join(" ");
  }
}

function dateOf(s: string | undefined): Date | undefined {
  if (!s) return undefined;
  const t = Date.parse(s);
  return Number.isFinite(t) ? new Date(t) : undefined;
}
