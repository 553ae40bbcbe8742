/**
 * Mastra's grep takes a JavaScript regular expression; the sandbox has
 * POSIX `grep -E`. A pattern is translated to an extended regular
 * expression that matches at least every line the JavaScript one does;
 * each line grep returns is then checked with the JavaScript expression
 * itself (which also gives the column). A pattern outside what translates
 * safely is refused, and Mastra then searches host-side over the native
 * listing and reads.
 */

const CLASS_ESCAPES: Record<string, string> = { d: "0-9", w: "A-Za-z0-9_", s: "[:space:]" };
const ESCAPES: Record<string, string> = {
  d: "[0-9]",
  D: "[^0-9]",
  w: "[A-Za-z0-9_]",
  W: "[^A-Za-z0-9_]",
  s: "[[:space:]]",
  S: "[^[:space:]]",
  t: "\t",
};
/** Escaped characters that stand for themselves in both languages. */
const PUNCT = new Set([..."\\.^$|?*+()[]{}/-:,=!<>#&~'\"@%` "]);
/** Characters that an ERE needs escaped to be literal. */
const ERE_SPECIAL = new Set([..."\\.^$|?*+()[]{}"]);

/**
 * The ERE for `source`, or why it cannot be translated. grep runs in the C
 * locale, where `.` and a negated class match one byte and a character
 * outside ASCII is several: such a one-character atom is widened to "one
 * or more" (`.` to `.+`), so the ERE still matches every line the
 * JavaScript expression matches. Case-insensitive patterns must be ASCII
 * (grep folds ASCII only there).
 */
export function toExtendedRegex(source: string, caseSensitive: boolean): { ere: string } | { reason: string } {
  if (!caseSensitive && /[^\x00-\x7f]/.test(source)) return { reason: "case-insensitive non-ASCII pattern" };
  let out = "";
  let i = 0;
  const n = source.length;
  while (i < n) {
    const c = source[i] as string;
    let atom: string;
    /** Matches one character that may be several bytes. */
    let wide = false;
    if (c === "\\") {
      const e = source[i + 1];
      if (e === undefined) return { reason: "trailing backslash" };
      const mapped = ESCAPES[e];
      if (mapped !== undefined) {
        atom = mapped;
        wide = e === "D" || e === "W" || e === "S";
      } else if (PUNCT.has(e)) atom = ERE_SPECIAL.has(e) ? `\\${e}` : e;
      else return { reason: `escape \\${e}` };
      i += 2;
    } else if (c === "[") {
      const cls = translateClass(source, i);
      if ("reason" in cls) return cls;
      atom = cls.ere;
      wide = cls.negated;
      i = cls.end;
    } else if (c === "(") {
      if (source[i + 1] === "?") {
        if (source[i + 2] !== ":") return { reason: "lookaround or named group" };
        i += 3;
      } else i++;
      out += "(";
      continue;
    } else if (c === "|" || c === "^" || c === "$") {
      out += c;
      i++;
      continue;
    } else if (c === ")") {
      atom = ")"; // a group's end takes a quantifier like an atom
      i++;
    } else if (c === "*" || c === "+" || c === "?") {
      return { reason: `quantifier ${c} without an atom` };
    } else if (c === ".") {
      atom = ".";
      wide = true;
      i++;
    } else if (c === "{" || c === "}" || c === "]") {
      atom = `\\${c}`;
      i++;
    } else if (c === "\n" || c === "\r") {
      return { reason: "line terminator" };
    } else {
      atom = c;
      i++;
    }
    // The quantifier after the atom, if any (a lazy one matches the same
    // lines, at the same start).
    let quant = "";
    const q = source[i];
    if (q === "*" || q === "+" || q === "?") {
      quant = q;
      i++;
    } else if (q === "{") {
      const m = /^\{(\d+)(,(\d*))?\}/.exec(source.slice(i));
      if (m) {
        quant = m[0];
        i += m[0].length;
      }
    }
    if (quant && source[i] === "?") i++;
    if (wide) quant = quant === "" || quant === "+" ? "+" : "*";
    out += atom + quant;
  }
  return { ere: out };
}

function translateClass(
  source: string,
  start: number,
): { ere: string; end: number; negated: boolean } | { reason: string } {
  let i = start + 1;
  let negated = false;
  if (source[i] === "^") {
    negated = true;
    i++;
  }
  if (source[i] === "]") return { reason: "empty character class" };
  let body = "";
  let dash = false;
  for (;;) {
    const c = source[i];
    if (c === undefined) return { reason: "unterminated character class" };
    if (c === "]") break;
    if (c === "[") return { reason: "'[' inside a character class" };
    if (c === "\\") {
      const e = source[i + 1];
      if (e === undefined) return { reason: "trailing backslash" };
      const mapped = CLASS_ESCAPES[e];
      if (mapped !== undefined) body += mapped;
      else if (e === "-") dash = true;
      else if (e === "]" || e === "^") return { reason: `\\${e} inside a character class` };
      else if (PUNCT.has(e)) body += e;
      else return { reason: `escape \\${e} inside a character class` };
      i += 2;
      continue;
    }
    body += c;
    i++;
  }
  // A literal '-' goes last, where POSIX reads it as itself.
  if (dash) body += "-";
  return { ere: `[${negated ? "^" : ""}${body}]`, end: i + 1, negated };
}

export interface GrepLine {
  path: string;
  line: number;
  text: string;
}

/** `path:line:text` lines of `grep -rnH` (an incomplete last line is dropped). */
export function parseGrepOutput(text: string, truncated: boolean): GrepLine[] {
  if (truncated && !text.endsWith("\n")) text = text.slice(0, text.lastIndexOf("\n") + 1);
  const out: GrepLine[] = [];
  for (const line of text.split("\n")) {
    const m = /^(.*?):(\d+):(.*)$/s.exec(line);
    if (!m) continue; // "Binary file ... matches" and the like
    out.push({ path: m[1] ?? "", line: Number(m[2]), text: m[3] ?? "" });
  }
  return out;
}
