/**
 * The anchors: the libraries a user would pick instead, configured like idempotool as far as they allow —
 * a caller-chosen key, payload validation on where it works, a 24 h window, a 60 s in-progress lease,
 * SHA-256 where the hash is a choice. Each wraps the same counted tool.
 *
 * Powertools 2.35.0 runs WITHOUT payload validation: its CachePersistenceLayer drops the validation hash
 * when a record completes, so with `payloadValidationJmesPath` every replay of a completed key throws
 * IdempotencyValidationError (aws-powertools/powertools-lambda-typescript#5705, fixed by #5706 after 2.35.0).
 * Without it Powertools hashes one value per call instead of two: the comparison leans its way.
 */
import { IdempotencyConfig, makeIdempotent } from "@aws-lambda-powertools/idempotency";
import { CachePersistenceLayer } from "@aws-lambda-powertools/idempotency/cache";
import type { CacheClient } from "@aws-lambda-powertools/idempotency/cache/types";
import { Idempotency } from "@node-idempotency/core";
import { MemoryStorageAdapter } from "@node-idempotency/storage-adapter-memory";
import { RedisStorageAdapter } from "@node-idempotency/storage-adapter-redis";
import type { Redis } from "ioredis";
import {
  type Call,
  type CountedTool,
  countedTool,
  type Subject,
  SubjectName,
  type ToolArgs,
  wrapperSubject,
} from "./subject.js";

const ttlSeconds = 24 * 60 * 60;
const leaseMs = 60_000;

/** The cache client Powertools' CachePersistenceLayer takes (get / set with EX and NX / del), on a Map. */
export function mapCacheClient(): CacheClient {
  const entries = new Map<string, { value: string; expiresAt: number }>();
  const live = (name: string) => {
    const entry = entries.get(name);
    if (entry === undefined) return undefined;
    if (entry.expiresAt <= Date.now()) {
      entries.delete(name);
      return undefined;
    }
    return entry;
  };
  return {
    async get(name) {
      return live(name)?.value ?? null;
    },
    async set(name, value, options) {
      const { EX, NX } = (options ?? {}) as { EX?: number; NX?: boolean };
      const key = String(name);
      if (NX && live(key) !== undefined) return null;
      entries.set(key, {
        value: String(value),
        expiresAt: EX === undefined ? Number.POSITIVE_INFINITY : Date.now() + EX * 1000,
      });
      return "OK";
    },
    async del(keys) {
      let deleted = 0;
      for (const key of keys) if (entries.delete(key)) deleted++;
      return deleted;
    },
  };
}

/** The same cache client on ioredis (Powertools' own examples use @redis/client; the commands are the same). */
export function ioredisCacheClient(redis: Redis): CacheClient {
  return {
    get: (name) => redis.get(name),
    async set(name, value, options) {
      const { EX, NX } = (options ?? {}) as { EX?: number; NX?: boolean };
      const key = String(name);
      const text = String(value);
      if (EX === undefined) return NX ? redis.set(key, text, "NX") : redis.set(key, text);
      return NX ? redis.set(key, text, "EX", EX, "NX") : redis.set(key, text, "EX", EX);
    },
    del: (keys) => redis.del(...keys),
  };
}

function powertoolsCall(
  tool: CountedTool,
  client: CacheClient,
  keyPrefix: string,
  localCache: boolean,
): Call {
  const config = new IdempotencyConfig({
    eventKeyJmesPath: "key",
    expiresAfterSeconds: ttlSeconds,
    hashFunction: "sha256",
    throwOnNoIdempotencyKey: true,
    useLocalCache: localCache,
    maxLocalCacheSize: 10_000,
  });
  // Outside Lambda there is no remaining time; this gives in-progress records the same 60 s lease as idempotool
  // (and keeps Powertools from warning on every call).
  config.registerLambdaContext({ getRemainingTimeInMillis: () => leaseMs } as Parameters<
    IdempotencyConfig["registerLambdaContext"]
  >[0]);
  const wrapped = makeIdempotent(async (payload: { key: string; args: ToolArgs }) => tool.fn(payload.args), {
    persistenceStore: new CachePersistenceLayer({ client }),
    config,
    keyPrefix,
  });
  return (key, args) => wrapped({ key, args });
}

export function powertoolsSubject(options: {
  readonly client: () => CacheClient;
  readonly keyPrefix: string;
  readonly localCache?: boolean;
  /** Start from an empty store before each repetition (the in-memory row). */
  readonly fresh?: boolean;
}): Subject {
  const tool = countedTool();
  const localCache = options.localCache ?? false;
  return wrapperSubject({
    name: localCache ? SubjectName.powertoolsCache : SubjectName.powertools,
    description:
      "@aws-lambda-powertools/idempotency makeIdempotent + CachePersistenceLayer (eventKeyJmesPath 'key', " +
      "no payload validation (broken on this layer in 2.35.0, #5705), sha256, 24 h, 60 s in-progress expiry" +
      `${localCache ? ", useLocalCache" : ""})`,
    tool,
    build: () => powertoolsCall(tool, options.client(), options.keyPrefix, localCache),
    fresh: options.fresh ?? false,
    validatesPayload: false,
  });
}

/** The adapter interface @node-idempotency/core stores through. */
type NodeIdempotencyStorage = ConstructorParameters<typeof Idempotency>[0];

function nodeIdempotencyCall(tool: CountedTool, storage: NodeIdempotencyStorage, prefix: string): Call {
  const idempotency = new Idempotency(storage, {
    cacheKeyPrefix: prefix,
    cacheTTLMS: ttlSeconds * 1000,
    enforceIdempotency: true,
    // Like idempotool, a repeat waits for the in-flight call instead of failing; idempotool's first poll is 10 ms.
    inProgressStrategy: { wait: true, pollingIntervalMs: 10, maxWaitMs: 10_000 },
  });
  return async (key, args) => {
    const request = {
      headers: { "idempotency-key": key },
      path: "/tools/send_email",
      method: "POST",
      body: args,
    };
    const stored = await idempotency.onRequest(request);
    if (stored) return stored.body;
    const result = await tool.fn(args);
    await idempotency.onResponse(request, { body: result });
    return result;
  };
}

export function nodeIdempotencySubject(options: {
  readonly storage: () => NodeIdempotencyStorage;
  readonly prefix: string;
  readonly fresh?: boolean;
}): Subject {
  const tool = countedTool();
  return wrapperSubject({
    name: SubjectName.nodeIdempotency,
    description:
      "@node-idempotency/core Idempotency.onRequest/onResponse (fingerprint = blake2s of JSON body, always checked; " +
      "24 h; in-progress: wait, polling every 10 ms up to 10 s)",
    tool,
    build: () => nodeIdempotencyCall(tool, options.storage(), options.prefix),
    fresh: options.fresh ?? false,
  });
}

export const memoryAnchors = (): Subject[] => [
  powertoolsSubject({ client: mapCacheClient, keyPrefix: "pt", fresh: true }),
  nodeIdempotencySubject({ storage: () => new MemoryStorageAdapter(), prefix: "ni", fresh: true }),
];

/** @node-idempotency's Redis adapter opens its own node-redis v4 client: it takes options, not a client. */
export async function nodeIdempotencyRedis(url: string): Promise<{
  readonly storage: RedisStorageAdapter;
  close(): Promise<void>;
}> {
  const storage = new RedisStorageAdapter({ url });
  await storage.connect();
  return { storage, close: () => storage.disconnect() };
}
