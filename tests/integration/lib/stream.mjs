// Process output streams, GET {endpoint}/processes/{id}/stream (docs/api.md,
// "Streaming output"): a decoder of the frame format that accepts nothing it
// was not promised, and readers on top of it.
//
//   const s = await openStream(c, "box", id, { stdoutFrom: 0 });
//   for await (const f of s) ...         // { type, offset, length, data | json }
//   s.end                                // "exit" | "error" | "cut" | "aborted"
//
//   const r = await readAll(c, "box", id); // r.stdout.sha256, r.exit, ...
//   const rd = startReader(c, "box", id, { stallAt: 1 << 20 });
//   await rd.stalled; ...; rd.resume(); const r = await rd.done;
//
// Frames are read from the body only as the caller asks for them, so a
// reader that awaits between frames (or stalls) holds the connection back
// the way a slow client would.
import { createHash } from "node:crypto";
import { sleep } from "./daemon.mjs";

export const START = 1;
export const STDOUT = 2;
export const STDERR = 3;
export const EXIT = 4;
export const ERROR = 5;
export const KEEPALIVE = 6;
export const HEAD = 16;
export const MAX_PAYLOAD = 8 * 1024 * 1024;
export const CONTENT_TYPE = "application/vnd.sandboxd.stream";
export const KiB = 1024;
export const MiB = 1024 * 1024;

const NAMES = { 1: "start", 2: "stdout", 3: "stderr", 4: "exit", 5: "error", 6: "keepalive" };
export const typeName = (t) => NAMES[t] ?? `unknown(${t})`;

export class StreamProtocolError extends Error {
  constructor(message) {
    super(message);
    this.name = "StreamProtocolError";
  }
}

// Bytes in, whole frames out. push() what the body delivered; next() gives
// the next frame of a known type, or null while more bytes are needed.
// Frames of unknown types are skipped (counted in `skipped`); a head whose
// bytes 1-3 are not zero, a length over the cap, a control frame with an
// offset, a keepalive with a payload or a JSON frame that is not JSON throw.
export class FrameDecoder {
  constructor({ maxPayload = MAX_PAYLOAD } = {}) {
    this.maxPayload = maxPayload;
    this.chunks = [];
    this.size = 0; // bytes in chunks
    this.head = null; // the head of the frame whose payload is awaited
    this.consumed = 0; // bytes taken out of chunks, for messages
    this.skipped = 0;
    this.frames = 0;
  }

  push(chunk) {
    if (!chunk || chunk.byteLength === 0) return;
    this.chunks.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
    this.size += chunk.byteLength;
  }

  // Bytes held that do not make a whole frame yet.
  get pending() {
    return this.size + (this.head ? HEAD : 0);
  }

  take(n) {
    this.consumed += n;
    this.size -= n;
    if (n === 0) return Buffer.alloc(0);
    const first = this.chunks[0];
    if (first.length >= n) {
      const out = first.subarray(0, n);
      if (first.length === n) this.chunks.shift();
      else this.chunks[0] = first.subarray(n);
      return out;
    }
    const out = Buffer.allocUnsafe(n);
    let at = 0;
    while (at < n) {
      const c = this.chunks[0];
      const k = Math.min(c.length, n - at);
      c.copy(out, at, 0, k);
      at += k;
      if (k === c.length) this.chunks.shift();
      else this.chunks[0] = c.subarray(k);
    }
    return out;
  }

  parseHead(h, at) {
    const type = h[0];
    if (h[1] !== 0 || h[2] !== 0 || h[3] !== 0)
      throw new StreamProtocolError(`frame at byte ${at}: bytes 1-3 of the head are ${h[1]},${h[2]},${h[3]}, not zero`);
    const length = h.readUInt32BE(4);
    if (length > this.maxPayload)
      throw new StreamProtocolError(`frame at byte ${at}: length ${length} is over the ${this.maxPayload}-byte cap`);
    const big = h.readBigUInt64BE(8);
    if (big > BigInt(Number.MAX_SAFE_INTEGER))
      throw new StreamProtocolError(`frame at byte ${at}: offset ${big} is beyond any stream`);
    return { type, length, offset: Number(big), at };
  }

  next() {
    for (;;) {
      if (!this.head) {
        if (this.size < HEAD) return null;
        const at = this.consumed;
        this.head = this.parseHead(this.take(HEAD), at);
      }
      if (this.size < this.head.length) return null;
      const { type, length, offset, at } = this.head;
      const payload = this.take(length);
      this.head = null;
      if (!NAMES[type]) {
        this.skipped++;
        continue;
      }
      this.frames++;
      return this.frame(type, length, offset, payload, at);
    }
  }

