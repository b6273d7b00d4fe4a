/**
 * Whether an error proves that a request never left this process, so a tool may say "nothing happened"
 * with `notExecuted` (docs/concepts.md, "When a request never left").
 */

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
 *   (or an `AggregateError` whose every attempt is one of these: Node tried each address of the host).
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
  // Node's AggregateError when it tried every address of a host (its code is the first attempt's).
  if (Array.isArray(errors)) {
    return errors.length > 0 && errors.every((attempt) => provesNeverSent(attempt, depth + 1));
  }
  // The outermost code is the most specific word on what happened: a wrapper's own code is never
  // looked past.
  if (code !== undefined) {
    if (typeof code !== "string") return false;
    if (lookupFailures.has(code)) return syscall === "getaddrinfo";
    return code === "ECONNREFUSED" && syscall === "connect";
  }
  return "cause" in error && provesNeverSent(error.cause, depth + 1);
}
