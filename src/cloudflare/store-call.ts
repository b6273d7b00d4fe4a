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
 * Whether the stub an error came through may be broken: the error did not come from the object's code
 * (`remote`), or Cloudflare marks it as worth retrying or overloaded ("Network connection lost", an object
 * reset because its code was updated, an object that cannot keep up). Cloudflare asks for a new stub then.
 */
function mayHaveBrokenTheStub(error: unknown): boolean {
  const { remote, retryable, overloaded } = (error ?? {}) as Record<string, unknown>;
  return remote !== true || retryable === true || overloaded === true;
}

/** How the client gets its stub: once, or anew after one broke. */
export type StoreCallStub = StoreCallTarget | (() => StoreCallTarget);

/**
 * A store that sends every operation to the Durable Object that keeps the records, through its stub: how a
 * Worker, or another object (an `McpAgent` session, say), shares one key space with every other caller.
 * Each operation is one RPC call; the records object answers it with {@link handleStoreCall}. Leases are
 * judged by the object's clock (`durableObjectStore`'s default), not the caller's.
 *
 * Give it a function that gets the stub (`() => env.IDEMPOTOOL.getByName("billing")`): the client takes a
 * stub from it at once, and a new one after a call fails in a way that may have broken the stub (a lost
 * connection, an object reset or overloaded; not an error the object's code threw), so a broken connection
 * fails the calls in flight (`store_unavailable`, the tool does not run) and not every call after them.
 * Given a stub itself, the client keeps it, and once its connection breaks every call fails until you make
 * a new client.
 *
 * Calls through one stub reach the object in the order they were sent. A call sent on a stub that then
 * broke may still reach the object after calls sent on the new one: a claim the caller gave up on may
 * arrive after the release the caller sent next. `durableObjectStore` remembers released tokens and
 * refuses such a claim, so it never lands.
 * @example
 * import { idempotent } from "idempotool";
 * import { durableObjectStoreClient, type StoreCallTarget } from "idempotool/cloudflare";
 *
 * declare const env: { IDEMPOTOOL: { getByName(name: string): StoreCallTarget } };
 * // Every caller of the "billing" key space meets one object, so a repeat from anywhere is a replay.
 * const store = durableObjectStoreClient(() => env.IDEMPOTOOL.getByName("billing"));
 * const charge = idempotent(async (args: { cents: number }) => ({ charged: args.cents }), { name: "charge", store });
 */
export function durableObjectStoreClient(stub: StoreCallStub): IdempotencyStore {
  const owner = "durableObjectStoreClient()";
  const described =
    "must be the stub of a Durable Object whose `idempotency(call)` method answers with handleStoreCall, or a function that returns one";
  // A stub is a proxy that has every name, so only the method's type tells; a function without that method
  // is one that gets stubs.
  const isStub = (value: unknown): value is StoreCallTarget =>
    typeof (value as StoreCallTarget | undefined)?.idempotency === "function";
  if (!isStub(stub) && typeof stub !== "function") invalidOption(owner, "stub", described);
  const getStub = isStub(stub) ? undefined : stub;
  const take = (): StoreCallTarget => {
    const taken = getStub === undefined ? (stub as StoreCallTarget) : getStub();
    if (!isStub(taken)) invalidOption(owner, "stub", `${described}; the function returned ${typeof taken}`);
    return taken;
  };
  let current: StoreCallTarget | undefined = take();
  const send = async <Op extends StoreOperation>(
    op: Op,
    args: Parameters<IdempotencyStore[Op]>,
  ): Promise<StoreAnswer<Op>> => {
    const through = current ?? take();
    current = through;
    try {
      return (await through.idempotency({ op, args } as StoreCall)) as StoreAnswer<Op>;
    } catch (error) {
      // Only the stub that broke is dropped: another call may already have taken a new one.
      if (getStub !== undefined && current === through && mayHaveBrokenTheStub(error)) current = undefined;
      throw error;
    }
  };
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