  frame(type, length, offset, payload, at) {
    if (type === STDOUT || type === STDERR) return { type, offset, length, data: payload };
    const what = `${typeName(type)} frame at byte ${at}`;
    if (offset !== 0) throw new StreamProtocolError(`${what}: offset ${offset}, not 0`);
    if (type === KEEPALIVE) {
      if (length !== 0) throw new StreamProtocolError(`${what}: a ${length}-byte payload`);
      return { type, offset, length };
    }
    let json;
    try {
      json = JSON.parse(payload.toString("utf8"));
    } catch (e) {
      throw new StreamProtocolError(`${what}: the payload is not JSON (${e.message}): ${payload.subarray(0, 200).toString()}`);
    }
    if (json === null || typeof json !== "object" || Array.isArray(json))
      throw new StreamProtocolError(`${what}: the payload is not a JSON object: ${payload.subarray(0, 200).toString()}`);
    return { type, offset, length, json };
  }
}

function mediaEssence(ct) {
  return (ct || "").split(";")[0].trim().toLowerCase();
}

function streamUrl(handle, id, opts) {
  let qs;
  if (opts.query !== undefined) qs = String(opts.query);
  else {
    const q = new URLSearchParams();
    if (opts.stdoutFrom !== undefined) q.set("stdoutFrom", String(opts.stdoutFrom));
    if (opts.stderrFrom !== undefined) q.set("stderrFrom", String(opts.stderrFrom));
    qs = q.toString();
  }
  return `${handle.endpoint}/processes/${id}/stream${qs ? `?${qs}` : ""}`;
}

// A connection pool of its own, so that a stream does not start on a
// pooled keep-alive connection whose receive buffer an earlier transfer
// grew (the kernel then holds megabytes for a reader that reads nothing,
// which the sandbox counts as sent). The global dispatcher's own class
// (undici's Agent); plain fetch where there is none.
function ownDispatcher() {
  const g = globalThis[Symbol.for("undici.globalDispatcher.1")];
  return g && typeof g.constructor === "function" ? new g.constructor({ connections: 1 }) : undefined;
}

// The request itself. A 401 (a credential the restarted or rotated server
// no longer takes) gets one re-attach and one retry, as the SDK does.
async function request(client, name, id, opts, signal, dispatcher) {
  for (let attempt = 0; ; attempt++) {
    const h = client.handles.get(name) || (await client.attach(name));
    const res = await fetch(streamUrl(h, id, opts), { headers: { ...h.headers }, signal, ...(dispatcher ? { dispatcher } : {}) });
    if (res.status !== 401 || attempt > 0) return res;
    await res.body?.cancel().catch(() => {});
    await client.attach(name);
  }
}

export class StreamHttpError extends Error {
  constructor(status, body) {
    super(`stream: ${status} ${typeof body === "string" ? body : JSON.stringify(body)}`);
    this.name = "StreamHttpError";
    this.status = status;
    this.body = body;
  }
}

// What a stream request answered when it was not a stream: { status, body }
// (the JSON error). A 200 is read as a stream and closed: { status, stream }.
export async function tryStream(client, name, id, opts = {}) {
  try {
    const s = await openStream(client, name, id, opts);
    s.abort();
    return { status: 200, stream: s };
  } catch (e) {
    if (e instanceof StreamHttpError) return { status: e.status, body: e.body };
    throw e;
  }
}

// Opens a stream; resolves once its answer's head is in. A non-200 answer
// throws a StreamHttpError carrying the status and the (JSON) body.
// ownConnection: on a new connection rather than a pooled one.
export async function openStream(client, name, id, opts = {}) {
  const controller = new AbortController();
  const signal = opts.signal ? AbortSignal.any([controller.signal, opts.signal]) : controller.signal;
  const dispatcher = opts.ownConnection ? ownDispatcher() : undefined;
  let res;
  try {
    res = await request(client, name, id, opts, signal, dispatcher);
  } catch (e) {
    dispatcher?.destroy().catch(() => {});
    throw e;
  }
  if (dispatcher) opts = { ...opts, dispatcher };
  if (res.status !== 200) {
    const text = await res.text();
    dispatcher?.close().catch(() => {});
    let body = text;
    try {
      body = JSON.parse(text);
    } catch {}
    throw new StreamHttpError(res.status, body);
  }
  const ct = res.headers.get("content-type");
  if (mediaEssence(ct) !== CONTENT_TYPE) {
    controller.abort();
    dispatcher?.destroy().catch(() => {});
    throw new StreamProtocolError(`a 200 stream answer has Content-Type ${ct}, not ${CONTENT_TYPE}`);
  }
  return new ProcessStream(res, controller, signal, opts);
}

