/** `@sandboxd/client/sandbox`: the sandbox client and its types. */
export { SandboxClient } from "./client.js";
export { SandboxNotEnabledError, SandboxRequestError, SandboxUnavailableError } from "./errors.js";
export { ProcessStream } from "./stream.js";
export type * from "./types.js";
