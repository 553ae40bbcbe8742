import { Readable } from "node:stream";
import { SandboxRequestError, SandboxUnavailableError } from "./errors.js";
import type { ProcessChunk, ProcessStatus, StreamExit, StreamStart } from "./types.js";

/** Frame types of `application/vnd.sandboxd.stream`. */
const FRAME_START = 1;
const FRAME_STDOUT = 2;
const FRAME_STDERR = 3;
const FRAME_EXIT = 4;
const FRAME_ERROR = 5;
// 6 is the keepalive: like any type not named here, skipped.

const HEAD_BYTES = 16;
/** Largest payload a frame may carry. */
export const MAX_FRAME_BYTES = 8 * 1024 * 1024;
/** A connection that brought nothing for this long is dead (keepalives come every 15 s). */
const IDLE_MS = 45_000;
/** Reconnects go on this long after the last frame (or after a silent connection was given up). */
const RECONNECT_WINDOW_MS = 30_000;
const BACKOFF_FIRST_MS = 100;
const BACKOFF_MAX_MS = 1_000;

/** Status of an `error` frame's code: the one the API's error table gives it. */
const ERROR_STATUS: Readonly<Record<string, number>> = {
  invalid_argument: 400,
  unauthenticated: 401,
  credential_stale: 401,
  cap_reached: 402,
  permission_denied: 403,
  sandbox_not_found: 404,
  process_not_found: 404,
  file_not_found: 404,
  not_found: 404,
  timeout: 408,
  invalid_state: 409,
  unsupported_class: 409,
  too_large: 413,
  rate_limited: 429,
  internal: 500,
  bring_up_failed: 502,
  unavailable: 503,
};

/** One frame as read off the wire. */
export interface Frame {
  type: number;
  offset: number;
  payload: Uint8Array;
}

/**
 * Opens one connection of a stream from the given offsets and answers with
 * its 200 response (whose body is the frames). Errors as the client's calls
 * throw them. `signal` aborts the request and its body.
 */
export type StreamOpener = (stdoutFrom: number, stderrFrom: number, signal: AbortSignal) => Promise<Response>;

/** @internal What the client sets a stream up with. */
export interface StreamSetup {
  stdoutFrom: number;
  stderrFrom: number;
  signal?: AbortSignal;
  reconnect: boolean;
  /** Reads a ProcessStatus out of a frame's JSON, as the client reads one. */
  readStatus: (body: unknown) => ProcessStatus;
}

/**
 * Splits a byte stream into frames: frames split across reads and many in
 * one read alike. Payloads are views of the bytes read where they lie in
 * one read, copies where they straddle two.
 */
export class FrameParser {
  #chunks: Uint8Array[] = [];
  #buffered = 0;

  /** Takes bytes in. */
  push(bytes: Uint8Array): void {
    if (bytes.length === 0) return;
    this.#chunks.push(bytes);
    this.#buffered += bytes.length;
  }

  /** Bytes held that do not yet make a whole frame. */
  get buffered(): number {
    return this.#buffered;
  }

  /**
   * The next whole frame, or undefined until more bytes come. Throws
   * SandboxRequestError 502 `invalid_response` for a frame longer than the
   * protocol allows.
   */
  next(): Frame | undefined {
    if (this.#buffered < HEAD_BYTES) return undefined;
    const head = this.#peek(HEAD_BYTES);
    const view = new DataView(head.buffer, head.byteOffset, HEAD_BYTES);
    const length = view.getUint32(4, false);
    if (length > MAX_FRAME_BYTES) {
      throw protocolError(`a frame of ${length} bytes (at most ${MAX_FRAME_BYTES} are allowed)`);
    }
    if (this.#buffered < HEAD_BYTES + length) return undefined;
    const type = head[0] ?? 0;
    const offset = view.getUint32(8, false) * 2 ** 32 + view.getUint32(12, false);
    this.#take(HEAD_BYTES);
    const payload = this.#take(length);
    return { type, offset, payload };
  }

  /** The first n bytes (n <= buffered), left in place. */
  #peek(n: number): Uint8Array {
    const first = this.#chunks[0] as Uint8Array;
    if (first.length >= n) return first.subarray(0, n);
    return this.#gather(n, false);
  }

  /** Removes and returns the first n bytes (n <= buffered). */
  #take(n: number): Uint8Array {
    if (n === 0) return new Uint8Array(0);
    const first = this.#chunks[0] as Uint8Array;
    if (first.length >= n) {
      const out = first.subarray(0, n);
      if (first.length === n) this.#chunks.shift();
      else this.#chunks[0] = first.subarray(n);
      this.#buffered -= n;
      return out;
    }
    return this.#gather(n, true);
  }

