/**
 * Helpers shared by the sandbox, its process manager and the filesystem.
 * Not exported from the package.
 */
import { posix } from "node:path";
import { SandboxClient, SandboxRequestError } from "@sandboxd/client";
import type { SandboxOptions } from "@sandboxd/client";
import type { InstructionsOption } from "@mastra/core/workspace";
import type { RequestContext } from "@mastra/core/request-context";

/** The directory commands run in and relative paths resolve from, unless configured. */
export const DEFAULT_WORKING_DIRECTORY = "/workspace";

/** Longest long poll a process handle asks for (the SDK bounds it under its request timeout). */
export const DEFAULT_POLL_WAIT_MS = 10_000;

/** Sandbox names, as the server checks them. */
export const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

/** Process ids, as the server checks them. */
export const PROCESS_ID_RE = /^[A-Za-z0-9-]{1,64}$/;

/** `path` made absolute against `base`, with `.`/`..` and repeated slashes resolved. */
export function resolveIn(base: string, path: string | undefined): string {
  if (path === undefined || path === "") return posix.resolve(base);
  return posix.resolve(base, path);
}

/** Drops the `undefined` values of a Mastra environment (the API takes strings only). */
export function cleanEnv(env: Record<string, string | undefined> | undefined): Record<string, string> | undefined {
  if (!env) return undefined;
  const out: Record<string, string> = {};
  let any = false;
  for (const [k, v] of Object.entries(env)) {
    if (typeof v === "string") {
      out[k] = v;
      any = true;
    }
  }
  return any ? out : undefined;
}

const SAFE_WORD = /^[A-Za-z0-9_@%+=:,./-]+$/;

/** One argument quoted for /bin/sh (POSIX single quotes). */
export function shellQuote(arg: string): string {
  if (arg !== "" && SAFE_WORD.test(arg)) return arg;
  return `'${arg.replace(/'/g, `'\\''`)}'`;
}

/** How a process's argv reads as a command line: the line itself for `/bin/sh -c LINE`. */
export function commandLine(argv: string[]): string {
  if (argv.length === 3 && (argv[0] === "/bin/sh" || argv[0] === "sh") && argv[1] === "-c") return argv[2] ?? "";
  return argv.map(shellQuote).join(" ");
}

export function isRequestError(err: unknown, status?: number, ...codes: string[]): err is SandboxRequestError {
  if (!(err instanceof SandboxRequestError)) return false;
  if (status !== undefined && err.status !== status) return false;
  return codes.length === 0 || codes.includes(err.code);
}

/** The sandbox or the process no longer exists (deleted, reclaimed, forgotten). */
export function isGone(err: unknown): boolean {
  return isRequestError(err, 404, "process_not_found", "sandbox_not_found");
}

/** Mastra's convention for `instructions`: a string replaces, a function extends. */
export function resolveInstructions(
  override: InstructionsOption | undefined,
  defaults: () => string,
  requestContext?: RequestContext,
): string {
  if (typeof override === "string") return override;
  const defaultInstructions = defaults();
  if (override === undefined) return defaultInstructions;
  return override(requestContext === undefined ? { defaultInstructions } : { defaultInstructions, requestContext });
}

/** The errno a failed coreutils/BusyBox command reported, read from its message. */
export function errnoOf(message: string): string | undefined {
  if (/no such file or directory/i.test(message)) return "ENOENT";
  if (/file exists/i.test(message)) return "EEXIST";
  if (/not a directory/i.test(message)) return "ENOTDIR";
  if (/is a directory/i.test(message)) return "EISDIR";
  if (/directory not empty/i.test(message)) return "ENOTEMPTY";
  if (/permission denied|operation not permitted|read-only file system/i.test(message)) return "EACCES";
  return undefined;
}


/** The client an adapter uses: the one it was given, or one made from the client options. */
export function clientOf(options: SandboxOptions & { client?: SandboxClient | undefined }): SandboxClient {
  if (options.client) return options.client;
  const clientOptions: SandboxOptions = {};
  if (options.identityToken !== undefined) clientOptions.identityToken = options.identityToken;
  if (options.serverUrl !== undefined) clientOptions.serverUrl = options.serverUrl;
  if (options.timeoutSeconds !== undefined) clientOptions.timeoutSeconds = options.timeoutSeconds;
  if (options.fetchImpl !== undefined) clientOptions.fetchImpl = options.fetchImpl;
  return new SandboxClient(clientOptions);
}

/** A sandbox name the server accepts, or a TypeError at construction. */
export function checkName(name: unknown): string {
  if (typeof name !== "string" || !NAME_RE.test(name)) {
    throw new TypeError(`invalid sandbox name ${JSON.stringify(name)}: must match ${NAME_RE.source}`);
  }
  return name;
}
