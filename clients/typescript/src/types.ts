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
  /** Beyond the documented client: the image it was created from. */
  image?: string;
  /** Cluster mode: `host_lost` when this name was made anew because the
   * host that held it is gone (its files with it). */
  recreated?: Recreated;
}

/** Why a sandbox was made anew under an existing name (cluster mode). */
export type Recreated = "host_lost";

export interface ExecRequest {
  /** Argv. Not a shell line. */
  command: string[];
  /** Defaults to `/workspace`. */
  cwd?: string;
  env?: Record<string, string>;
  /** Beyond the documented client: run as this user (`"app"`, `"1000"`,
   * `"app:staff"`), looked up in the sandbox; default the image's, else root. */
  user?: string;
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
  /** Beyond the documented client: as `ExecRequest.user`. */
  user?: string;
  /**
   * Give the process a stdin pipe, written with `SandboxClient.stdin`.
   * Without it the process reads `/dev/null`.
   */
  stdin?: boolean;
  /**
   * Beyond the documented client: hold the process's output for a reader
   * from its first byte, so a `stream` (or `run`) gets all of it. The
   * sandbox reads at most 256 KiB ahead of what a reader was sent; a
   * lossless process nobody reads blocks once that much waits.
   */
  lossless?: boolean;
  /**
   * Beyond the documented client: run the process on a terminal of this
   * size (each 1 to 4096). Its output (echo and control sequences included)
   * comes on stdout, stderr stays empty, and stdin is always open and raw
   * (`stdin` is implied). Resize it with `SandboxClient.resize`.
   */
  pty?: PtySize;
}

/** A terminal's size, in character cells. */
export interface PtySize {
  cols: number;
  rows: number;
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
  /** Beyond the documented client: `true` when spawned with `pty`; absent otherwise. */
  pty?: true;
  /** Beyond the documented client: `true` when spawned with `lossless`; absent otherwise. */
  lossless?: true;
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
  /**
   * Accepted for compatibility and no longer used: `run` reads the process's
   * output as a stream, as it is written, rather than polling.
   */
  intervalMs?: number;
  /**
   * Called with each piece of output as it arrives (one per frame of the
   * stream that decodes to some text): `stdout` or `stderr` holds it, the
   * offsets are those after it.
   */
  onOutput?: (chunk: ProcessOutput) => void;
  /** Kill the process once this long has passed. Default: none. */
  timeoutMs?: number;
  /** Kill the process when this signal aborts. */
  signal?: AbortSignal;
}

/**
 * The final `ProcessOutput` of a `run`, where `stdout` and `stderr` hold the
 * whole output, `stdoutNext`/`stderrNext` the final offsets and
 * `stdoutDropped`/`stderrDropped` the bytes lost in total (0: a run's
 * process is spawned `lossless` and read as a stream).
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
  /** Beyond the documented client: the image it was created from. */
  image?: string;
  /** Cluster mode: `host_lost` when this name was made anew because the
   * host that held it is gone (its files with it). */
  recreated?: Recreated;
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
  /** The image a sandbox this attach creates starts from (`sandboxd image
   * list` on the server); the server's default when absent. An image the
   * server lacks is a 404 `image_not_found`; naming another one for an
   * existing sandbox is a 409. */
  image?: string;
  /** The egress policy of a sandbox this attach creates (network `nat`);
   * `client.network.set` changes it later. */
  egress?: EgressPolicy;
}

/**
 * What a `nat` sandbox may reach, on top of the server's fixed rules (never
 * the host, private or link-local ranges). Entries: IPv4 networks
 * (`203.0.113.0/24`, or an address), names (`example.com`: that name only)
 * and `*.example.com` (names under it, not the apex). `deny` first; then,
 * with an `allow` list (even empty), whatever it does not list is refused.
 */
export interface EgressPolicy {
  allow?: string[] | null;
  deny?: string[] | null;
}

/** The policy in force, as the server canonicalized it. */
export interface NetworkPolicy {
  mode: Network;
  egress: { allow: string[] | null; deny: string[] };
}

