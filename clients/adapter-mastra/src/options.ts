import type { Network, SandboxClient, SandboxOptions } from "@sandboxd/client";
import type { InstructionsOption, MastraFilesystemOptions, MastraSandboxOptions } from "@mastra/core/workspace";

/** What names a sandbox and reaches its server: shared by the sandbox and the filesystem. */
export interface SandboxdTargetOptions extends SandboxOptions {
  /**
   * The sandbox name (`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`). The same name is
   * the same sandbox and filesystem: use the conversation or thread id, so a
   * resumed conversation reattaches to its own files.
   */
  name: string;
  /**
   * A `SandboxClient` to share (its cached credentials, one per name) instead
   * of one built from the `SandboxOptions` fields (`identityToken`,
   * `serverUrl`, `timeoutSeconds`, `fetchImpl`), which are then ignored.
   */
  client?: SandboxClient;
  /** The class of a sandbox this adapter creates. Default `default` (the only one offered). */
  sandboxClass?: string;
  /**
   * The network of a sandbox this adapter creates: `nat` (the internet, nothing
   * private) or `none` (loopback only). Default: the server's `network` setting.
   * Naming another network than an existing sandbox has fails (409).
   */
  network?: Network;
}

/** Options of {@link SandboxdSandbox}. */
export interface SandboxdSandboxOptions extends SandboxdTargetOptions, Omit<MastraSandboxOptions, "processes"> {
  /** Mastra's id of this provider instance. Default: `name`. */
  id?: string;
  /**
   * Where commands run when they name no `cwd`, and what relative paths
   * resolve from. Default `/workspace`.
   */
  workingDirectory?: string;
  /** Replaces (a string) or extends (a function) the instructions given to the model. */
  instructions?: InstructionsOption;
  /**
   * Longest long poll (ms) a process handle holds open while it waits for
   * output or the exit. Output is delivered as soon as it is written whatever
   * this is; it bounds how long a quiet process costs one request. Default
   * 10000 (bounded by the client's `timeoutSeconds`).
   */
  pollWaitMs?: number;
}

/** Options of {@link SandboxdFilesystem}. */
export interface SandboxdFilesystemOptions extends Partial<SandboxdTargetOptions>, MastraFilesystemOptions {
  /**
   * The sandbox whose files these are: its client, name and working
   * directory are used, and each operation starts it first (as its commands
   * do). Without it, `name` (and a client or client options) is required.
   */
  sandbox?: import("./sandbox.js").SandboxdSandbox;
  /** Mastra's id of this provider instance. Default `sandboxd-fs-<name>`. */
  id?: string;
  /** What relative paths resolve from. Default: the sandbox's working directory, else `/workspace`. */
  workingDirectory?: string;
  /** Refuse every write (write, edit, delete, mkdir, move, copy). Default false. */
  readOnly?: boolean;
  /** Replaces (a string) or extends (a function) the instructions given to the model. */
  instructions?: InstructionsOption;
}
