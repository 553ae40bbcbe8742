// The line window of read, on a generated stream (no daemon): only the
// window is kept, the rest is counted as it passes, and a huge file is not
// read to its end.

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { readLineWindow } from "../dist/lines.js";

/** A download of `total` bytes of `line` repeated, produced as it is pulled, in chunks of `chunk`. */
function generated(line, total, chunk = 65_536) {
  const bytes = new TextEncoder().encode(line);
  let sent = 0;
  let cancelled = false;
  const body = new ReadableStream({
    pull(controller) {
      if (sent >= total) return controller.close();
      const n = Math.min(chunk, total - sent);
      const out = new Uint8Array(n);
      for (let i = 0; i < n; i++) out[i] = bytes[(sent + i) % bytes.length];
      sent += n;
      controller.enqueue(out);
    },
    cancel() {
      cancelled = true;
    },
  });
  return { download: { length: total, body, cancel: () => body.cancel() }, sent: () => sent, cancelled: () => cancelled };
}

describe("readLineWindow", () => {
  it("keeps the window, counts every line, across chunk boundaries that split characters", async () => {
    // "é" is two bytes and a 7-byte chunk splits it often.
    const g = generated("ab\u00e9\n", 5 * 1000, 7);
    const w = await readLineWindow(g.download, 10, 3, 10_000);
    assert.deepEqual(w, { empty: false, lines: ["ab\u00e9", "ab\u00e9", "ab\u00e9"], totalLines: 1000, more: true });
  });

  it("stops reading once it has counted far enough past the window", async () => {
    const total = 256 << 20; // 256 MiB, never materialised
    const g = generated("0123456789abcde\n", total);
    const before = process.memoryUsage().heapUsed;
    const w = await readLineWindow(g.download, 5, 2, 10_000, 1 << 20);
    assert.deepEqual(w, { empty: false, lines: ["0123456789abcde", "0123456789abcde"], totalLines: undefined, more: true });
    assert.ok(g.sent() < 4 << 20, `read ${g.sent()} bytes of ${total}`);
    assert.equal(g.cancelled(), true, "the rest of the download was cancelled");
    assert.ok(process.memoryUsage().heapUsed - before < 32 << 20);
  });

  it("reads a file to its end when it is short enough to count", async () => {
    const g = generated("x\n", 2 * 50_000);
    const w = await readLineWindow(g.download, 49_999, 10, 10_000, 1 << 20);
    assert.deepEqual(w, { empty: false, lines: ["x"], totalLines: 50_000, more: false });
    assert.equal(g.sent(), 100_000);
  });

  it("caps a single enormous line in the window and still counts past it", async () => {
    const g = generated("y", 3 << 20); // one 3 MiB line without a newline
    const w = await readLineWindow(g.download, 0, 1, 10_000);
    assert.equal(w.lines.length, 1);
    assert.equal(w.lines[0].length, 1 << 20);
    assert.equal(w.totalLines, 1);
    assert.equal(w.more, false);
  });

  it("tells an empty file", async () => {
    const g = generated("z", 0);
    assert.deepEqual(await readLineWindow(g.download, 0, 10, 10_000), { empty: true, lines: [], totalLines: 0, more: false });
  });
});
