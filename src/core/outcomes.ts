/**
 * How a tool states the outcome of its own failure (docs/concepts.md, "Declaring outcomes"), how a
 * replayed failure looks, and whether an error proves a request never left ("When a request never left").
 */
import type { ResultProblem } from "./serialize.js";

/**
 * The message of a thrown value, as text, whatever was thrown: an Error's message, else the value as a
 * string, else its kind (`[object Object]` for an object with no prototype, or whose toString throws).
 */
export function messageOf(value: unknown): string {
  if (value instanceof Error) return value.message;
  try {
    return String(value);
  } catch {
    try {
      return Object.prototype.toString.call(value);
    } catch {
      return "a value that cannot be shown as text";
    }
  }
}

/** Thrown by a tool: the call failed definitively (a card declined). It is recorded and replayed to every repeat. */
export class DefinitiveFailure extends Error {
  override name = "DefinitiveFailure";
  /** JSON data kept with the failure and handed back on replay. */
  readonly data: unknown;
  constructor(cause: unknown, data?: unknown) {
    super(messageOf(cause), { cause });
    this.data = data;
  }
}

/** Thrown by a tool: nothing happened (validation failed before any effect), so the key is released and a retry may run. */
export class NotExecuted extends Error {
  override name = "NotExecuted";
  constructor(cause: unknown) {
    super(messageOf(cause), { cause });
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
  /**
   * Why the failure came back without the data it was declared with: it was too large to store (over
   * `maxResultBytes`, or the store's limit) or had no JSON form. Undefined when nothing was dropped.
   */
  readonly data_not_kept: ResultProblem | undefined;
  /** Present when an operator recorded this failure by hand: who, when, and on what evidence. */
  readonly resolved_by_operator?: OperatorResolution;

  constructor(failure: StoredFailure, calledAt: string, key: string) {
    super(failure.message);
    this.name = failure.name;
    this.code = failure.code;
    this.data = failure.data;
    this.data_not_kept = failure.dataNotKept;
    this.original_called_at = calledAt;
    this.idempotency_key = key;
    if (failure.resolution !== undefined) this.resolved_by_operator = failure.resolution;
  }
}

/**
 * An operator's resolution of a record whose outcome was unknown, as a replay reports it
 * (`resolved_by_operator`): the outcome came from a person, not from the tool's own run.
 */
export interface OperatorResolution {
  /** Who resolved it: the name the operator gave, or their OS user. */
  readonly by: string;
  /** When (ISO-8601). */
  readonly at: string;
  /** What the operator relied on ("the provider's log shows message 0d3f… sent at 10:02"). */
  readonly evidence: string;
}

/**
 * The sentence that says a replayed outcome came from a person who checked, not from the tool's own run
 * ("" when it came from the run).
 */
export function operatorNote(resolution: OperatorResolution | undefined): string {
  if (resolution === undefined) return "";
  // Who and the evidence stay in the envelope's field: they are written for auditors, not for a model.
  return `Its outcome was not reported by the tool itself: an operator recorded it by hand at ${resolution.at}. `;
}

/** The resolution a stored note carries, when it is one: three strings, nothing else is trusted. */
export function operatorResolutionOf(value: unknown): OperatorResolution | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  const { by, at, evidence } = value as Record<string, unknown>;
  if (typeof by !== "string" || typeof at !== "string" || typeof evidence !== "string") return undefined;
  return { by, at, evidence };
}

/** A failure as a store keeps it. */
export interface StoredFailure {
  readonly name: string;
  readonly message: string;
  readonly code?: string | number;
  readonly data?: unknown;
  /** Why the declared data was not stored with the failure (too large, or no JSON form). */
  readonly dataNotKept?: ResultProblem;
  /** Set when an operator recorded the failure by hand. */
  readonly resolution?: OperatorResolution;
}

/**
 * How many `cause` links are followed (fetch puts the code one link down). An error buried deeper is
 * not looked at: the answer is false.
 */
const maxCauseDepth = 8;

/**
 * Name resolution failed (no address, or no answer yet), so no connection was opened. `ENOTFOUND` is
 * Node's name for EAI_NONAME and EAI_NODATA.
 */
const lookupFailures = new Set(["ENOTFOUND", "EAI_AGAIN"]);

