/**
 * Processes of a sandboxd sandbox, as Mastra's process manager and handles.
 *
 * A process is spawned with `SandboxClient.spawn` (`/bin/sh -c LINE`), and
 * its output and exit are read with `SandboxClient.poll` long polls
 * (`waitMs`): a poll answers as soon as new output exists or the process
 * exits, so callbacks see output as it is written, and a quiet process costs
 * one request every `pollWaitMs`. A handle has at most one poll in flight;
 * everyone waiting on it shares that poll.
 */
import { ProcessHandle, SandboxNotReadyError, SandboxProcessManager } from "@mastra/core/workspace";
import type { CommandResult, ProcessInfo, SpawnProcessOptions } from "@mastra/core/workspace";
import type { ProcessOutput, ProcessStatus, SpawnRequest } from "@sandboxd/client";
import { PROCESS_ID_RE, cleanEnv, commandLine, isGone, isRequestError } from "./internal.js";
import type { SandboxdSandbox } from "./sandbox.js";

const encoder = new TextEncoder();

/** Bytes per stdin request (the server takes just under 8 MiB per write). */
const STDIN_CHUNK = 4 << 20;

/** Exit code reported when a command ran into its `timeout` (as `timeout(1)` and Mastra's local sandbox do). */
export const TIMEOUT_EXIT_CODE = 124;

/** Exit code reported when the process's record is gone and its exit is unknown. */
export const LOST_EXIT_CODE = -1;

type ProcessManagerOptions = NonNullable<ConstructorParameters<typeof SandboxProcessManager>[0]>;

type HandleOptions = Pick<SpawnProcessOptions, "maxRetainedBytes" | "onStdout" | "onStderr" | "timeout"> & {
  /** The process reads a pipe written with sendStdin (spawned with `stdin: true`). */
  stdin: boolean;
  command?: string;
  /** Found by `get` rather than spawned here. */
  adopted?: boolean;
};

/**
 * Mastra's process manager over the sandbox's process table, at
 * `sandbox.processes`.
 *
 * `spawn` starts `/bin/sh -c LINE` with the sandbox's env overlay merged
 * under the command's env (Mastra's base class merges it), in the command's
 * `cwd` or the sandbox's working directory. `list` reads the server's table,
 * so it lists what another adapter instance on the same name spawned too;
 * `get(pid)` of a process this instance did not spawn (after a reconnect)
 * adopts it, its output read from the start (the server keeps 1 MiB per
 * stream).
 */
export class SandboxdProcessManager extends SandboxProcessManager<SandboxdSandbox> {
  #state: "active" | "paused" | "closed" = "active";
  /** Every handle made here until released (Mastra's `_tracked` drops exited ones when read). */
  readonly #handles = new Map<string, SandboxdProcessHandle>();
  /** Bumped on every pause/close, so a poll in flight at a stop knows it was stopped. */
  #epoch = 0;
  /** The waits in progress, ended at once when the sandbox stops or is destroyed. */
  readonly #waiters = new Set<(err: unknown) => void>();

  constructor(options: ProcessManagerOptions = {}) {
    super(options);
  }

  override async spawn(command: string, options: SpawnProcessOptions = {}): Promise<SandboxdProcessHandle> {
    const sb = this.sandbox;
    options.abortSignal?.throwIfAborted();
    const stdin = options.stdinMode !== "ignore";
    const request: SpawnRequest = {
      command: ["/bin/sh", "-c", command],
      cwd: sb.resolvePath(options.cwd),
    };
    const env = cleanEnv(options.env);
    if (env) request.env = env;
    if (stdin) request.stdin = true;
    const status = await sb.client.spawn(sb.sandboxName, request);
    const handleOptions: HandleOptions = { stdin, command };
    if (options.maxRetainedBytes !== undefined) handleOptions.maxRetainedBytes = options.maxRetainedBytes;
    if (options.onStdout) handleOptions.onStdout = options.onStdout;
    if (options.onStderr) handleOptions.onStderr = options.onStderr;
    if (options.timeout !== undefined) handleOptions.timeout = options.timeout;
    const handle = new SandboxdProcessHandle(this, status, handleOptions);
    this._tracked.set(handle.pid, handle);
    this.#handles.set(handle.pid, handle);
    return handle;
  }

  override async list(): Promise<ProcessInfo[]> {
    const sb = this.sandbox;
    const rows = await sb.client.processes(sb.sandboxName);
    return rows
      .filter((row) => !this._dismissed.has(row.processId))
      .map((row) => {
        const info: ProcessInfo = {
          pid: row.processId,
          command: this._tracked.get(row.processId)?.command ?? commandLine(row.command),
          running: row.state === "running",
        };
        if (row.exitCode !== undefined) info.exitCode = row.exitCode;
        return info;
      });
  }

