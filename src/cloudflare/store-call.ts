import { invalidOption } from "../core/option-checks.js";
import type { IdempotencyStore } from "../core/store.js";

/** The store operations one call can carry: every method of the contract but `close`. */
const storeOperations = [
  "claim",
  "takeover",
  "settle",
  "renew",
  "release",
  "get",
  "delete",
  "list",
  "purge",
] as const;
export type StoreOperation = (typeof storeOperations)[number];

/**
 * One store operation and its arguments, as a caller sends it to the Durable Object that keeps the records.
 * Plain data (strings, numbers, null, undefined), so Workers RPC carries it as it is.
 */
export type StoreCall = {
  [Op in StoreOperation]: { readonly op: Op; readonly args: Parameters<IdempotencyStore[Op]> };
}[StoreOperation];

/** What {@link handleStoreCall} answers for a call of `Op`. */
export type StoreAnswer<Op extends StoreOperation = StoreOperation> = Awaited<
  ReturnType<IdempotencyStore[Op]>
>;

/**
 * The part of a Durable Object stub the client uses: the one RPC method your records object exposes, which
 * hands each call to {@link handleStoreCall}.
 */
export interface StoreCallTarget {
  idempotency(call: StoreCall): Promise<unknown>;
}

/**
 * Runs one {@link StoreCall} on `store`: the body of the RPC method of the Durable Object that keeps the
 * records. Rejects a call that names no store operation.
 * @example
 * import { DurableObject } from "cloudflare:workers";
 * import { durableObjectStore, handleStoreCall, type StoreCall } from "idempotool/cloudflare";
 *
 * export class IdempotencyRecords extends DurableObject {
 *   readonly store = durableObjectStore({ storage: this.ctx.storage });
 *   idempotency(call: StoreCall) {
 *     return handleStoreCall(this.store, call);
 *   }
 * }
 */
export function handleStoreCall(store: IdempotencyStore, call: StoreCall): Promise<StoreAnswer> {
  const op: unknown = call?.op;
  if (!(storeOperations as readonly unknown[]).includes(op) || !Array.isArray(call.args)) {
    return Promise.reject(
      new TypeError(
        `handleStoreCall: ${JSON.stringify(op)} is not a store operation (${storeOperations.join(", ")}).`,
      ),
    );
  }
  const method = store[call.op] as (...args: unknown[]) => Promise<StoreAnswer>;
  return method.apply(store, call.args);
}

/**
 * A store that sends every operation to the Durable Object that keeps the records, through its stub: how a
 * Worker, or another object (an `McpAgent` session, say), shares one key space with every other caller.
 * Each operation is one RPC call; the records object answers it with {@link handleStoreCall}. Leases are
 * judged by the object's clock (`durableObjectStore`'s default), not the caller's.
 *
 * Give it one stub and keep the store: calls through one stub reach the object in the order they were sent.
 * @example
 * import { idempotent } from "idempotool";
 * import { durableObjectStoreClient, type StoreCallTarget } from "idempotool/cloudflare";
 *
 * declare const env: { IDEMPOTOOL: { getByName(name: string): StoreCallTarget } };
 * // Every caller of the "billing" key space meets one object, so a repeat from anywhere is a replay.
 * const store = durableObjectStoreClient(env.IDEMPOTOOL.getByName("billing"));
 * const charge = idempotent(async (args: { cents: number }) => ({ charged: args.cents }), { name: "charge", store });
 */
export function durableObjectStoreClient(stub: StoreCallTarget): IdempotencyStore {
  // A stub is a proxy that has every name, so only the method's type tells.
  if (typeof stub?.idempotency !== "function") {
    invalidOption(
      "durableObjectStoreClient()",
      "stub",
      "must be the stub of a Durable Object whose `idempotency(call)` method answers with handleStoreCall",
    );
  }
  const send = <Op extends StoreOperation>(op: Op, args: Parameters<IdempotencyStore[Op]>) =>
    stub.idempotency({ op, args } as StoreCall) as Promise<StoreAnswer<Op>>;
  return {
    claim: (...args) => send("claim", args),
    takeover: (...args) => send("takeover", args),
    settle: (...args) => send("settle", args),
    renew: (...args) => send("renew", args),
    release: (...args) => send("release", args),
    get: (...args) => send("get", args),
    delete: (...args) => send("delete", args),
    list: (...args) => send("list", args),
    purge: (...args) => send("purge", args),
  };
}