// One open stream: iterate it for its frames. It checks the stream's own
// rules as the frames come: the start frame first and only once, its
// offsets and dropped counts consistent with what was asked, data frames of
// each stream in order without gaps from the start offsets, an exit frame
// whose next offsets are where the data ended, and nothing after an exit or
// error frame (the body must end there).
export class ProcessStream {
  constructor(res, controller, signal, opts) {
    this.res = res;
    this.headers = res.headers;
    this.controller = controller;
    this.signal = signal;
    this.asked = { stdout: opts.stdoutFrom ?? 0, stderr: opts.stderrFrom ?? 0 };
    this.beforeRead = opts.beforeRead;
    this.endTimeoutMs = opts.endTimeoutMs ?? 10000;
    this.decoder = new FrameDecoder(opts.maxPayload ? { maxPayload: opts.maxPayload } : {});
    this.reader = res.body.getReader();
    this.bodyBytes = 0;
    this.start = null;
    this.exit = null;
    this.error = null;
    this.end = null; // "exit" | "error" | "cut" | "aborted"
    this.cutError = null; // why the body broke, when it did not just end
    this.next = null; // { stdout, stderr }: after the last data frame
    this.keepalives = 0;
    this.iterated = false;
    this.dispatcher = opts.dispatcher;
  }

  abort() {
    if (this.end === null) this.aborted = true;
    this.controller.abort();
    this.release();
  }

  release() {
    const d = this.dispatcher;
    this.dispatcher = undefined;
    d?.destroy().catch(() => {});
  }

  // The next chunk of the body, or null at its end (this.end is then set
  // when it ended without a last frame).
  async read() {
    if (this.beforeRead) await this.beforeRead(this);
    try {
      const { value, done } = await this.reader.read();
      if (done) return null;
      this.bodyBytes += value.byteLength;
      return value;
    } catch (e) {
      if (this.aborted || this.signal.aborted) {
        this.end = "aborted";
        return null;
      }
      this.cutError = e;
      this.end = "cut";
      return null;
    }
  }

  // After an exit or error frame: the body must end, with no byte more.
  async expectEnd(what) {
    if (this.decoder.pending !== 0)
      throw new StreamProtocolError(`${this.decoder.pending} bytes follow the ${what} frame`);
    let timer;
    const late = new Promise((_, rej) => {
      timer = setTimeout(() => rej(new StreamProtocolError(`the body did not end within ${this.endTimeoutMs} ms of the ${what} frame`)), this.endTimeoutMs);
    });
    try {
      for (;;) {
        const r = await Promise.race([this.reader.read(), late]);
        if (r.done) return;
        if (r.value.byteLength) throw new StreamProtocolError(`${r.value.byteLength} bytes follow the ${what} frame`);
      }
    } catch (e) {
      if (e instanceof StreamProtocolError) {
        this.controller.abort();
        throw e;
      }
      // The connection closed rather than ended cleanly: the frame was whole.
    } finally {
      clearTimeout(timer);
    }
  }

