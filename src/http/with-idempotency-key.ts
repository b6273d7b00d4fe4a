/**
 * Handing the key to an SDK that sends it itself (Stripe, OpenAI, Anthropic and other generated clients
 * take an `idempotencyKey` request option and keep it across their own retries).
 */
import { formatIdempotencyKey, HttpHeader, type KeyFormat } from "./idempotency-key-header.js";

/**
 * Request options carrying `key`, for SDKs that take an `idempotencyKey` option. The key is checked as
 * {@link idempotentFetch} checks it: a missing one throws `idempotency_key_missing`, never becomes a fresh UUID.
 * @example
 * import Stripe from "stripe";
 * import { withIdempotencyKey } from "idempotool/http";
 *
 * const stripe = new Stripe(process.env.STRIPE_SECRET_KEY!, { maxNetworkRetries: 2 });
 * const key = "checkout-7f3a"; // from the agent's state, saved there before the first call
 * await stripe.paymentIntents.create({ amount: 1200, currency: "eur" }, withIdempotencyKey(key));
 */
export function withIdempotencyKey(key: string): { readonly idempotencyKey: string } {
  formatIdempotencyKey(key, "bare");
  return { idempotencyKey: key };
}

/**
 * The `Idempotency-Key` header for `key`, for clients that take headers (axios, ky, got, a raw `fetch`
 * without retries).
 * @example
 * import { idempotencyKeyHeader } from "idempotool/http";
 *
 * await fetch("https://api.example.com/orders", {
 *   method: "POST",
 *   headers: { "Content-Type": "application/json", ...idempotencyKeyHeader("order-42") },
 *   body: JSON.stringify({ sku: "A-1" }),
 * });
 */
export function idempotencyKeyHeader(
  key: string,
  format: KeyFormat = "bare",
): { readonly "Idempotency-Key": string } {
  return { [HttpHeader.idempotencyKey]: formatIdempotencyKey(key, format) };
}