  #gather(n: number, consume: boolean): Uint8Array {
    const out = new Uint8Array(n);
    let filled = 0;
    let i = 0;
    while (filled < n) {
      const c = this.#chunks[i] as Uint8Array;
      const want = Math.min(c.length, n - filled);
      out.set(want === c.length ? c : c.subarray(0, want), filled);
      filled += want;
      if (consume) {
        if (want === c.length) this.#chunks.shift();
        else this.#chunks[0] = c.subarray(want);
      } else i++;
    }
    if (consume) this.#buffered -= n;
    return out;
  }
}

/**
 * A process's output as it is produced, then its exit: an async iterable of
 * {@link ProcessChunk}s, read from `GET .../processes/{id}/stream`. Made by
 * `SandboxClient.stream`; iterate it once (with `for await`, or through
 * `toReadable`).
 *
 * A connection that breaks, ends without the process's exit, or brings
 * nothing for 45 s is reconnected from `stdoutNext`/`stderrNext` (unless
 * `reconnect: false`), so every byte the sandbox still holds arrives exactly
 * once. Leaving the loop early (`break`) closes the connection.
 */
export class ProcessStream implements AsyncIterable<ProcessChunk> {
  readonly #open: StreamOpener;
  readonly #readStatus: (body: unknown) => ProcessStatus;
  /** Aborted when the stream is closed from inside (its Readable destroyed). */
  readonly #closer = new AbortController();
  /** The user's signal and the closer: either ends the stream. */
  readonly #stop: AbortSignal;
  readonly #reconnect: boolean;
  readonly #exit: Promise<StreamExit>;
  #resolveExit!: (exit: StreamExit) => void;
  #rejectExit!: (err: unknown) => void;
  #iterated = false;
  #start: StreamStart | undefined;
  #stdoutDropped = 0;
  #stderrDropped = 0;
  #stdoutNext: number;
  #stderrNext: number;

