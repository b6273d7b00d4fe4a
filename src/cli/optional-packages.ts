/**
 * Optional packages a command needs (a store's driver, the MCP SDK, tsx): loaded only when used, and,
 * when one is missing, one wording for what to do about it, whichever command asks.
 */
import { UsageError } from "./errors.js";
import { printable } from "./output.js";

/**
 * The advice every command gives for a package it needs and cannot find.
 * @example
 * installAdvice(["pg"]); // "install pg beside idempotool: npm install pg"
 * installAdvice(["@modelcontextprotocol/sdk", "zod"]);
 * // "install @modelcontextprotocol/sdk and zod beside idempotool: npm install @modelcontextprotocol/sdk zod"
 */
export function installAdvice(packages: readonly string[]): string {
  const names =
    packages.length > 1 ? `${packages.slice(0, -1).join(", ")} and ${packages.at(-1)}` : (packages[0] ?? "");
  return `install ${names} beside idempotool: npm install ${packages.join(" ")}`;
}

/**
 * The one line a command fails with when `what` needs packages that are not installed.
 * @example
 * needsPackages("idempotool proxy", ["@modelcontextprotocol/sdk"]);
 * // "idempotool proxy needs @modelcontextprotocol/sdk; install @modelcontextprotocol/sdk beside idempotool:
 * //  npm install @modelcontextprotocol/sdk" (one line)
 */
export function needsPackages(what: string, packages: readonly string[]): string {
  return `${what} needs ${packages.join(" and ")}; ${installAdvice(packages)}`;
}

/**
 * The package a failed `import()` could not find, or undefined for any other failure (which must not be
 * hidden): Node says `Cannot find package 'hono' imported from …` for a package that is missing.
 */
export function missingPackage(error: unknown): string | undefined {
  if (!(error instanceof Error) || (error as NodeJS.ErrnoException).code !== "ERR_MODULE_NOT_FOUND") {
    return undefined;
  }
  return /Cannot find package '([^']+)'/.exec(error.message)?.[1];
}

/**
 * Load an optional package for `what` (`idempotool proxy`, `a postgres:// store`). A package that is not
 * installed is a {@link UsageError} with {@link needsPackages}'s advice; one that is there but fails to
 * load says why.
 */
export async function loadOptional<T>(
  what: string,
  packages: readonly string[],
  load: () => Promise<T>,
): Promise<T> {
  try {
    return await load();
  } catch (error) {
    if (missingPackage(error) !== undefined) {
      throw new UsageError(needsPackages(what, packages), { cause: error });
    }
    const reason = printable(error instanceof Error ? (error.message.split("\n")[0] ?? "") : String(error));
    throw new UsageError(`${what} cannot load ${packages.join(" and ")}: ${reason}`, { cause: error });
  }
}
