/**
 * How a tool states the outcome of its own failure (docs/concepts.md, "Declaring outcomes"), and how a
 * replayed failure looks.
 */

/** Thrown by a tool: the call failed definitively (a card declined). It is recorded and replayed to every repeat. */
export class DefinitiveFailure extends Error {
  override name = "DefinitiveFailure";
  /** JSON data kept with the failure and handed back on replay. */
  readonly data: unknown;
  constructor(cause: unknown, data?: unknown) {
    super(cause instanceof Error ? cause.message : String(cause), { cause });
    this.data = data;
  }
}

/** Thrown by a tool: nothing happened (validation failed before any effect), so the key is released and a retry may run. */
export class NotExecuted extends Error {
  override name = "NotExecuted";
  constructor(cause: unknown) {
    super(cause instanceof Error ? cause.message : String(cause), { cause });
  }
}

/**
 * Declare a definitive failure: the caller gets `error` now, and every repeat gets it again as a
 * {@link ReplayedFailureError} until the record expires.
 * @example
 * const charge = idempotent(async (args: { cents: number }) => {
 *   const response = await fetch("https://pay.example/charge", { method: "POST", body: JSON.stringify(args) });
 *   if (response.status === 402) throw definitiveFailure(new Error("card declined"), { status: 402 });
 *   return { id: "ch_1" };
 * }, { name: "charge_card", store: memoryStore() });
 */
export function definitiveFailure(error: unknown, data?: unknown): DefinitiveFailure {
  return new DefinitiveFailure(error, data);
}

/**
 * Declare that the effect certainly did not happen: the key is released and the caller gets `error`.
 * @example
 * const send = idempotent(async (args: { to: string }) => {
 *   if (!args.to.includes("@")) throw notExecuted(new TypeError("not an email address"));
 *   return { sent: true };
 * }, { name: "send_email", store: memoryStore() });
 */
export function notExecuted(error: unknown): NotExecuted {
  return new NotExecuted(error);
}

/** A definitive failure recorded earlier, handed back to a repeat of the call. */
export class ReplayedFailureError extends Error {
  /** Always true: this failure happened on an earlier call, not this one. */
  readonly was_replay = true;
  readonly original_called_at: string;
  readonly idempotency_key: string;
  /** The original error's `code`, when it had one. */
  readonly code: string | number | undefined;
  /** The data given to `definitiveFailure`. */
  readonly data: unknown;

  constructor(failure: StoredFailure, calledAt: string, key: string) {
    super(failure.message);
    this.name = failure.name;
    this.code = failure.code;
    this.data = failure.data;
    this.original_called_at = calledAt;
    this.idempotency_key = key;
  }
}

/** A failure as a store keeps it. */
export interface StoredFailure {
  readonly name: string;
  readonly message: string;
  readonly code?: string | number;
  readonly data?: unknown;
}
