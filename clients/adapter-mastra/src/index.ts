/**
 * `@sandboxd/adapter-mastra`: sandboxd sandboxes as a Mastra workspace
 * sandbox provider, its process manager, and a workspace filesystem.
 *
 * ```ts
 * new Workspace({ sandbox: new SandboxdSandbox({ name: threadId }) });
 * ```
 */
export { SandboxdSandbox } from "./sandbox.js";
export { SandboxdProcessManager, SandboxdProcessHandle, TIMEOUT_EXIT_CODE, LOST_EXIT_CODE } from "./processes.js";
export { SandboxdFilesystem } from "./filesystem.js";
export type { SandboxdSandboxOptions, SandboxdFilesystemOptions, SandboxdTargetOptions } from "./options.js";

/** The documented adapter's names, so code written for it changes only its import. */
export { SandboxdSandbox as AstroSandbox } from "./sandbox.js";
export { SandboxdProcessManager as AstroProcessManager } from "./processes.js";
export type { SandboxdSandboxOptions as AstroSandboxOptions } from "./options.js";