  /** @internal Made by `SandboxClient.stream`. */
  constructor(open: StreamOpener, options: StreamSetup) {
    this.#open = open;
    this.#readStatus = options.readStatus;
    this.#stop = options.signal ? AbortSignal.any([options.signal, this.#closer.signal]) : this.#closer.signal;
    this.#reconnect = options.reconnect;
    this.#stdoutNext = options.stdoutFrom;
    this.#stderrNext = options.stderrFrom;
    this.#exit = new Promise<StreamExit>((resolve, reject) => {
      this.#resolveExit = resolve;
      this.#rejectExit = reject;
    });
    // A stream whose `exit` nobody awaits must not fail the program when it
    // ends in an error: the iterator throws that error anyway.
    this.#exit.catch(() => {});
  }

  /** The offset after the last stdout byte yielded: where a new stream would start. */
  get stdoutNext(): number {
    return this.#stdoutNext;
  }

  /** As `stdoutNext`, for stderr. */
  get stderrNext(): number {
    return this.#stderrNext;
  }

  /**
   * The latest `start` frame: the process's status when the current
   * connection began and the offsets it began at, with `stdoutDropped` and
   * `stderrDropped` the totals over every connection (bytes asked for that
   * the sandbox no longer held). Undefined until the first frame arrives.
   */
  get start(): StreamStart | undefined {
    return this.#start === undefined ? undefined : { ...this.#start, command: [...this.#start.command] };
  }

  /**
   * The exited status with the final offsets, once the iterator has read the
   * `exit` frame. Rejects with the stream's error when it fails, and with an
   * `AbortError` when it is closed before the exit.
   */
  get exit(): Promise<StreamExit> {
    return this.#exit;
  }

  [Symbol.asyncIterator](): AsyncIterator<ProcessChunk> {
    if (this.#iterated) throw new TypeError("a ProcessStream can be iterated only once");
    this.#iterated = true;
    return this.#run();
  }

  /**
   * One stream's bytes (`stdout` by default) as a Node `Readable`, ending
   * at the process's exit and destroyed with the error if the stream fails.
   * Destroying it closes the connection. Takes the place of iterating.
   */
  toReadable(which: "stdout" | "stderr" = "stdout"): Readable {
    if (which !== "stdout" && which !== "stderr") throw new TypeError(`toReadable: unknown stream ${String(which)}`);
    const source = this[Symbol.asyncIterator]();
    const closer = this.#closer;
    let pulling = false;
    const readable = new Readable({
      read() {
        void pull();
      },
      destroy(err, callback) {
        closer.abort(new DOMException("the readable was destroyed", "AbortError"));
        source.return?.().catch(() => {});
        callback(err);
      },
    });
    const pull = async (): Promise<void> => {
      if (pulling) return;
      pulling = true;
      try {
        for (;;) {
          const r = await source.next();
          if (r.done) {
            readable.push(null);
            return;
          }
          if (r.value.stream !== which) continue;
          const d = r.value.data;
          if (!readable.push(Buffer.from(d.buffer, d.byteOffset, d.byteLength))) return;
        }
      } catch (err) {
        readable.destroy(err instanceof Error ? err : new Error(String(err)));
      } finally {
        pulling = false;
      }
    };
    return readable;
  }

  async *#run(): AsyncGenerator<ProcessChunk, void, undefined> {
    const stop = this.#stop;
    let progressAt = Date.now();
    let backoff = BACKOFF_FIRST_MS;
    let connected = false;
    let finished = false;
    try {
      for (;;) {
        stop.throwIfAborted();
        const conn = new AbortController();
        const signal = AbortSignal.any([conn.signal, stop]);
        let reader: ReadableStreamDefaultReader<Uint8Array> | undefined;
        let fatal: SandboxRequestError | undefined;
        let cause: unknown;
        try {
          const res = await this.#open(this.#stdoutNext, this.#stderrNext, signal);
          connected = true;
          if (!res.body) throw protocolError("a stream answer without a body");
          reader = res.body.getReader();
          const parser = new FrameParser();
          const idle = new IdleWatch(conn, IDLE_MS);
          try {
            for (;;) {
              let frame = parser.next();
              while (frame === undefined) {
                const r = await idle.read(reader);
                if (r.done) break;
                parser.push(r.value);
                frame = parser.next();
              }
              if (frame === undefined) break; // the body ended
              if (frame.type !== FRAME_START) {
                // Progress past a start frame: a server that answers and
                // then cuts every time does not keep the stream alive.
                progressAt = Date.now();
                backoff = BACKOFF_FIRST_MS;
              }
              const chunk = this.#take(frame);
              if (chunk === "exit") {
                finished = true;
                return;
              }
              if (chunk instanceof SandboxRequestError) throw (fatal = chunk);
              if (chunk !== undefined) yield chunk;
            }
          } finally {
            idle.stop();
          }
          cause = new Error(
            `the stream ended without the process's exit (${parser.buffered ? "inside a frame" : "between frames"})`,
          );
        } catch (err) {
          if (stop.aborted) throw stop.reason;
          if (err instanceof IdleError) progressAt = Date.now();
          if (!connected || err === fatal || !retryable(err)) throw err;
          cause = err;
        } finally {
          conn.abort(new DOMException("stream connection closed", "AbortError"));
          reader?.cancel().catch(() => {});
        }
        // Cut, failed, or silent: reconnect from the next offsets.
        if (!this.#reconnect || Date.now() - progressAt >= RECONNECT_WINDOW_MS) {
          throw new SandboxUnavailableError(`process stream: ${describe(cause)}`, cause);
        }
        await pause(backoff, stop);
        backoff = Math.min(backoff * 2, BACKOFF_MAX_MS);
      }
    } catch (err) {
      this.#rejectExit(err);
      throw err;
    } finally {
      if (!finished) {
        this.#rejectExit(new DOMException("the stream was closed before the process exited", "AbortError"));
      }
    }
  }

  /**
   * Takes one frame in: a chunk to yield, "exit", the error an `error` frame
   * carries, or undefined (nothing to yield).
   */
  #take(frame: Frame): ProcessChunk | "exit" | SandboxRequestError | undefined {
    switch (frame.type) {
      case FRAME_START: {
        const body = parseJson(frame.payload, "start");
        const stdoutFrom = nonNegative(field(body, "stdoutFrom"), this.#stdoutNext);
        const stderrFrom = nonNegative(field(body, "stderrFrom"), this.#stderrNext);
        this.#stdoutDropped += nonNegative(field(body, "stdoutDropped"), 0);
        this.#stderrDropped += nonNegative(field(body, "stderrDropped"), 0);
        // A start further on than asked: the gap is in the dropped counts.
        this.#stdoutNext = Math.max(this.#stdoutNext, stdoutFrom);
        this.#stderrNext = Math.max(this.#stderrNext, stderrFrom);
        this.#start = {
          ...this.#readStatus(body),
          stdoutFrom,
          stderrFrom,
          stdoutDropped: this.#stdoutDropped,
          stderrDropped: this.#stderrDropped,
        };
        return undefined;
      }
      case FRAME_STDOUT:
      case FRAME_STDERR: {
        const stream = frame.type === FRAME_STDOUT ? "stdout" : "stderr";
        const next = stream === "stdout" ? this.#stdoutNext : this.#stderrNext;
        let { offset, payload } = frame;
        const end = offset + payload.length;
        if (end <= next) return undefined; // already yielded
        if (offset < next) {
          payload = payload.subarray(next - offset);
          offset = next;
        } else if (offset > next) {
          // Not sent: count it as dropped rather than hide it.
          this.#addDropped(stream, offset - next);
        }
        if (stream === "stdout") this.#stdoutNext = end;
        else this.#stderrNext = end;
        return { stream, offset, data: payload };
      }
      case FRAME_EXIT: {
        const body = parseJson(frame.payload, "exit");
        const exit: StreamExit = {
          ...this.#readStatus(body),
          stdoutNext: nonNegative(field(body, "stdoutNext"), this.#stdoutNext),
          stderrNext: nonNegative(field(body, "stderrNext"), this.#stderrNext),
        };
        this.#resolveExit(exit);
        return "exit";
      }
      case FRAME_ERROR: {
        const err = field(parseJson(frame.payload, "error"), "error");
        const code = str(field(err, "code")) || "stream_error";
        const message = str(field(err, "message")) || `the process stream ended with ${code}`;
        return new SandboxRequestError(ERROR_STATUS[code] ?? 502, code, message);
      }
      default:
        return undefined; // keepalive, or a type this client does not know
    }
  }

  #addDropped(stream: "stdout" | "stderr", n: number): void {
    if (stream === "stdout") this.#stdoutDropped += n;
    else this.#stderrDropped += n;
    if (this.#start) {
      this.#start = { ...this.#start, stdoutDropped: this.#stdoutDropped, stderrDropped: this.#stderrDropped };
    }
  }
}

