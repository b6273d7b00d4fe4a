/**
 * Parsers for option values, shared by the commands; a bad value is a usage error (exit 2). Each message
 * completes "--option …" and names the unit the option counts in.
 */

import { InvalidArgumentError } from "commander";
import { maxTimerMs } from "../core/option-checks.js";
import { maxKeylessWindowMs } from "../mcp/call-key.js";

/** `--limit 50`: a positive whole number. */
export function positiveInteger(value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n <= 0) throw new InvalidArgumentError("must be a positive whole number");
  return n;
}

/** `--timeout 500`: whole milliseconds a timer can hold (1 to 2^31 − 1). */
export function milliseconds(value: string): number {
  return millisecondsUpTo(value, maxTimerMs);
}

/** `--without-key <ms>`: a short window, at most a minute (longer, genuine repeats would be absorbed). */
export function keylessWindow(value: string): number {
  return millisecondsUpTo(value, maxKeylessWindowMs);
}

function millisecondsUpTo(value: string, max: number): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > max) {
    throw new InvalidArgumentError(`must be a whole number of milliseconds from 1 to ${max}`);
  }
  return n;
}

/** `--ignore a,b --ignore c`: comma-separated and repeatable, collected in order. */
export function commaList(value: string, previous: readonly string[] = []): string[] {
  return [
    ...previous,
    ...value
      .split(",")
      .map((item) => item.trim())
      .filter(Boolean),
  ];
}