  check(f) {
    if (this.start === null) {
      if (f.type !== START) throw new StreamProtocolError(`the first frame is ${typeName(f.type)}, not start`);
      const s = f.json;
      for (const k of ["processId", "state", "stdoutFrom", "stderrFrom", "stdoutDropped", "stderrDropped"])
        if (s[k] === undefined) throw new StreamProtocolError(`the start frame has no ${k}: ${JSON.stringify(s)}`);
      for (const k of ["stdout", "stderr"]) {
        const from = s[`${k}From`], dropped = s[`${k}Dropped`];
        if (!Number.isInteger(from) || !Number.isInteger(dropped) || dropped < 0)
          throw new StreamProtocolError(`start frame: ${k}From ${from}, ${k}Dropped ${dropped}`);
        if (from - this.asked[k] !== dropped)
          throw new StreamProtocolError(`start frame: asked ${k} from ${this.asked[k]}, starts at ${from}, but reports ${dropped} dropped`);
      }
      this.start = s;
      this.next = { stdout: s.stdoutFrom, stderr: s.stderrFrom };
      return;
    }
    if (this.end) throw new StreamProtocolError(`a ${typeName(f.type)} frame after the ${this.end} frame`);
    if (f.type === START) throw new StreamProtocolError("a second start frame");
    if (f.type === STDOUT || f.type === STDERR) {
      const k = f.type === STDOUT ? "stdout" : "stderr";
      if (f.offset !== this.next[k])
        throw new StreamProtocolError(`a ${k} frame at offset ${f.offset}, where ${this.next[k]} was next (${f.offset > this.next[k] ? "a gap" : "an overlap"})`);
      this.next[k] += f.length;
      return;
    }
    if (f.type === EXIT) {
      const x = f.json;
      if (x.state !== "exited") throw new StreamProtocolError(`exit frame with state ${x.state}: ${JSON.stringify(x)}`);
      if (x.stdoutNext !== this.next.stdout || x.stderrNext !== this.next.stderr)
        throw new StreamProtocolError(`exit frame says stdoutNext ${x.stdoutNext}, stderrNext ${x.stderrNext}; the data ended at ${this.next.stdout}, ${this.next.stderr}`);
      this.exit = x;
      this.end = "exit";
      return;
    }
    if (f.type === ERROR) {
      const e = f.json;
      if (typeof e.error?.code !== "string" || typeof e.error?.message !== "string")
        throw new StreamProtocolError(`error frame without error.code and error.message: ${JSON.stringify(e)}`);
      this.error = e;
      this.end = "error";
      return;
    }
    if (f.type === KEEPALIVE) this.keepalives++;
  }

  async *[Symbol.asyncIterator]() {
    if (this.iterated) throw new Error("a stream is iterated once");
    this.iterated = true;
    try {
      for (;;) {
        let f;
        while ((f = this.decoder.next()) !== null) {
          this.check(f);
          if (f.type === EXIT || f.type === ERROR) {
            await this.expectEnd(typeName(f.type));
            yield f;
            return;
          }
          yield f;
        }
        const chunk = await this.read();
        if (chunk === null) {
          if (this.end === null) this.end = "cut";
          if (this.end === "cut" && this.start === null && !this.cutError)
            throw new StreamProtocolError("the body ended before its start frame");
          return;
        }
        this.decoder.push(chunk);
      }
    } finally {
      // A caller that stops iterating early leaves: close the connection.
      if (this.end === null) this.abort();
      if (this.end === null) this.end = "aborted";
      this.release();
    }
  }
}

// Bytes of one output stream: counted, hashed, the first `keep` kept.
export class Bytes {
  constructor(keep = 4 * MiB) {
    this.keep = keep;
    this.hash = createHash("sha256");
    this.length = 0;
    this.kept = [];
    this.keptLength = 0;
  }

  add(buf) {
    this.hash.update(buf);
    this.length += buf.length;
    if (this.keptLength < this.keep) {
      const part = buf.subarray(0, this.keep - this.keptLength);
      this.kept.push(Buffer.from(part));
      this.keptLength += part.length;
    }
  }

  get sha256() {
    return this.hash.copy().digest("hex");
  }

  get data() {
    if (this.keptLength < this.length) throw new Error(`only the first ${this.keptLength} of ${this.length} bytes were kept`);
    return Buffer.concat(this.kept);
  }

  text() {
    return this.data.toString("utf8");
  }
}

export const sha256 = (buf) => createHash("sha256").update(buf).digest("hex");

// Reads one stream to its end in the background.
//   stdoutFrom, stderrFrom, signal: as for openStream
//   into: { stdout: Bytes, stderr: Bytes } to add to (several streams, one sum)
//   keep: bytes of each stream to keep (default 4 MiB)
//   slow: { bytes, pauseMs }: await pauseMs before each read of the body
//         while fewer than `bytes` body bytes have come
//   stallAt: body bytes after which no read is made until resume(); such a
//         reader is on a connection of its own (ownConnection) unless
//         ownConnection is false
//   stopAfter: take exactly this many stdout bytes (the rest of the frame
//         that holds the last is dropped), then close the connection
//   deadlineMs: a stream that has not ended by then is aborted, and done
//         rejects (a hang guard, default 120 s)
// rd.started resolves with the start frame's JSON; rd.stalled with the body
// bytes read when the stall began; rd.done with the result:
//   { start, exit, error, end, next: { stdout, stderr }, stdout, stderr,
//     frames: [{ type, offset, length }], keepalives, skipped, bodyBytes }
// where next is after the last byte taken, and end is the stream's
// ("exit", "error", "cut", "aborted") or "stopped" (stopAfter reached).
export function startReader(client, name, id, opts = {}) {
  return new Reader(client, name, id, opts);
}