/** The reason a silent connection was given up. */
class IdleError extends Error {
  constructor(ms: number) {
    super(`no frame for ${ms / 1000} s`);
    this.name = "IdleError";
  }
}

/**
 * Aborts a connection when a read waits longer than `ms`. Only time spent
 * waiting for the server counts: a consumer that takes its time between
 * chunks does not make the connection look dead.
 */
class IdleWatch {
  readonly #conn: AbortController;
  readonly #ms: number;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #since = 0;
  #waiting = false;

  constructor(conn: AbortController, ms: number) {
    this.#conn = conn;
    this.#ms = ms;
  }

  async read(reader: ReadableStreamDefaultReader<Uint8Array>): ReturnType<ReadableStreamDefaultReader<Uint8Array>["read"]> {
    this.#since = Date.now();
    this.#waiting = true;
    if (this.#timer === undefined) this.#arm(this.#ms);
    try {
      return await reader.read();
    } catch (err) {
      const reason: unknown = this.#conn.signal.reason;
      if (this.#conn.signal.aborted && reason instanceof IdleError) throw reason;
      throw err;
    } finally {
      this.#waiting = false;
    }
  }

  stop(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  // One timer per connection, re-armed for what is left rather than once per read.
  #arm(ms: number): void {
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      if (!this.#waiting) return; // armed again by the next read
      const left = this.#since + this.#ms - Date.now();
      if (left > 0) return this.#arm(left);
      this.#conn.abort(new IdleError(this.#ms));
    }, ms);
  }
}

/** Whether a failed connection is worth another: no answer, a cut body, 503. */
function retryable(err: unknown): boolean {
  if (err instanceof SandboxRequestError) return err.status === 503;
  return true;
}

function protocolError(what: string): SandboxRequestError {
  return new SandboxRequestError(502, "invalid_response", `unexpected answer from the server: ${what}`);
}

const decoder = new TextDecoder();

function parseJson(payload: Uint8Array, what: string): unknown {
  try {
    return JSON.parse(decoder.decode(payload)) as unknown;
  } catch {
    throw protocolError(`a ${what} frame that is not JSON`);
  }
}

function field(obj: unknown, key: string): unknown {
  return obj !== null && typeof obj === "object" ? (obj as Record<string, unknown>)[key] : undefined;
}

function str(v: unknown): string {
  return typeof v === "string" ? v : "";
}

function nonNegative(v: unknown, fallback: number): number {
  return typeof v === "number" && Number.isSafeInteger(v) && v >= 0 ? v : fallback;
}

function describe(err: unknown): string {
  if (err instanceof Error) {
    const cause = (err as { cause?: unknown }).cause;
    const inner = cause instanceof Error && cause.message !== err.message ? `: ${cause.message}` : "";
    return `${err.message}${inner}`;
  }
  return String(err);
}

/** Waits ms; rejects with the signal's reason when it aborts first. */
function pause(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason as unknown);
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason as unknown);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
