// A window of lines out of a streamed download, in constant memory: only
// the lines asked for are kept, the others are counted as they pass.

import { readChunk, type Download } from "./stream.js";

/** Longest part of one line kept (deepagents shows far less of a line). */
export const MAX_LINE_CHARS = 1 << 20;
/**
 * Once the window is complete, lines are still counted (for "of N lines")
 * through this many more bytes; past that the download is stopped and the
 * total left unknown.
 */
export const COUNT_AHEAD_BYTES = 64 << 20;

export interface LineWindow {
  /** The file has no bytes at all. */
  empty: boolean;
  /** Lines offset .. offset+limit-1 (0-indexed), without their newlines. */
  lines: string[];
  /** Lines in the file (a last line without a newline counts); undefined when not counted to the end. */
  totalLines: number | undefined;
  /** Something follows the window (known even when totalLines is not). */
  more: boolean;
}

export async function readLineWindow(
  download: Download,
  offset: number,
  limit: number,
  timeoutMs: number,
  countAheadBytes = COUNT_AHEAD_BYTES,
): Promise<LineWindow> {
  const end = offset + limit;
  const decoder = new TextDecoder("utf-8", { ignoreBOM: true });
  const lines: string[] = [];
  let index = 0; // the line being read
  let current = ""; // its text, while it is inside the window
  let lineHasText = false;
  let bytes = 0;
  let bytesAtWindowEnd = -1;

  const take = (text: string): void => {
    let pos = 0;
    for (;;) {
      const nl = text.indexOf("\n", pos);
      const stop = nl === -1 ? text.length : nl;
      if (stop > pos) lineHasText = true;
      const inWindow = index >= offset && index < end;
      if (inWindow && current.length < MAX_LINE_CHARS) {
        current += text.slice(pos, Math.min(stop, pos + MAX_LINE_CHARS - current.length));
      }
      if (nl === -1) return;
      if (inWindow) lines.push(current);
      current = "";
      lineHasText = false;
      index++;
      pos = nl + 1;
    }
  };

  const reader = download.body.getReader();
  let counted = true;
  try {
    for (;;) {
      const { done, value } = await readChunk(reader, timeoutMs);
      if (done) break;
      bytes += value.byteLength;
      take(decoder.decode(value, { stream: true }));
      if (index >= end) {
        if (bytesAtWindowEnd < 0) bytesAtWindowEnd = bytes;
        if (bytes - bytesAtWindowEnd > countAheadBytes) {
          counted = false;
          break;
        }
      }
    }
    if (counted) take(decoder.decode());
  } finally {
    if (!counted) await reader.cancel().catch(() => {});
    reader.releaseLock();
  }
  if (!counted) return { empty: false, lines, totalLines: undefined, more: true };
  if (lineHasText) {
    if (index >= offset && index < end) lines.push(current);
    index++;
  }
  return { empty: bytes === 0, lines, totalLines: index, more: index > end };
}