  override async get(pid: string): Promise<SandboxdProcessHandle | undefined> {
    const tracked = this._tracked.get(pid);
    if (tracked instanceof SandboxdProcessHandle) {
      await tracked.refresh();
      // Read after its exit: Mastra's manager now dismisses it for good.
      if (tracked.exitCode !== undefined) this.#forget(tracked);
      return tracked;
    }
    if (typeof pid !== "string" || !PROCESS_ID_RE.test(pid)) return undefined;
    const sb = this.sandbox;
    let out: ProcessOutput;
    try {
      out = await sb.client.poll(sb.sandboxName, pid);
    } catch (err) {
      if (isGone(err)) return undefined;
      throw err;
    }
    // Adopted: spawned by another instance (or before a restart). Whether it
    // has a stdin pipe is not recorded; a write to one without gets 409.
    const handle = new SandboxdProcessHandle(this, out, { stdin: true, command: commandLine(out.command), adopted: true });
    handle.take(out);
    if (out.state === "exited") await handle.refresh(); // read to the end
    this._tracked.set(pid, handle);
    if (handle.exitCode === undefined) this.#handles.set(pid, handle);
    return handle;
  }

  /**
   * Forgets a finished process here and, when this instance spawned it, on
   * the server too (its record and output), so finished commands do not
   * push other exited records out of the sandbox's table. A process still
   * running, or one adopted by `get` (someone else's), is only forgotten
   * here.
   */
  override release(pid: string): void {
    const handle = this.#handles.get(pid);
    super.release(pid);
    if (handle) this.#forget(handle);
  }

