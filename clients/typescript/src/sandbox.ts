/** `@sandboxd/client/sandbox`: the sandbox client and its types. */
export { SandboxClient } from "./client.js";
export { SandboxNotEnabledError, SandboxRequestError, SandboxUnavailableError } from "./errors.js";
export type * from "./types.js";
