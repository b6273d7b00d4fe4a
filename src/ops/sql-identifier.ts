import { ErrorCode, IdempotencyError } from "../core/errors.js";

const part = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/**
 * Quote a table or column name after checking it: letters, digits and `_`, starting with a letter or
 * `_`, at most 63 characters, optionally one `schema.` prefix for tables. Values never go through
 * here: they are always bound parameters.
 */
export function sqlIdentifier(name: unknown, what: string, allowSchema = false): string {
  const parts = typeof name === "string" ? name.split(".") : [];
  const ok = parts.length === 1 || (allowSchema && parts.length === 2);
  if (!ok || !parts.every((p) => part.test(p))) {
    throw new IdempotencyError(
      ErrorCode.invalidOptions,
      `${what} ${JSON.stringify(name)} is not a safe SQL identifier: use letters, digits and _ (at most 63), ` +
        "starting with a letter or _.",
    );
  }
  return parts.map((p) => `"${p}"`).join(".");
}
