/**
 * Terminal output shared by the commands: colour only on a TTY (and never under NO_COLOR), and plain
 * aligned tables.
 */

/** The part of a stream we look at to decide on colour. */
export interface OutputStream {
  write(text: string): unknown;
  readonly isTTY?: boolean;
}

export interface Styles {
  readonly enabled: boolean;
  red(text: string): string;
  green(text: string): string;
  yellow(text: string): string;
  bold(text: string): string;
  dim(text: string): string;
}

/** Colour for a TTY; FORCE_COLOR forces it on, NO_COLOR off (https://no-color.org). */
export function styles(stream: OutputStream, env: NodeJS.ProcessEnv = process.env): Styles {
  const forced = env.FORCE_COLOR !== undefined && env.FORCE_COLOR !== "0" && env.FORCE_COLOR !== "false";
  const enabled = (env.NO_COLOR === undefined || env.NO_COLOR === "") && (forced || stream.isTTY === true);
  const sgr = (open: number, close: number) => (text: string) =>
    enabled ? `\u001b[${open}m${text}\u001b[${close}m` : text;
  return {
    enabled,
    red: sgr(31, 39),
    green: sgr(32, 39),
    yellow: sgr(33, 39),
    bold: sgr(1, 22),
    dim: sgr(2, 22),
  };
}

/** Visible width of a cell, ignoring colour codes. */
function width(text: string): number {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: stripping SGR escape codes is the point.
  return [...text.replace(/\u001b\[[0-9;]*m/g, "")].length;
}

/**
 * Lines of an aligned table: a header, a rule, then the rows. Cells may carry colour.
 * @example
 * table(["tool", "verdict"], [["send_email", "FAIL"]]); // ["tool        verdict", "----------  -------", "send_email  FAIL"]
 */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): string[] {
  const widths = header.map((h, i) => Math.max(width(h), ...rows.map((row) => width(row[i] ?? ""))));
  const line = (row: readonly string[]) =>
    row
      .map((cell, i) => (i === row.length - 1 ? cell : cell + " ".repeat(widths[i]! - width(cell))))
      .join("  ")
      .trimEnd();
  return [line(header), widths.map((w) => "-".repeat(w)).join("  "), ...rows.map(line)];
}

// C0 controls, DEL, C1 controls (8-bit CSI and OSC among them), the bidi embeddings, overrides and
// isolates, and the line and paragraph separators.
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point.
const controls = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]/g;
const rawInJson = /[\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]/g;
const named: Record<string, string> = { "\n": "\\n", "\r": "\\r", "\t": "\\t" };

function escapeControl(char: string): string {
  return named[char] ?? `\\u${char.charCodeAt(0).toString(16).padStart(4, "0")}`;
}

/**
 * Text read from a store or a server, made safe for a terminal: control characters become visible
 * escapes (`\u001b`, `\r`), so a key cannot set the clipboard, retitle the window, move the cursor over
 * earlier rows or reverse the line. `--json` keeps the exact value.
 * @example
 * printable("a\u001b]0;pwned\u0007"); // "a\\u001b]0;pwned\\u0007"
 */
export function printable(text: string): string {
  return text.replace(controls, escapeControl);
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: keeping our SGR colour codes is the point.
const sgr = /(\u001b\[[0-9;]*m)/;

/**
 * A line we built, whose only escape codes may be our own colours: every other control character is
 * escaped as {@link printable} does. Where a line holds text from elsewhere, escape that text first.
 */
export function printableLine(line: string): string {
  return line
    .split(sgr)
    .map((part, i) => (i % 2 === 1 ? part : printable(part)))
    .join("");
}

/**
 * JSON for a terminal or a pipe: exactly the value `JSON.stringify` writes, with the characters it leaves
 * raw that a terminal would act on (DEL, C1, bidi controls) written as `\u` escapes, which JSON allows.
 */
export function terminalJson(value: unknown): string {
  // JSON.stringify escapes C0 in strings itself (the newlines left are its indentation); outside strings
  // JSON holds none of the others, so escaping them changes no value.
  return (JSON.stringify(value, null, 2) ?? "null").replace(rawInJson, escapeControl);
}
