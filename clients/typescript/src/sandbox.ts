/** `@sandboxd/client/sandbox`: the sandbox client and its types. */
export { SandboxClient } from "./client.js";
export { SandboxNotEnabledError, SandboxRequestError, SandboxUnavailableError } from "./errors.js";
export type {
  CombinedResult,
  DirEntry,
  ExecRequest,
  ExecResult,
  GrepMatch,
  PollOptions,
  ProcessOutput,
  ProcessStatus,
  RunOptions,
  RunResult,
  SandboxHandle,
  SandboxOptions,
  SandboxRecord,
  Signal,
  SpawnRequest,
  StdinOptions,
} from "./types.js";
