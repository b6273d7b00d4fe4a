import { ErrorCode, IdempotencyError } from "../core/errors.js";
import { argumentKey, type ResolvedRetryCall } from "./retry-call.js";

const maxKeyLength = 255;

/**
 * The key of one logical call, and the `_meta` that carries it: the caller's, else the one already in
 * `_meta`, else the `idempotency_key` argument (the model chose it), else a new one. Chosen once, before
 * the first attempt, and sent on every attempt.
 */
export function callKeyOf(
  params: { readonly arguments?: unknown; readonly _meta?: unknown },
  given: string | undefined,
  config: ResolvedRetryCall,
): { key: string; meta: Record<string, unknown> } {
  const meta =
    typeof params._meta === "object" && params._meta !== null && !Array.isArray(params._meta)
      ? (params._meta as Record<string, unknown>)
      : {};
  const inMeta = meta[config.metaField];
  const key =
    given ??
    (typeof inMeta === "string" ? inMeta : undefined) ??
    argumentKey(params.arguments) ??
    config.newKey();
  if (typeof key !== "string" || key.length === 0 || key.length > maxKeyLength) {
    // Sending it would only be refused: say so here, where the bad key was made.
    throw new IdempotencyError(
      ErrorCode.keyInvalid,
      `An idempotency key must be a string of 1–${maxKeyLength} characters, got ${typeof key === "string" ? `${key.length} characters` : typeof key}; nothing was sent.`,
    );
  }
  return { key, meta: { ...meta, [config.metaField]: key } };
}
