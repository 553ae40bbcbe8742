/** Options of {@link SandboxClient}. Every field is optional. */
export interface SandboxOptions {
  /**
   * Identity token (a JWT) sent to the control plane.
   * Default: `process.env.ASTRO_AUTHZ_TOKEN`, then `process.env.SANDBOXD_TOKEN`.
   */
  identityToken?: string;
  /** Base URL of the control plane. Default: the `iss` claim of the identity token. */
  serverUrl?: string;
  /** Upper bound of every HTTP request, in seconds. Default 30. */
  timeoutSeconds?: number;
  /** The fetch implementation to use. Default: the global `fetch`. */
  fetchImpl?: typeof fetch;
}

/** The answer of `attach`: where and how to reach a sandbox's data plane. */
export interface SandboxHandle {
  /** The sandbox name. */
  name: string;
  /** The class the sandbox was created in: `default` unless one was named (`ns`, `gvisor`). */
  class: string;
  /** `running`. */
  state: string;
  /** Base URL of the data plane, scheme included. */
  endpoint: string;
  /** Opaque credentials for the data plane. */
  headers: Record<string, string>;
  /** RFC 3339. When `headers` stop working. */
  expiresAt: string;
  /** Beyond the documented client: `nat` or `none`, chosen at creation. */
  network?: Network;
}

export interface ExecRequest {
  /** Argv. Not a shell line. */
  command: string[];
  /** Defaults to `/workspace`. */
  cwd?: string;
  env?: Record<string, string>;
  /** Bounded to one second under the client's `timeoutSeconds`. */
  timeoutMs?: number;
}

export interface ExecResult {
  exitCode: number;
  stdout: string;
  stderr: string;
  durationMs: number;
  /** Killed at its timeout rather than exiting. */
  timedOut: boolean;
  /** Output was cut at 1 MiB. */
  truncated: boolean;
}

export interface SpawnRequest {
  command: string[];
  cwd?: string;
  env?: Record<string, string>;
  /**
   * Give the process a stdin pipe, written with `SandboxClient.stdin`.
   * Without it the process reads `/dev/null`.
   */
  stdin?: boolean;
}

export interface ProcessStatus {
  processId: string;
  command: string[];
  state: "running" | "exited";
  /** Absent while running. */
  exitCode?: number;
  /** RFC 3339. */
  startedAt: string;
  /** Absent while running. */
  exitedAt?: string;
  /**
   * Beyond the documented client: `true` on the record of an `exec` whose
   * answer was lost (the server went away while it ran); absent otherwise.
   */
  exec?: true;
  /** On an exec's record: what its `ExecResult` would have said. */
  timedOut?: boolean;
  /** On an exec's record: output was cut at 1 MiB. */
  truncated?: boolean;
}

export interface ProcessOutput extends ProcessStatus {
  /** Output after `stdoutFrom`. */
  stdout: string;
  /** Output after `stderrFrom`. */
  stderr: string;
  /** Pass as the next `stdoutFrom`. */
  stdoutNext: number;
  /** Pass as the next `stderrFrom`. */
  stderrNext: number;
  /** Bytes discarded before this read. */
  stdoutDropped: number;
  /** As above, for stderr. */
  stderrDropped: number;
}

export interface PollOptions {
  stdoutFrom?: number;
  stderrFrom?: number;
  /**
   * Wait up to this long for new output or the exit before answering
   * (a long poll). Bounded to one second under the client's `timeoutSeconds`.
   * Default 0: answer at once.
   */
  waitMs?: number;
}

export interface RunOptions {
  /** Minimum gap between two polls when a poll brought nothing new. Default 500. */
  intervalMs?: number;
  /** Called with each polled chunk that carries output. */
  onOutput?: (chunk: ProcessOutput) => void;
  /** Kill the process once this long has passed. Default: none. */
  timeoutMs?: number;
  /** Kill the process when this signal aborts. */
  signal?: AbortSignal;
}

/**
 * The final `ProcessOutput` of a `run`, where `stdout` and `stderr` hold the
 * whole output read across every poll, `stdoutNext`/`stderrNext` the final
 * offsets and `stdoutDropped`/`stderrDropped` the bytes lost in total.
 */
export interface RunResult extends ProcessOutput {
  /** `timeoutMs` elapsed. */
  timedOut: boolean;
  /** Stopped by `timeoutMs` or `signal` rather than exiting. */
  killed: boolean;
}

export type Signal = "TERM" | "KILL" | "INT" | "HUP" | "QUIT" | "USR1" | "USR2";

export interface DirEntry {
  name: string;
  isDirectory: boolean;
}

export interface GrepMatch {
  path: string;
  line: number;
  text: string;
}

export interface SandboxRecord {
  name: string;
  class: string;
  /** `running`, `suspended`, or `stopped`. */
  state: string;
  /** RFC 3339. */
  createdAt: string;
  /** RFC 3339. */
  lastActiveAt: string;
  /** When the runtime reclaims it regardless of activity. Absent when nothing runs. */
  ceilingAt?: string;
  /** Beyond the documented client: `nat` or `none`. */
  network?: Network;
}

/** A sandbox's network (beyond the documented client): `nat` reaches the
 * internet and nothing private; `none` is loopback only. */
export type Network = "nat" | "none";

/** Options of `checkpoint` (classes that can: `gvisor`). */
export interface CheckpointOptions {
  /** false: the sandbox stops once saved; its next use restores it. Default true. */
  keepRunning?: boolean;
}

/** A checkpoint taken. */
export interface CheckpointInfo {
  /** What it takes on the host. */
  sizeBytes: number;
  /** How long the save took (the sandbox paused meanwhile). */
  durationMs: number;
  /** RFC 3339. */
  createdAt: string;
  /** Whether the sandbox runs on. */
  running: boolean;
}

/** Options of `SandboxClient.attach` beyond the documented ones. */
export interface AttachOptions {
  /** The network of a sandbox this attach creates; the server's default
   * when absent. Naming another one for an existing sandbox is a 409. */
  network?: Network;
}

/** Options of `SandboxClient.stdin`. */
export interface StdinOptions {
  /** Close the process's stdin after writing `data`. */
  close?: boolean;
}

/** The answer of `execCombined`. */
export interface CombinedResult {
  output: string;
  exitCode: number;
  truncated: boolean;
}
