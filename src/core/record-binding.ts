/**
 * The record a call's sealed values belong to, built only when encryption is configured: the plain path
 * allocates nothing for it.
 */
import type { Call } from "./call.js";
import type { RecordBinding } from "./result-codec.js";
import type { IdempotencyRecord } from "./store.js";

/**
 * What a value sealed or opened by this call is bound to: the call's own scope, key and tool (never what
 * the store says they are), and the fingerprint of the record the call holds or replays, which the call
 * has matched against its arguments (it may be one made under an older fingerprint key).
 */
export function bindingFor<A, R>(c: Call<A, R>, record: IdempotencyRecord): RecordBinding | undefined {
  if (c.o.codec?.encryption === undefined) return undefined;
  return { scope: c.scope, key: c.key, tool: c.o.name, fingerprint: record.fingerprint };
}
