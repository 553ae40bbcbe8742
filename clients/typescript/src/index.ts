/** `@sandboxd/client`: named, isolated sandboxes for AI agents. */
export * from "./sandbox.js";