  #forget(handle: SandboxdProcessHandle): void {
    this.#handles.delete(handle.pid);
    handle.dispose();
    if (handle.exitCode === undefined || handle.lost || handle.adopted) return;
    const sb = this.sandbox;
    // Best effort: the result is already known.
    sb.client.kill(sb.sandboxName, handle.pid).catch(() => {});
  }

  /** @internal The sandbox is stopping: polls end, waits reject. */
  pause(): void {
    this.#state = "paused";
    this.#epoch++;
    this.#haltWaits();
  }

  /** @internal The sandbox (re)started: handles that stream to callbacks resume polling. */
  resume(): void {
    if (this.#state === "closed") return;
    this.#state = "active";
    for (const handle of this.#handles.values()) handle.resumeStreaming();
  }

  /** @internal The sandbox is destroyed: everything stops for good. */
  close(): void {
    this.#state = "closed";
    this.#epoch++;
    this.#haltWaits();
    for (const handle of this.#handles.values()) handle.dispose();
  }

  /** @internal */
  get epoch(): number {
    return this.#epoch;
  }

  /** @internal Throws when polling must not go on (the sandbox is stopped or destroyed). */
  assertActive(): void {
    if (this.#state !== "active") throw this.#notReady();
  }

  /** @internal Calls `reject` when the sandbox stops or is destroyed; returns the unsubscribe. */
  onHalt(reject: (err: unknown) => void): () => void {
    this.#waiters.add(reject);
    return () => this.#waiters.delete(reject);
  }

  #haltWaits(): void {
    const err = this.#notReady();
    const waiters = [...this.#waiters];
    this.#waiters.clear();
    for (const reject of waiters) reject(err);
  }

  #notReady(): SandboxNotReadyError {
    return new SandboxNotReadyError(`${this.sandbox.id} (${this.#state === "paused" ? "stopped" : "destroyed"})`);
  }
}

/**
 * A process in a sandboxd sandbox (Mastra's `ProcessHandle`).
 *
 * - `stdout`/`stderr`/`exitCode` are what has been read so far; the process
 *   manager's `get(pid)` reads what is new before returning the handle.
 * - `wait()` long-polls until the exit, emitting output as it arrives.
 * - `kill()` sends SIGKILL to the process group: true, or false when the
 *   process had already exited (or is gone).
 * - `sendStdin`/`closeStdin` write the process's stdin pipe (not for
 *   processes spawned with `stdinMode: 'ignore'`).
 * - `timeout` (at spawn) kills the process group when it elapses; the result
 *   then has `timedOut: true` and exit code 124.
 */
export class SandboxdProcessHandle extends ProcessHandle {
  readonly pid: string;
  /** Found by the manager's `get` (spawned elsewhere) rather than spawned by this instance. */
  readonly adopted: boolean;
  readonly #manager: SandboxdProcessManager;
  readonly #stdin: boolean;
  readonly #startedAt: number;
  readonly #streaming: boolean;
  #exitCode: number | undefined;
  #exitedAt: number | undefined;
  #stdoutNext = 0;
  #stderrNext = 0;
  #inflight: Promise<boolean> | undefined;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #timeoutMs: number | undefined;
  #timedOut = false;
  #killed = false;
  #lost = false;
  /** Bytes the sandbox discarded before they were read (it keeps 1 MiB per stream). */
  #stdoutLost = 0;
  #stderrLost = 0;
  /** A poll said the process exited; its exit is final once a poll brings nothing more. */
  #sawExit = false;
  #stdinQueue: Promise<void> = Promise.resolve();

  /** @internal Made by {@link SandboxdProcessManager}. */
  constructor(manager: SandboxdProcessManager, status: ProcessStatus, options: HandleOptions) {
    const base: Pick<SpawnProcessOptions, "maxRetainedBytes" | "onStdout" | "onStderr"> = {};
    if (options.maxRetainedBytes !== undefined) base.maxRetainedBytes = options.maxRetainedBytes;
    if (options.onStdout) base.onStdout = options.onStdout;
    if (options.onStderr) base.onStderr = options.onStderr;
    super(base);
    this.#manager = manager;
    this.pid = status.processId;
    this.adopted = options.adopted ?? false;
    this.#stdin = options.stdin;
    if (options.command !== undefined) this.command = options.command;
    const started = Date.parse(status.startedAt);
    this.#startedAt = Number.isFinite(started) ? started : Date.now();
    this.#streaming = Boolean(options.onStdout || options.onStderr);
    const timeout = options.timeout;
    if (timeout !== undefined && Number.isFinite(timeout) && timeout > 0 && status.state === "running") {
      this.#timeoutMs = timeout;
      this.#timer = setTimeout(() => void this.#onTimeout(), timeout);
    }
    if (this.#streaming) this.#stream();
  }

  get exitCode(): number | undefined {
    return this.#exitCode;
  }

  /** Dropped here (past `maxRetainedBytes`) or in the sandbox (a producer faster than the polls). */
  override get stdoutDroppedBytes(): number {
    return super.stdoutDroppedBytes + this.#stdoutLost;
  }

  override get stderrDroppedBytes(): number {
    return super.stderrDroppedBytes + this.#stderrLost;
  }

  override get stdoutTruncated(): boolean {
    return super.stdoutTruncated || this.#stdoutLost > 0;
  }

  override get stderrTruncated(): boolean {
    return super.stderrTruncated || this.#stderrLost > 0;
  }

  /** True when the process's record was gone before its exit was seen (exit code -1). */
  get lost(): boolean {
    return this.#lost;
  }

  override async wait(): Promise<CommandResult> {
    if (this.#exitCode === undefined) {
      // A stop ends the wait at once, without waiting for the poll in flight
      // (which may answer only much later).
      await new Promise<void>((resolve, reject) => {
        const unsubscribe = this.#manager.onHalt(reject);
        this.#pollToExit().then(resolve, reject).finally(unsubscribe);
      });
    }
    return this.#result();
  }

  override async kill(): Promise<boolean> {
    if (this.#exitCode === undefined && !this.#inflight) await this.refresh();
    if (this.#exitCode !== undefined) return false;
    const sb = this.#manager.sandbox;
    // Set first: the poll in flight may see the exit before the signal's answer arrives.
    this.#killed = true;
    try {
      await sb.client.signal(sb.sandboxName, this.pid, "KILL");
    } catch (err) {
      if (isGone(err)) {
        this.#markLost();
        return false;
      }
      if (this.#exitCode === undefined) this.#killed = false;
      throw err;
    }
    return true;
  }

  override async sendStdin(data: string): Promise<void> {
    this.#checkStdin();
    await this.#write(encoder.encode(data), false);
  }

  override async closeStdin(): Promise<void> {
    this.#checkStdin();
    await this.#write(new Uint8Array(0), true);
  }

  /**
   * Reads what is new (output, the exit) unless a poll is in flight: that
   * one answers as soon as anything is new, so the handle is current.
   */
  async refresh(): Promise<void> {
    if (this.#exitCode !== undefined || this.#inflight) return;
    await this.#poll(0);
    // After the exit, read on until nothing more comes (finite: it exited).
    while (this.#exitCode === undefined && this.#sawExit) await this.#poll(0);
  }

  /** @internal Takes a polled answer in. True when it moved the offsets. */
  take(out: ProcessOutput): boolean {
    let moved = false;
    this.#stdoutLost += out.stdoutDropped;
    this.#stderrLost += out.stderrDropped;
    if (out.stdoutNext > this.#stdoutNext) {
      if (out.stdout) this.emitStdout(out.stdout);
      this.#stdoutNext = out.stdoutNext;
      moved = true;
    }
    if (out.stderrNext > this.#stderrNext) {
      if (out.stderr) this.emitStderr(out.stderr);
      this.#stderrNext = out.stderrNext;
      moved = true;
    }
    // An exit is final once a poll after it brought nothing more.
    if (out.state === "exited") this.#sawExit = true;
    if (out.state === "exited" && !moved && this.#exitCode === undefined) {
      const at = out.exitedAt === undefined ? Number.NaN : Date.parse(out.exitedAt);
      this.#finish(out.exitCode ?? LOST_EXIT_CODE, Number.isFinite(at) ? at : Date.now());
    }
    return moved;
  }

  /** @internal Ends timers; the handle keeps what it read. */
  dispose(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  /** @internal The sandbox started again: a handle with callbacks polls again. */
  resumeStreaming(): void {
    if (this.#streaming && this.#exitCode === undefined) this.#stream();
  }

  // ---------------------------------------------------------------- internals

  async #pollToExit(): Promise<void> {
    while (this.#exitCode === undefined) {
      this.#manager.assertActive();
      await this.#poll(this.#manager.sandbox.pollWaitMs);
    }
  }

  /** Polls in the background for the spawn-time callbacks. */
  #stream(): void {
    this.wait().catch(() => {
      // Stopped, destroyed or unreachable: whoever waits sees that error.
    });
  }

  /** One poll, shared with whoever else polls now. Resolves true when it moved the offsets. */
  #poll(waitMs: number): Promise<boolean> {
    if (!this.#inflight) {
      this.#inflight = this.#pollNow(waitMs).finally(() => {
        this.#inflight = undefined;
      });
    }
    return this.#inflight;
  }

  async #pollNow(waitMs: number): Promise<boolean> {
    const sb = this.#manager.sandbox;
    const epoch = this.#manager.epoch;
    let out: ProcessOutput;
    try {
      out = await sb.client.poll(sb.sandboxName, this.pid, {
        stdoutFrom: this.#stdoutNext,
        stderrFrom: this.#stderrNext,
        waitMs,
      });
    } catch (err) {
      if (this.#manager.epoch !== epoch) this.#manager.assertActive();
      if (isGone(err)) {
        this.#markLost();
        return false;
      }
      throw err;
    }
    return this.take(out);
  }

  async #onTimeout(): Promise<void> {
    this.#timer = undefined;
    if (this.#exitCode !== undefined) return;
    this.#timedOut = true;
    this.#killed = true;
    const sb = this.#manager.sandbox;
    try {
      await sb.client.signal(sb.sandboxName, this.pid, "KILL");
    } catch (err) {
      if (isGone(err)) this.#markLost();
      // Otherwise the next poll tells what became of it.
    }
  }

  #finish(code: number, exitedAt: number): void {
    this.dispose();
    if (this.#timedOut) {
      this.emitStderr(`\nProcess timed out after ${this.#timeoutMs}ms`);
      code = TIMEOUT_EXIT_CODE;
    }
    this.#exitedAt = exitedAt;
    this.#exitCode = code;
  }

  #markLost(): void {
    if (this.#exitCode !== undefined) return;
    this.#lost = true;
    this.emitStderr(
      `\n[sandboxd] process ${this.pid} is gone: its sandbox was deleted or reclaimed, or its record was forgotten`,
    );
    this.#finish(LOST_EXIT_CODE, Date.now());
  }

  #result(): CommandResult {
    const exitCode = this.#exitCode ?? LOST_EXIT_CODE;
    const result: CommandResult = {
      success: exitCode === 0,
      exitCode,
      stdout: this.stdout,
      stderr: this.stderr,
      executionTimeMs: Math.max(0, (this.#exitedAt ?? Date.now()) - this.#startedAt),
      timedOut: this.#timedOut,
      killed: this.#killed,
    };
    if (this.command !== undefined) result.command = this.command;
    return result;
  }

  #checkStdin(): void {
    if (this.#exitCode !== undefined) {
      throw new Error(`Process ${this.pid} has already exited with code ${this.#exitCode}`);
    }
    if (!this.#stdin) throw new Error(`Process ${this.pid} has no stdin (it was spawned with stdinMode 'ignore')`);
  }

  /** Writes one after the other (the server takes one write at a time per process). */
  #write(bytes: Uint8Array, close: boolean): Promise<void> {
    const next = this.#stdinQueue.then(() => this.#writeNow(bytes, close));
    this.#stdinQueue = next.catch(() => {});
    return next;
  }

  async #writeNow(bytes: Uint8Array, close: boolean): Promise<void> {
    const sb = this.#manager.sandbox;
    let at = 0;
    do {
      const end = Math.min(bytes.length, at + STDIN_CHUNK);
      const last = end === bytes.length;
      try {
        await sb.client.stdin(sb.sandboxName, this.pid, bytes.subarray(at, end), { close: close && last });
        at = end;
      } catch (err) {
        // 408: the process did not take all of it within 10 s; resume from
        // what it took, as long as it takes something.
        if (isRequestError(err, 408) && err.written !== undefined && err.written > 0) {
          at += err.written;
          continue;
        }
        throw err;
      }
    } while (at < bytes.length);
  }
}
