/**
 * `idempotool/cloudflare`: idempotency records on Cloudflare Durable Objects. `durableObjectStore` keeps
 * them in an object's SQLite storage (`ctx.storage.sql`); `handleStoreCall` lets that object answer store
 * operations over RPC, and `durableObjectStoreClient` sends them there from any Worker or other object, so
 * every caller of one key space meets one object. Imports nothing from Cloudflare at runtime.
 * See docs/integrations/cloudflare.md.
 * @module
 */
export type {
  DurableObjectSqlStorage,
  DurableObjectSqlValue,
  DurableObjectStore,
  DurableObjectStoreOptions,
} from "./durable-object-store.js";
export { durableObjectStore } from "./durable-object-store.js";
export type { StoreAnswer, StoreCall, StoreCallStub, StoreCallTarget, StoreOperation } from "./store-call.js";
export { durableObjectStoreClient, handleStoreCall } from "./store-call.js";
