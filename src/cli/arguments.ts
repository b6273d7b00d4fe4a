/** Parsers for option values, shared by the commands; a bad value is a usage error (exit 2). */
import { InvalidArgumentError } from "commander";

/** `--timeout 500`: a positive whole number of milliseconds. */
export function positiveInteger(value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n <= 0)
    throw new InvalidArgumentError("must be a positive integer (milliseconds)");
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
