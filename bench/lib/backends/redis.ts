import { Redis } from "ioredis";
import { createClient } from "redis4";
import {
  ioredisCacheClient,
  nodeIdempotencyRedis,
  nodeIdempotencySubject,
  powertoolsSubject,
} from "../anchors.js";
import type { Library } from "../library.js";
import {
  AlreadyClaimed,
  countedTool,
  type Subject,
  SubjectName,
  type ToolArgs,
  waitingFlight,
} from "../subject.js";
import { BackendName, type BackendSetup, defaultConcurrencies, Skip } from "./backend.js";
import { idempotoolSubject } from "./memory.js";

const dayMs = 24 * 60 * 60 * 1000;
const leaseMs = 60_000;

/** The two commands a floor sends, on whichever client library. */
interface FloorCommands {
  /** `SET name value PX ms NX|XX`: "OK" when it set the key, null when the condition stopped it. */
  set(name: string, value: string, ms: number, condition: "NX" | "XX"): Promise<string | null>;
  get(name: string): Promise<string | null>;
}

/**
 * The floor on `commands`: a first call is SET NX PX (claim) + SET XX PX (settle), a replay one GET and a
 * `JSON.parse`.
 */
function floorOf(commands: FloorCommands, description: string, prefix: string, fingerprint: string): Subject {
  const tool = countedTool();
  const first = async (key: string, args: ToolArgs) => {
    const name = prefix + key;
    const claimed = await commands.set(
      name,
      `{"status":"in_progress","fingerprint":"${fingerprint}"}`,
      leaseMs,
      "NX",
    );
    if (claimed !== "OK") throw new AlreadyClaimed("redis", key);
    const result = await tool.fn(args);
    await commands.set(name, JSON.stringify({ status: "completed", fingerprint, result }), dayMs, "XX");
    return result;
  };
  const replay = async (key: string) => {
    const text = await commands.get(prefix + key);
    const record =
      text === null
        ? undefined
        : (JSON.parse(text) as { status: string; fingerprint: string; result: unknown });
    if (record?.status !== "completed" || record.fingerprint !== fingerprint) {
      throw new Error(`redis floor: ${key} holds no completed record`);
    }
    return record.result;
  };
  return {
    name: SubjectName.floor,
    description,
    first,
    replay,
    contended: waitingFlight(first, replay),
    validatesPayload: false,
    runs: tool.runs,
  };
}

/** The floor on the same ioredis client ({@link floorOf}'s commands). */
export function redisFloor(redis: Redis, prefix: string, fingerprint: string): Subject {
  return floorOf(
    {
      set: (name, value, ms, condition) =>
        condition === "NX" ? redis.set(name, value, "PX", ms, "NX") : redis.set(name, value, "PX", ms, "XX"),
      get: (name) => redis.get(name),
    },
    "ioredis, same client: SET NX PX (claim) + SET XX PX (settle); replay: GET",
    prefix,
    fingerprint,
  );
}

/** A node-redis 4 client, as `createClient()` from `redis` 4.7.1 makes it. */
type NodeRedis4 = ReturnType<typeof createClient>;

/** The floor on a node-redis 4 client: the same commands as {@link redisFloor}. */
export function nodeRedisFloor(client: NodeRedis4, prefix: string, fingerprint: string): Subject {
  return floorOf(
    {
      set: (name, value, ms, condition) =>
        client.set(name, value, condition === "NX" ? { PX: ms, NX: true } : { PX: ms, XX: true }),
      get: (name) => client.get(name),
    },
    "node-redis 4.7.1, same client: SET NX PX (claim) + SET XX PX (settle); replay: GET",
    prefix,
    fingerprint,
  );
}

/** A connected node-redis 4.7.1 client (the version @node-idempotency's adapter opens) on `url`. */
export async function connectNodeRedis(url: string): Promise<NodeRedis4> {
  const client = createClient({ url });
  // Errors surface on the commands; without a listener an 'error' event would end the process.
  client.on("error", () => {});
  await client.connect();
  return client;
}