/**
 * True only when `error` proves that the request which failed never left this process, so throwing
 * `notExecuted(error)` is safe: `catch (e) { throw neverSent(e) ? notExecuted(e) : e }`. False for
 * everything else, and for anything in doubt: a wrong "never sent" runs the effect twice.
 *
 * True for Node's own errors (node:http, node:net, and fetch, which wraps them as
 * `TypeError("fetch failed", { cause })`), found at the error or down its `cause` chain (the first
 * error on the chain that carries a `code` decides):
 * - `ENOTFOUND` or `EAI_AGAIN` from `getaddrinfo`: the host name did not resolve, nothing was connected to;
 * - `ECONNREFUSED` from `connect`: the connection was refused, so no byte of the request was written
 *   (or Node's own `AggregateError` when each address of the host refused). An error describing several
 *   requests (your own `AggregateError` over two recipients) is false: one of them may have gone out.
 *
 * False, among others, for `ECONNRESET`, `ETIMEDOUT`, `EPIPE`, "socket hang up" and undici's
 * `UND_ERR_SOCKET` (bytes may have left), an HTTP error status (the server had the request), an
 * `AbortError` or `TimeoutError` (fetch rejects with the signal's reason itself, the same object whether
 * it aborted before the request was sent or after its body went out, so the error cannot tell: check
 * `signal.aborted` before you send instead), a code some library copied onto its own error without the
 * `syscall` (axios, node-fetch), and errors of other runtimes' fetch (Deno, Bun, workerd).
 *
 * An error describes one connection attempt, not the whole call: it is proof only when nothing else of
 * this call went out before it. Catch around the one request that makes the effect, and:
 * - stop fetch following redirects (`redirect: "error"` or `"manual"`): a POST answered `303` whose
 *   target does not resolve or refuses fails with this same `ENOTFOUND` or `ECONNREFUSED`, after the
 *   server had the POST;
 * - turn off the client's own retries (`maxRetries: 0` in most SDKs): a retry refused after a first
 *   attempt that went out throws the refusal.
 * @example
 * import { idempotent, memoryStore, neverSent, notExecuted } from "idempotool";
 *
 * const sendSms = idempotent(
 *   async (args: { to: string; text: string }, context) => {
 *     const response = await fetch("https://sms.example/messages", {
 *       method: "POST",
 *       body: JSON.stringify(args),
 *       redirect: "error", // a followed redirect's failure would look like this request's own
 *       signal: context.signal,
 *     }).catch((error: unknown) => {
 *       throw neverSent(error) ? notExecuted(error) : error; // anything else: outcome unknown
 *     });
 *     if (!response.ok) throw new Error(`sms gateway answered ${response.status}`);
 *     return (await response.json()) as { sid: string };
 *   },
 *   { name: "send_sms", store: memoryStore() },
 * );
 */
export function neverSent(error: unknown): boolean {
  try {
    return provesNeverSent(error, 0);
  } catch {
    // A getter or a Proxy that throws while being read proves nothing; a catch block must not throw anew.
    return false;
  }
}

function provesNeverSent(error: unknown, depth: number): boolean {
  if (depth > maxCauseDepth || typeof error !== "object" || error === null) return false;
  const { code, syscall, errors } = error as { code?: unknown; syscall?: unknown; errors?: unknown };
  // The outermost code is the most specific word on what happened: a wrapper's own code is never
  // looked past.
  if (code !== undefined) {
    if (typeof code !== "string") return false;
    if (lookupFailures.has(code)) return syscall === "getaddrinfo";
    if (code === "ECONNREFUSED" && syscall === "connect") return true;
    // Node's own AggregateError when it tried every address of one host (autoSelectFamily) and each
    // refused: the first attempt's code and no syscall. Any other list (a tool's own AggregateError over
    // several requests, one of which may have gone out) proves nothing.
    return (
      code === "ECONNREFUSED" &&
      syscall === undefined &&
      error instanceof AggregateError &&
      Array.isArray(errors) &&
      everyAttemptRefused(errors, depth)
    );
  }
  return "cause" in error && provesNeverSent(error.cause, depth + 1);
}

/** Whether every attempt of Node's AggregateError is a refused connect (a hole in the list is not). */
function everyAttemptRefused(attempts: readonly unknown[], depth: number): boolean {
  if (attempts.length === 0) return false;
  for (let i = 0; i < attempts.length; i++) {
    const attempt = attempts[i] as { code?: unknown; syscall?: unknown } | undefined;
    if (typeof attempt !== "object" || attempt === null || depth + 1 > maxCauseDepth) return false;
    if (attempt.code !== "ECONNREFUSED" || attempt.syscall !== "connect") return false;
  }
  return true;
}
