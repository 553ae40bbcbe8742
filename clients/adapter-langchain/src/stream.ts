// Streaming file downloads over the data plane.
//
// @sandboxd/client reads a file whole (`readFileBytes` buffers the body), but
// the wire API streams it (docs/api.md, "Files"). A paginated read_file only
// needs a window of lines, so this module reads the body as it arrives and
// keeps only that window. It takes the sandbox's handle from the client's
// `attach` and, like the client, attaches again and retries once when the
// data plane answers 401 (a stale credential: the sandbox was reclaimed or
// deleted), which is answered before anything is read.

import { SandboxRequestError, SandboxUnavailableError } from "@sandboxd/client";
import type { SandboxClient, SandboxHandle } from "@sandboxd/client";
import type { ReadableStreamReadResult } from "node:stream/web";

/** Refresh a handle this long before it expires (less for short-lived ones). */
const REFRESH_MARGIN_MS = 30_000;

interface Cached {
  handle: SandboxHandle;
  refreshAt: number;
}

export interface StreamOptions {
  fetchImpl: typeof fetch;
  timeoutMs: number;
}

/** An open download: its declared length and its body, bounded by the timeout. */
export interface Download {
  length: number | undefined;
  body: ReadableStream<Uint8Array>;
  /** Stops the download (the rest of the body is not read). */
  cancel(): Promise<void>;
}

export class FileStreams {
  readonly #client: SandboxClient;
  readonly #name: string;
  readonly #fetch: typeof fetch;
  readonly #timeoutMs: number;
  #cached: Cached | undefined;

  constructor(client: SandboxClient, name: string, options: StreamOptions) {
    this.#client = client;
    this.#name = name;
    this.#fetch = options.fetchImpl;
    this.#timeoutMs = options.timeoutMs;
  }

  /** Forgets the handle (after the sandbox was deleted). */
  reset(): void {
    this.#cached = undefined;
  }

  /**
   * Opens `GET {endpoint}/files?path=P`. Throws SandboxRequestError for an
   * error answer (404 `file_not_found` ...), SandboxUnavailableError when
   * there is no answer.
   */
  async open(path: string): Promise<Download> {
    if (typeof path !== "string" || path === "") {
      throw new SandboxRequestError(400, "invalid_argument", "path must be a non-empty string");
    }
    let handle = await this.#handle(false);
    let res = await this.#get(handle, path);
    if (res.status === 401) {
      await res.body?.cancel().catch(() => {});
      handle = await this.#handle(true);
      res = await this.#get(handle, path);
    }
    if (!res.ok) throw await requestError(res);
    const declared = Number(res.headers.get("content-length"));
    const body = res.body ?? new Response(new Uint8Array(0)).body;
    if (!body) throw new SandboxRequestError(502, "invalid_response", "download without a body");
    return {
      length: Number.isSafeInteger(declared) && declared >= 0 ? declared : undefined,
      body,
      cancel: () => body.cancel().catch(() => {}),
    };
  }

  /** Takes a handle the adapter's own attach just returned, saving an attach on the first read. */
  seed(handle: SandboxHandle): void {
    this.#remember(handle);
  }

  async #handle(stale: boolean): Promise<SandboxHandle> {
    const cur = this.#cached;
    if (cur && !stale && Date.now() < cur.refreshAt) return cur.handle;
    return this.#remember(await this.#client.attach(this.#name));
  }

  #remember(handle: SandboxHandle): SandboxHandle {
    const received = Date.now();
    const expires = Date.parse(handle.expiresAt);
    const lifetime = Number.isFinite(expires) ? Math.max(0, expires - received) : 0;
    const margin = Math.min(REFRESH_MARGIN_MS, lifetime / 4);
    this.#cached = { handle, refreshAt: received + lifetime - margin };
    return handle;
  }

  async #get(handle: SandboxHandle, path: string): Promise<Response> {
    const url = `${handle.endpoint}/files?${new URLSearchParams({ path }).toString()}`;
    try {
      return await this.#fetch(url, {
        method: "GET",
        headers: { ...handle.headers, accept: "application/octet-stream, application/json" },
        signal: AbortSignal.timeout(this.#timeoutMs),
        redirect: "manual",
      });
    } catch (err) {
      throw unavailable(err, this.#timeoutMs);
    }
  }
}

/** Reads the next chunk, turning a transport failure into SandboxUnavailableError. */
export async function readChunk(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  timeoutMs: number,
): Promise<ReadableStreamReadResult<Uint8Array>> {
  try {
    return await reader.read();
  } catch (err) {
    throw unavailable(err, timeoutMs);
  }
}

function unavailable(err: unknown, timeoutMs: number): SandboxUnavailableError {
  const name = err instanceof Error ? err.name : "";
  const why =
    name === "TimeoutError" ? `no answer within ${timeoutMs} ms` : err instanceof Error ? err.message : String(err);
  return new SandboxUnavailableError(`GET files: ${why}`, err);
}

async function requestError(res: Response): Promise<SandboxRequestError> {
  const text = await res.text().catch(() => "");
  let code = `http_${res.status}`;
  let message = `HTTP ${res.status}`;
  try {
    const body = JSON.parse(text) as { error?: { code?: unknown; message?: unknown } };
    if (typeof body.error?.code === "string" && body.error.code) code = body.error.code;
    if (typeof body.error?.message === "string" && body.error.message) message = body.error.message;
  } catch {
    // not the server's error body: keep the status alone
  }
  return new SandboxRequestError(res.status, code, message);
}
