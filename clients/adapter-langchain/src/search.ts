// grep and glob as argv for the sandbox's own find, grep and stat (GNU or
// BusyBox): no shell, so no pattern or path is ever parsed as shell syntax.
// Virtual filesystems are pruned from every walk: reading /proc or /dev
// from a recursive search can block (a FIFO, /proc/kmsg) or loop.

import micromatch from "micromatch";
import type { FileInfo, GrepMatch } from "deepagents";
import { binaryMimeType, joinPath } from "./paths.js";

const PRUNED = ["/proc", "/sys", "/dev", "/run"];
const WILDCARDS = /[*?[{]/;
/**
 * Control characters no text line holds (tab, CR, form feed, vertical tab
 * and ESC allowed): a "line" with one is a match inside a binary file,
 * which BusyBox grep prints where GNU grep says "Binary file ... matches".
 */
const BINARY_TEXT = /[\x00-\x08\x0e-\x1a\x1c-\x1f\x7f]/;

function pruneArgs(): string[] {
  const args = ["("];
  PRUNED.forEach((p, i) => {
    if (i > 0) args.push("-o");
    args.push("-path", p);
  });
  args.push(")", "-prune", "-o");
  return args;
}

/**
 * Literal (fixed-string) search of every regular file under `path` (a
 * directory or one file), optionally only files whose name matches `glob`:
 * `find PATH ( -path /proc -o ... ) -prune -o -type f [-name GLOB] -exec
 * grep -HnF -e PATTERN -- {} +`. Only regular files are read, so a FIFO or
 * device never blocks the search.
 */
export function grepArgv(pattern: string, path: string, glob: string | null | undefined): string[] {
  const argv = ["find", path, ...pruneArgs(), "-type", "f"];
  if (glob) argv.push("-name", glob);
  argv.push("-exec", "grep", "-HnF", "-e", pattern, "--", "{}", "+");
  return argv;
}

/**
 * `path:line:text` lines. The path is taken up to the first `:<digits>:`,
 * so a colon in a file name is kept unless it is followed by digits and
 * another colon. Files deepagents treats as binary (by extension) are
 * skipped, and so are matches in binary content (GNU grep's "Binary file
 * ... matches", BusyBox's raw lines with control characters). A last line
 * cut by the output cap is dropped.
 */
export function parseGrep(output: string, cut: boolean): GrepMatch[] {
  let text = output;
  if (cut && !text.endsWith("\n")) text = text.slice(0, text.lastIndexOf("\n") + 1);
  const out: GrepMatch[] = [];
  for (const line of text.split("\n")) {
    const m = /^(.*?):(\d+):(.*)$/s.exec(line);
    if (!m) continue;
    const path = m[1] ?? "";
    if (binaryMimeType(path) || BINARY_TEXT.test(m[3] ?? "")) continue;
    out.push({ path, line: Number(m[2]), text: m[3] ?? "" });
  }
  return out;
}

export interface GlobPlan {
  /** The directory find starts from: the search base plus the pattern's literal leading directories. */
  root: string;
  /** The pattern relative to the search base. */
  pattern: string;
  argv: string[];
}

/** The fields stat prints for each entry: size, mtime (s), type, path. */
const STAT_FORMAT = "%s\t%Y\t%F\t%n";

/**
 * find + stat over the part of the tree the pattern can match. A pattern
 * given as an absolute path under `base` is taken relative to it; any other
 * leading `/` is dropped (deepagents' own backends do the same). A last
 * segment without `**`, braces or classes is handed to find as `-name`, so
 * only candidates are stat'ed and sent back.
 */
export function globPlan(pattern: string, base: string): GlobPlan {
  let pat = pattern;
  if (base !== "/" && pat.startsWith(`${base}/`)) pat = pat.slice(base.length + 1);
  else pat = pat.replace(/^\/+/, "");
  const segments = pat.split("/").filter((s) => s !== "" && s !== ".");
  pat = segments.join("/");
  let root = base;
  let i = 0;
  for (; i < segments.length - 1; i++) {
    const seg = segments[i] ?? "";
    if (WILDCARDS.test(seg) || seg === "..") break;
    root = joinPath(root, seg);
  }
  const argv = ["find", root, "-mindepth", "1", ...pruneArgs()];
  const last = segments[segments.length - 1] ?? "";
  if (last && !last.includes("**") && !/[[{\\]/.test(last)) argv.push("-name", last);
  argv.push("-exec", "stat", "-c", STAT_FORMAT, "{}", "+");
  return { root, pattern: pat, argv };
}

/**
 * The entries of a glob's find output that match its pattern (micromatch,
 * dot files included, as deepagents' in-memory backends match), with
 * absolute paths, sorted by path.
 */
export function parseGlob(output: string, cut: boolean, plan: GlobPlan, base: string): FileInfo[] {
  let text = output;
  if (cut && !text.endsWith("\n")) text = text.slice(0, text.lastIndexOf("\n") + 1);
  const prefix = base === "/" ? "/" : `${base}/`;
  const out: FileInfo[] = [];
  for (const line of text.split("\n")) {
    const row = parseStat(line);
    if (!row || !row.path.startsWith(prefix)) continue;
    const rel = row.path.slice(prefix.length);
    if (!micromatch.isMatch(rel, plan.pattern, { dot: true })) continue;
    out.push({
      path: row.path,
      is_dir: row.isDir,
      size: row.size,
      modified_at: new Date(row.mtime * 1000).toISOString(),
    });
  }
  out.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  return out;
}

function parseStat(line: string): { size: number; mtime: number; isDir: boolean; path: string } | undefined {
  const a = line.indexOf("\t");
  const b = a < 0 ? -1 : line.indexOf("\t", a + 1);
  const c = b < 0 ? -1 : line.indexOf("\t", b + 1);
  if (c < 0) return undefined;
  const size = Number(line.slice(0, a));
  const mtime = Number(line.slice(a + 1, b));
  if (!Number.isFinite(size) || !Number.isFinite(mtime)) return undefined;
  return { size, mtime, isDir: line.slice(b + 1, c) === "directory", path: line.slice(c + 1) };
}
