/**
 * What the command line exits with, and how an error reaches the user: one clear line, with the stack
 * only under `--debug`.
 */
import { CommanderError } from "commander";

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

/** An idempotool error, also when it comes from another copy of the library (a user's module). */
function errorCode(error: unknown): string | undefined {
  if (typeof error !== "object" || error === null) return undefined;
  const { code, httpStatus } = error as { code?: unknown; httpStatus?: unknown };
  return typeof code === "string" && typeof httpStatus === "number" ? code : undefined;
}

/**
 * Tell the user what went wrong and return the exit code. Commander has already printed its own
 * usage errors; everything else gets one line, or its stack and causes under `debug`.
 */
export function reportError(error: unknown, debug: boolean, write: (text: string) => void): ExitCode {
  if (error instanceof CommanderError) {
    // Help and version "errors" are how commander says it is done.
    return error.exitCode === 0 ? ExitCode.ok : ExitCode.failure;
  }
  if (debug) {
    write(`${stackOf(error)}\n`);
    return ExitCode.failure;
  }
  const message = (error instanceof Error ? error.message : String(error)).replace(/\s*\n\s*/g, " ").trim();
  const code = errorCode(error);
  const known = error instanceof UsageError || code !== undefined;
  // A code tells what to do about a failure at run time; bad input is said well enough by its message.
  const prefix = code && code !== "invalid_options" && code !== "invalid_arguments" ? `${code}: ` : "";
  write(`idempotool: ${prefix}${message}${known ? "" : " (run with --debug for the stack trace)"}\n`);
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