export function readAll(client, name, id, opts = {}) {
  return startReader(client, name, id, opts).done;
}

class Reader {
  constructor(client, name, id, opts) {
    this.opts = opts;
    this.controller = new AbortController();
    this.stdout = opts.into?.stdout ?? new Bytes(opts.keep);
    this.stderr = opts.into?.stderr ?? new Bytes(opts.keep);
    this.frames = [];
    this.stream = null;
    let startedOk, startedErr, stalledOk;
    this.started = new Promise((a, b) => ((startedOk = a), (startedErr = b)));
    this.stalled = new Promise((a) => (stalledOk = a));
    this.started.catch(() => {});
    this.onStarted = startedOk;
    this.onStartFailed = startedErr;
    this.onStalled = stalledOk;
    this.resumeGate = null;
    this.isStalled = false;
    this.done = this.run(client, name, id).catch((e) => {
      startedErr(e);
      throw e;
    });
    this.done.catch(() => {});
  }

  abort() {
    this.aborted = true;
    this.controller.abort();
    this.resume();
  }

  resume() {
    const g = this.resumeGate;
    this.resumeGate = null;
    this.isStalled = false;
    if (g) g();
  }

  async beforeRead(s) {
    const { slow, stallAt } = this.opts;
    if (stallAt !== undefined && s.bodyBytes >= stallAt && !this.stallDone) {
      this.stallDone = true;
      if (!this.aborted) {
        this.isStalled = true;
        const gate = new Promise((r) => (this.resumeGate = r));
        this.onStalled(s.bodyBytes);
        await gate;
      }
    }
    if (slow && s.bodyBytes < slow.bytes) await sleep(slow.pauseMs);
  }

  async run(client, name, id) {
    const o = this.opts;
    const deadlineMs = o.deadlineMs ?? 120000;
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      this.abort();
    }, deadlineMs);
    const signal = o.signal ? AbortSignal.any([this.controller.signal, o.signal]) : this.controller.signal;
    try {
      const s = await openStream(client, name, id, {
        stdoutFrom: o.stdoutFrom,
        stderrFrom: o.stderrFrom,
        signal,
        ownConnection: o.ownConnection ?? o.stallAt !== undefined,
        beforeRead: (st) => this.beforeRead(st),
      });
      this.stream = s;
      let next = null;
      let stopped = false;
      for await (const f of s) {
        if (f.type === START) {
          next = { stdout: f.json.stdoutFrom, stderr: f.json.stderrFrom };
          this.onStarted(f.json);
          if (o.stopAfter === 0) {
            stopped = true;
            break;
          }
          continue;
        }
        this.frames.push({ type: f.type, offset: f.offset, length: f.length });
        if (f.type === STDOUT) {
          let data = f.data;
          const left = o.stopAfter === undefined ? Infinity : o.stopAfter - this.taken(next);
          if (data.length > left) data = data.subarray(0, left);
          this.stdout.add(data);
          next.stdout += data.length;
          if (this.taken(next) === o.stopAfter) {
            stopped = true;
            break;
          }
        } else if (f.type === STDERR) {
          this.stderr.add(f.data);
          next.stderr += f.data.length;
        }
      }
      if (stopped) s.abort();
      if (timedOut) throw new Error(`the stream of ${name}/${id} did not end within ${deadlineMs} ms (read ${s.bodyBytes} bytes)`);
      return {
        start: s.start,
        exit: s.exit,
        error: s.error,
        end: stopped ? "stopped" : s.end,
        cutError: s.cutError,
        next,
        stdout: this.stdout,
        stderr: this.stderr,
        frames: this.frames,
        keepalives: s.keepalives,
        skipped: s.decoder.skipped,
        bodyBytes: s.bodyBytes,
      };
    } catch (e) {
      if (timedOut) throw new Error(`the stream of ${name}/${id} did not end within ${deadlineMs} ms`);
      if (this.aborted && e?.name === "AbortError")
        return { start: null, exit: null, error: null, end: "aborted", next: null, stdout: this.stdout, stderr: this.stderr, frames: this.frames };
      throw e;
    } finally {
      clearTimeout(timer);
      if (!this.stream?.start) this.onStartFailed(new Error(`the stream of ${name}/${id} ended before its start frame`));
    }
  }

  taken(next) {
    return next.stdout - this.stream.start.stdoutFrom;
  }
}
