/**
 * The checks of the per-call key policy options that every tool-call integration takes (`turnId`, `key`,
 * `scope`), so a bad one fails at configuration time with the same words everywhere.
 */
import { invalidOption } from "../core/option-checks.js";

/** The key policy options as an integration receives them, before they are checked. */
export interface KeyPolicyOptions {
  readonly turnId?: unknown;
  readonly key?: unknown;
  readonly scope?: unknown;
}

/**
 * Check `turnId` and `key` (functions) and `scope` (a string or a function) at configuration time.
 * @throws IdempotencyError `invalid_options` naming the option at fault.
 */
export function checkKeyPolicyOptions(options: KeyPolicyOptions, where: string): void {
  for (const hook of ["turnId", "key"] as const) {
    if (options[hook] !== undefined && typeof options[hook] !== "function") {
      invalidOption(where, hook, "must be a function");
    }
  }
  const scope = options.scope;
  if (scope !== undefined && typeof scope !== "string" && typeof scope !== "function") {
    invalidOption(where, "scope", "must be a string or a function");
  }
}
