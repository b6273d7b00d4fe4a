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
