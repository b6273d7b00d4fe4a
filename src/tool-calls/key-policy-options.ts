/**
 * The options every tool-call integration takes on top of `idempotent()`'s and applies per call: the key
 * policy (`turnId`, `key`, `scope`, `intentFields`) and what the model reads (`output`). Checked here, so a
 * bad one fails at configuration time with the same words everywhere, and kept out of what reaches
 * `idempotent()`.
 */
import { invalidOption } from "../core/option-checks.js";
import { intentFieldsOf } from "./intent-key.js";
import { type OutputMode, outputModeOf } from "./model-output.js";

/** The key policy options as an integration receives them, before they are checked. */
export interface KeyPolicyOptions {
  readonly turnId?: unknown;
  readonly key?: unknown;
  readonly scope?: unknown;
}

/** The options an integration applies per call, as it receives them. */
export interface ToolCallOptions extends KeyPolicyOptions {
  readonly intentFields?: unknown;
  readonly output?: unknown;
}

/** An integration's options without the ones it applies per call: what it passes on to `idempotent()`. */
export type CoreOptionsOf<O> = Omit<O, keyof ToolCallOptions>;

/** An integration's options, split and checked. */
export interface SplitToolCallOptions<O> {
  /** For `idempotent()`, which validates them itself and names the one at fault. */
  readonly core: CoreOptionsOf<O>;
  /** `intentFields`, checked. */
  readonly fields: readonly string[] | undefined;
  /** `output`, checked; `"envelope"` by default. */
  readonly mode: OutputMode;
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

/**
 * Split an integration's options into `idempotent()`'s and the ones applied per call, checking these.
 * @throws IdempotencyError `invalid_options` naming the option at fault.
 */
export function splitToolCallOptions<O extends ToolCallOptions>(
  options: O,
  where: string,
): SplitToolCallOptions<O> {
  const { key: _key, turnId: _turnId, scope: _scope, intentFields, output, ...core } = options;
  const fields = intentFieldsOf(intentFields, where);
  const mode = outputModeOf(output, where);
  checkKeyPolicyOptions(options, where);
  return { core: core as CoreOptionsOf<O>, fields, mode };
}

/** The `scope` option as the scope of a call: what the function answers, the string given, or "default". */
export function scopeOfOption<C>(
  scope: string | ((context: C) => string) | undefined,
): (context: C) => string {
  return typeof scope === "function" ? (context) => scope(context) : () => scope ?? "default";
}