export async function redisBackends(
  lib: Library,
  options: {
    readonly url: string;
    readonly prefix: string;
    readonly fingerprint: string;
    readonly autoPipelining: boolean;
  },
  candidate?: Library,
): Promise<BackendSetup> {
  const redis = new Redis(options.url, {
    lazyConnect: true,
    maxRetriesPerRequest: 1,
    enableAutoPipelining: options.autoPipelining,
  });
  try {
    await redis.connect();
  } catch (error) {
    redis.disconnect();
    throw new Skip(`Redis at ${options.url} is not reachable: ${(error as Error).message}`);
  }
  const version = /redis_version:(\S+)/.exec(await redis.info("server"))?.[1] ?? "?";
  const nodeIdempotency = await nodeIdempotencyRedis(options.url);
  const nodeRedis = await connectNodeRedis(options.url);
  const p = options.prefix;
  // The node-redis group: idempotool and the floor on one node-redis 4.7.1 client, beside @node-idempotency
  // on its own client of the same version, so first calls compare on the same client library.
  const nodeRedisSubjects: Subject[] = [];
  const subjects: Subject[] = [];
  const tieredSubjects: Subject[] = [];
  const redisLib = lib.redis;
  if (redisLib) {
    const store = redisLib.redisStore({ client: redis, prefix: `${p}i:` });
    const tiered = lib.core.tieredStore({
      store: redisLib.redisStore({ client: redis, prefix: `${p}t:` }),
      maxEntries: 10_000,
    });
    subjects.push(idempotoolSubject(lib, () => store, "redisStore({ client: ioredis })"));
    const onNodeRedis = redisLib.redisStore({ client: nodeRedis, prefix: `${p}ni4:` });
    nodeRedisSubjects.push(
      idempotoolSubject(lib, () => onNodeRedis, "redisStore({ client: node-redis 4.7.1 })"),
    );
    tieredSubjects.push(idempotoolSubject(lib, () => tiered, "tieredStore({ store: redisStore })"));
  }
  subjects.push(
    redisFloor(redis, `${p}f:`, options.fingerprint),
    powertoolsSubject({ client: () => ioredisCacheClient(redis), keyPrefix: `${p}pt` }),
    nodeIdempotencySubject({ storage: () => nodeIdempotency.storage, prefix: `${p}ni` }),
  );
  const candidateRedis = candidate?.redis;
  if (candidate && candidateRedis) {
    const store = candidateRedis.redisStore({ client: redis, prefix: `${p}ci:` });
    const tiered = candidate.core.tieredStore({
      store: candidateRedis.redisStore({ client: redis, prefix: `${p}ct:` }),
      maxEntries: 10_000,
    });
    const from = `from ${candidate.dir}`;
    const onNodeRedis = candidateRedis.redisStore({ client: nodeRedis, prefix: `${p}cn4:` });
    subjects.push(
      idempotoolSubject(candidate, () => store, `redisStore ${from}`, false, SubjectName.candidate),
    );
    nodeRedisSubjects.push(
      idempotoolSubject(
        candidate,
        () => onNodeRedis,
        `redisStore(node-redis 4.7.1) ${from}`,
        false,
        SubjectName.candidate,
      ),
    );
    tieredSubjects.push(
      idempotoolSubject(
        candidate,
        () => tiered,
        `tieredStore(redisStore) ${from}`,
        false,
        SubjectName.candidate,
      ),
    );
  }
  tieredSubjects.push(
    powertoolsSubject({ client: () => ioredisCacheClient(redis), keyPrefix: `${p}pc`, localCache: true }),
  );
  nodeRedisSubjects.push(
    nodeRedisFloor(nodeRedis, `${p}f4:`, options.fingerprint),
    nodeIdempotencySubject({ storage: () => nodeIdempotency.storage, prefix: `${p}n4` }),
  );
  return {
    backends: [
      {
        name: BackendName.redis,
        family: "redis",
        description: `ioredis 6${options.autoPipelining ? " (enableAutoPipelining)" : ""} (node-idempotency: its adapter's own node-redis 4 client, which pipelines)`,
        concurrencies: defaultConcurrencies,
        subjects,
      },
      {
        name: BackendName.redisNodeRedis,
        family: "redis",
        description:
          "node-redis 4.7.1 (@redis/client 1.6.1) for every subject: idempotool and the floor share one client; @node-idempotency's adapter opens its own of the same version",
        concurrencies: defaultConcurrencies,
        subjects: nodeRedisSubjects,
      },
      {
        name: BackendName.tieredRedis,
        description: "in-process LRU in front of the same Redis: tieredStore vs Powertools useLocalCache",
        concurrencies: defaultConcurrencies,
        subjects: tieredSubjects,
      },
    ],
    info: { redis: version },
    async close() {
      // Everything this run wrote lives under its prefix; other sessions share the server.
      let cursor = "0";
      do {
        const [next, names] = await redis.scan(cursor, "MATCH", `${p}*`, "COUNT", 1000);
        cursor = next;
        if (names.length > 0) await redis.unlink(...names);
      } while (cursor !== "0");
      await nodeIdempotency.close();
      await nodeRedis.quit();
      redis.disconnect();
    },
  };
}
