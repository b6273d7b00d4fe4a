/**
 * Split a command line the way a POSIX shell splits words, for `audit --mcp "<command>"`: single
 * quotes keep everything, double quotes keep all but `\"`, `\\`, `\$` and `` \` ``, a backslash outside
 * quotes escapes the next character. Leading `NAME=value` words set the command's environment.
 * Nothing is expanded: no variables, globs or substitutions.
 */
import { UsageError } from "./errors.js";

export interface ShellCommand {
  readonly command: string;
  readonly args: readonly string[];
  /** From leading `NAME=value` words. */
  readonly env: Readonly<Record<string, string>>;
}

/**
 * @example
 * splitShellWords(`npx -y "@scope/server" --root '/tmp/my dir'`);
 * // ["npx", "-y", "@scope/server", "--root", "/tmp/my dir"]
 */
export function splitShellWords(line: string): string[] {
  const words: string[] = [];
  let word = "";
  let inWord = false;
  let quote: "'" | '"' | undefined;
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (quote === "'") {
      if (c === "'") quote = undefined;
      else word += c;
      continue;
    }
    if (quote === '"') {
      if (c === '"') quote = undefined;
      else if (c === "\\" && i + 1 < line.length && '"\\$`'.includes(line[i + 1]!)) word += line[++i];
      else word += c;
      continue;
    }
    if (c === "'" || c === '"') {
      quote = c;
      inWord = true;
    } else if (c === "\\") {
      if (i + 1 >= line.length) throw new UsageError("the command ends with a lone backslash");
      const next = line[++i]!;
      // A backslash-newline continues the line.
      if (next !== "\n") word += next;
      inWord = true;
    } else if (/\s/.test(c)) {
      if (inWord) words.push(word);
      word = "";
      inWord = false;
    } else {
      word += c;
      inWord = true;
    }
  }
  if (quote)
    throw new UsageError(`the command has an unterminated ${quote === "'" ? "single" : "double"} quote`);
  if (inWord) words.push(word);
  return words;
}

/** Split a command line into the command, its arguments and leading environment assignments. */
export function parseShellCommand(line: string): ShellCommand {
  const words = splitShellWords(line);
  const env: Record<string, string> = {};
  while (words.length > 0 && /^[A-Za-z_][A-Za-z0-9_]*=/.test(words[0]!)) {
    const assignment = words.shift()!;
    const at = assignment.indexOf("=");
    env[assignment.slice(0, at)] = assignment.slice(at + 1);
  }
  const [command, ...args] = words;
  if (command === undefined) throw new UsageError("the command is empty");
  return { command, args, env };
}

/**
 * A word as a POSIX shell reads it back: unchanged when it holds only safe characters, else in single
 * quotes. The inverse of {@link splitShellWords}, for commands we print for the user to run.
 * @example
 * shellQuote("/tmp/my dir"); // "'/tmp/my dir'"
 */
export function shellQuote(word: string): string {
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(word)) return word;
  return `'${word.replaceAll("'", `'\\''`)}'`;
}
