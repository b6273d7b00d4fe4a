/**
 * What the command line exits with, and how an error reaches the user: one clear line, with the stack
 * only under `--debug`.
 */
import { CommanderError } from "commander";
import { printable } from "./output.js";

/** Exit codes shared by every command. */
export const ExitCode = {
  /** The command ran and found nothing wrong. */
  ok: 0,
  /** The command ran and found a problem: a tool without a key, a double effect. */
  findings: 1,
  /** The command could not run: bad usage or input, an unreachable server or store, a bug. */
  failure: 2,
} as const;
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode];

/** Bad usage or input the user can fix: a bad URL, a missing file, a module with no such export. */
export class UsageError extends Error {
  override name = "UsageError";
}

/**
 * A bad option value found once the command runs (`--table bad-name`, a `--prefix` without `:`): reported
 * like commander's own usage errors, with a pointer to the command's help.
 */
export class OptionError extends UsageError {
  override name = "OptionError";
}

/** An idempotool error, also when it comes from another copy of the library (a user's module). */
function errorCode(error: unknown): string | undefined {
  if (typeof error !== "object" || error === null) return undefined;
  const { code, httpStatus } = error as { code?: unknown; httpStatus?: unknown };
  return typeof code === "string" && typeof httpStatus === "number" ? code : undefined;
}

/**
 * Tell the user what went wrong and return the exit code. Commander has already printed its own
 * usage errors; everything else gets one line, or its stack and causes under `debug`. `command` (like
 * `idempotool inspect list`) is the command that ran, for the pointer to its help after an option error.
 */
export function reportError(
  error: unknown,
  debug: boolean,
  write: (text: string) => void,
  command = "idempotool",
): ExitCode {
  if (error instanceof CommanderError) {
    // Help and version "errors" are how commander says it is done.
    return error.exitCode === 0 ? ExitCode.ok : ExitCode.failure;
  }
  if (debug) {
    write(`${stackOf(error).split("\n").map(printable).join("\n")}\n`);
    return ExitCode.failure;
  }
  const text = error instanceof Error ? error.message : String(error);
  const message = printable(text.replace(/\s*\n\s*/g, " ").trim());
  const code = errorCode(error);
  const known = error instanceof UsageError || code !== undefined;
  // A code tells what to do about a failure at run time; bad input is said well enough by its message.
  const prefix = code && code !== "invalid_options" && code !== "invalid_arguments" ? `${code}: ` : "";
  const hint =
    error instanceof OptionError
      ? `; see ${command} --help`
      : known
        ? ""
        : " (run with --debug for the stack trace)";
  write(`idempotool: ${prefix}${message}${hint}\n`);
  return ExitCode.failure;
}

function stackOf(error: unknown): string {
  const parts: string[] = [];
  let current: unknown = error;
  for (let depth = 0; current !== undefined && depth < 5; depth++) {
    parts.push(current instanceof Error ? (current.stack ?? String(current)) : String(current));
    current = current instanceof Error ? current.cause : undefined;
    if (current !== undefined) parts.push("Caused by:");
  }
  return parts.join("\n");
}
