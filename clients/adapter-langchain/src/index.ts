/** `@sandboxd/adapter-langchain`: a deepagents sandbox backend on sandboxd. */
export { AstroSandbox, SandboxdSandbox } from "./sandbox.js";
export type { ExecuteOptions, SandboxdSandboxCreateOptions, SandboxdSandboxOptions } from "./sandbox.js";
