/**
 * Asking a person to confirm an act that cannot be taken back, on the terminal. A script says `--yes`;
 * without a terminal and without `--yes` the command refuses, since nobody could have read the warning.
 */
import { createInterface } from "node:readline/promises";
import { UsageError } from "./errors.js";
import type { CliIo } from "./main.js";

/** Whether someone can answer a question: standard input is a terminal. */
export function canAsk(io: CliIo): boolean {
  const stdin = (io.stdin ?? process.stdin) as NodeJS.ReadableStream & { isTTY?: boolean };
  return stdin.isTTY === true;
}

/**
 * Refuse up front when a confirmation would be needed and nobody can give one. `what` completes
 * "… needs a confirmation".
 */
export function refuseUnconfirmable(io: CliIo, yes: boolean | undefined, what: string): void {
  if (yes || canAsk(io)) return;
  throw new UsageError(
    `${what} needs a confirmation, and standard input is not a terminal: nothing was changed. ` +
      "Run it on a terminal, or add --yes once you are sure of the evidence",
  );
}

/**
 * Ask on stderr and read one line from standard input; true when it is exactly `expected` (trimmed).
 * @example
 * if (!(await confirm(io, "Free key k1 of send_email in scope default? Type yes to confirm: ", "yes"))) return;
 */
export async function confirm(io: CliIo, question: string, expected: string): Promise<boolean> {
  const reader = createInterface({
    input: io.stdin ?? process.stdin,
    output: io.stderr,
    terminal: false,
  });
  // Standard input may end before a line comes: that is no answer, and no confirmation.
  const ended = new Promise<undefined>((resolve) => reader.once("close", () => resolve(undefined)));
  try {
    const answer = await Promise.race([reader.question(question), ended]);
    return answer?.trim() === expected;
  } catch {
    // Standard input closed before a line came: no answer is no confirmation.
    return false;
  } finally {
    reader.close();
  }
}