/** One entry of a sandbox's egress log. */
export interface EgressEvent {
  /** `connection`: a new connection refused; `dns`: a name answered or refused. */
  type: "connection" | "dns";
  /** RFC 3339. */
  time: string;
  allowed: boolean;
  /** connection: destination address, port, protocol. */
  address?: string;
  port?: number;
  protocol?: string;
  /** dns: the name and the IPv4 addresses answered. */
  name?: string;
  addresses?: string[];
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

/** One piece of a process's output, as `ProcessStream` yields it. */
export interface ProcessChunk {
  stream: "stdout" | "stderr";
  /** The stream offset of `data`'s first byte. */
  offset: number;
  /** The process's own bytes: a UTF-8 sequence may be split across chunks. */
  data: Uint8Array;
}

/** Options of `SandboxClient.stream`. */
export interface StreamOptions {
  /** Where stdout starts. Default 0. */
  stdoutFrom?: number;
  /** Where stderr starts. Default 0. */
  stderrFrom?: number;
  /** Ends the stream: the iterator throws the signal's reason. */
  signal?: AbortSignal;
  /**
   * Reconnect from the next offsets when a connection breaks, ends without
   * the exit, or is silent for 45 s (reading is idempotent). Default true.
   */
  reconnect?: boolean;
}

/** Options of `SandboxClient.readable`. */
export interface ReadableOptions {
  /** Which stream's bytes. Default `stdout`. */
  stream?: "stdout" | "stderr";
  /** The offset to start that stream at. Default 0. */
  from?: number;
  /** Ends the stream: the Readable is destroyed with the signal's reason. */
  signal?: AbortSignal;
}

/**
 * A stream's `start` frame: the process's status when the connection began,
 * the offsets it began at, and the bytes asked for that the sandbox no
 * longer held (as `ProcessStream.start`: totals over every connection).
 */
export interface StreamStart extends ProcessStatus {
  stdoutFrom: number;
  stderrFrom: number;
  stdoutDropped: number;
  stderrDropped: number;
}

/** A stream's `exit` frame: the exited status and the offsets after the last byte. */
export interface StreamExit extends ProcessStatus {
  stdoutNext: number;
  stderrNext: number;
}

/** An image a sandbox can be made from (`SandboxClient.images`). */
export interface ImageInfo {
  name: string;
  /** Its files' disk use on the server. */
  sizeBytes: number;
  /** RFC 3339. */
  builtAt: string;
  /** `built` (by the server), or an import's `oci` or `docker`. */
  source: string;
  /** An import's layers (merged into one tree); 1 for a built image. */
  layers: number;
}

/** A snapshot taken (`SandboxClient.snapshot`): an image from now on. */
export interface SnapshotInfo {
  image: string;
  /** The new image's disk use on the server. */
  sizeBytes: number;
  /** What was copied; files unchanged from the sandbox's image are linked. */
  copiedBytes: number;
  linkedFiles: number;
  /** How long the sandbox was frozen. */
  durationMs: number;
  /** RFC 3339. */
  createdAt: string;
}

/** A preview share of a sandbox's port (`SandboxClient.share`). */
export interface Share {
  /** What `unshare` names. */
  id: string;
  port: number;
  /** `hostUrl` when the server has a `preview_domain`, else `pathUrl`. */
  url: string;
  /** `{server}/v1/preview/{token}/`: always there. */
  pathUrl: string;
  /** `{scheme}://{port}-{token}.{preview_domain}/`, when the server has one. */
  hostUrl?: string;
  token: string;
  /** RFC 3339. */
  expiresAt: string;
  createdAt: string;
  /** true: anyone with the URL; false: the URL and an identity token of the deployment. */
  public: boolean;
}

export interface ShareOptions {
  /** `"30s"`, `"15m"`, `"1h"`, `"7d"`, or seconds; 1 s to 30 d. Default 1 h. */
  ttl?: string | number;
  /** Default false: each request also takes an identity token of the deployment. */
  public?: boolean;
}

/** Where a port of a sandbox is reached through the server, and with what (`SandboxClient.portUrl`). */
export interface PortTarget {
  /** `{endpoint}/ports/{port}{path}` */
  url: string;
  /** The credential; send it with every request (it is not passed on to the sandbox's server). */
  headers: Record<string, string>;
}

/** One sandbox's ports (`SandboxClient.ports(name)`). */
export interface SandboxPorts {
  url(port: number, path?: string): Promise<PortTarget>;
  fetch(port: number, path?: string, init?: RequestInit): Promise<Response>;
  share(port: number, options?: ShareOptions): Promise<Share>;
  unshare(port: number, id: string): Promise<void>;
  shares(): Promise<Share[]>;
}
