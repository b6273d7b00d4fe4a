import { IdempotencyError } from "../core/errors.js";
import {
  compareIds,
  decodeListCursor,
  encodeListCursor,
  listLimit,
  listMatches,
  purgeLimit,
} from "../core/list-paging.js";
import { durationOption, invalidOption } from "../core/option-checks.js";
import {
  type ClaimRequest,
  claimedRecord,
  type IdempotencyRecord,
  type IdempotencyStore,
  type ListPage,
  type RecordId,
  RecordStatus,
} from "../core/store.js";
import { type GlideClientLike, glideCommands, glideRefusal, isGlide } from "./glide.js";
import {
  isLegacyMode,
  type NodeRedisLike,
  nodeRedisCommands,
  nodeRedisOf,
  nodeRedisRefusal,
} from "./node-redis.js";
import { encodePart, globLiteral, parseRecordName, recordName, releasedName } from "./record-key.js";
import { claimStub, claimStubLifeMs, readRecord, toRecord } from "./record-value.js";
import { type ScriptClient, scriptRunner } from "./script-runner.js";
import {
  claimScript,
  deleteScript,
  getScript,
  peekScript,
  purgeScript,
  releaseScript,
  renewScript,
  settleScript,
  takeoverScript,
} from "./scripts.js";
import { isUpstash, type UpstashRedisLike, upstashCommands, upstashPrefixRefusal } from "./upstash.js";

/** The part of a Redis client that walks the keyspace: one node's SCAN. */
export interface RedisScanner {
  scan(
    cursor: string,
    matchToken: "MATCH",
    pattern: string,
    countToken: "COUNT",
    count: number,
    typeToken: "TYPE",
    type: "string",
  ): Promise<[cursor: string, elements: string[]]>;
}

/**
 * The part of a Redis client the store uses; an ioredis `Redis` and an ioredis `Cluster` fit. On a
 * standalone client, scripts that callers start in the same tick are written together: its `stream` is
 * corked until the end of the tick (each script stays a command of its own), or without one, `pipeline`.
 */
export interface RedisLike extends RedisScanner, ScriptClient {
  /**
   * Plain `SET key value PX ms NX GET` (Redis 7 or later): a claim in one plain command, without a
   * script, when the store judges by the server's clock. Without it, or on an older Redis, every claim
   * is a script.
   */
  set?(key: string, value: string, px: "PX", ms: number, nx: "NX", get: "GET"): Promise<string | null>;
  /** A cluster client's master nodes: `list` and `purge` scan each of them, since SCAN walks one node. */
  nodes?(role: "master"): readonly RedisScanner[];
}

/**
 * A client {@link redisStore} takes: an ioredis `Redis` or `Cluster` (or any {@link RedisLike}), a
 * node-redis client, an `@upstash/redis` client (Vercel KV's too), or a Valkey GLIDE client.
 */
export type RedisClientLike = RedisLike | NodeRedisLike | UpstashRedisLike | GlideClientLike;

/** Options of {@link redisStore}. */
export interface RedisStoreOptions<C extends RedisClientLike = RedisClientLike> {
  /**
   * Your client, which stays yours: the store configures nothing on it and never closes it. An ioredis
   * `Redis` or `Cluster`, a node-redis client (`createClient()` from `redis`, connected), an
   * `@upstash/redis` `Redis` (over HTTPS, for Workers and edge functions; Vercel KV's client is one), or
   * a Valkey GLIDE `GlideClient` or `GlideClusterClient`. For outages to fail fast rather than queue,
   * give ioredis `maxRetriesPerRequest: 0` (or 1), or `enableOfflineQueue: false` (then wait for its
   * `ready` event before the first call: until then every command fails); give node-redis
   * `disableOfflineQueue: true`. GLIDE fails a command after its own `requestTimeout` (250 ms by
   * default) or the store's deadline, whichever comes first.
   */
  readonly client: C;
  /** Prepended to every record's key name; it ends in `:`. Default `"idempotool:"`. */
  readonly prefix?: string | undefined;
  /**
   * No operation waits longer than this for Redis's reply; past it, it rejects and the caller gets
   * `store_unavailable`. The command may still have been applied. Whole ms from 1 to 2^31 − 1 (what a
   * timer holds); default 5000.
   */
  readonly commandTimeoutMs?: number | undefined;
  /**
   * Which clock judges leases and expiry. `"server"` (default): Redis's `TIME`, read inside each script,
   * so a worker whose clock runs ahead can never take over a live lease; a request's `now` is ignored.
   * `"request"`: the `now` each request carries (the core's clock), for tests with a fake clock.
   */
  readonly clock?: "server" | "request" | undefined;
  /**
   * For tests only: added to the server's clock (a worker whose store sees time further on), so a test
   * can move past a lease without sleeping. Only with clock "server". Default 0.
   */
  readonly clockOffsetMs?: number | (() => number) | undefined;
}

/** An idempotency store on Redis. */
export interface RedisStore<C extends RedisClientLike = RedisLike> extends IdempotencyStore {
  /** The client you gave, typed as you gave it. */
  readonly client: C;
  /** The prefix of every record's key name. */
  readonly prefix: string;
}

const defaultPrefix = "idempotool:";
const defaultCommandTimeoutMs = 5000;
const owner = "redisStore()";
const scanCount = 1000;

/**
 * A store on Redis (or Valkey) for a fleet of workers sharing one dedup state, on an ioredis, node-redis
 * or Valkey GLIDE client, or over HTTPS on an `@upstash/redis` client (Workers, edge functions). Every
 * operation is one command (one round trip; fine on Redis Cluster), judged by the server's clock.
 * @example
 * import { Redis } from "ioredis";
 * import { idempotent } from "idempotool";
 * import { redisStore } from "idempotool/redis";
 *
 * const client = new Redis("redis://127.0.0.1:6379", { maxRetriesPerRequest: 1 });
 * const sendEmail = idempotent(async (args: { to: string }) => ({ sent: args.to }), {
 *   name: "send_email",
 *   store: redisStore({ client, prefix: "agents:idem:" }),
 * });
 * await sendEmail({ to: "alice@example.com" }, { key: "turn-7-alice" });
 */
export function redisStore<C extends RedisClientLike>(options: RedisStoreOptions<C>): RedisStore<C> {
  const { client, prefix, commandTimeoutMs, clock, offsetMs, offsetIsZero, remembersReleases } =
    resolveOptions(options);
  const { run, runPlain, within } = scriptRunner(client, commandTimeoutMs, pipelines(client));
  // A claim is one plain command, SET NX GET, when a key being there means its settled record is live by
  // the clock the store judges by: the server's own, with no offset (the scripts expire a completed or
  // failed record's key the millisecond before its record; one in progress or unknown outlives its
  // record, and goes to the claim script). It writes a stub that the scripts read as its record. Off for
  // good once Redis answers that it does not know the command's form (before 7.0). Off where the store
  // remembers released tokens: a plain command cannot read them.
  let plainClaims =
    clock === "server" && offsetIsZero && !remembersReleases && typeof client.set === "function";

  // ARGV[1] and ARGV[2] of a clocked script: the request's time, or "" and the offset for the server's.
  const clockNow = (now: number): string => {
    if (clock === "server") return "";
    if (!Number.isFinite(now)) throw new TypeError(`redisStore: now must be epoch ms, got ${String(now)}.`);
    return String(now);
  };
  const clockOffset = (): string => (clock === "server" ? String(offsetMs()) : "0");
  const nameOf = (id: RecordId) => recordName(prefix, id.scope, id.key);
  // Over HTTP (an Upstash client) each command is a request of its own, which the client resends after a
  // network error, on another connection, later: a claim the caller gave up on and released may still
  // arrive after its release. The store then remembers the tokens released on each key for a day, beside
  // the record, and a claim or takeover by one of them never lands (see releaseScript). On a connection
  // to Redis, commands arrive in the order they were sent, and the release lands behind the claim.
  const namesOf = (id: RecordId): string | readonly string[] =>
    remembersReleases ? [nameOf(id), releasedName(prefix, id.scope, id.key)] : nameOf(id);

  /** Every key name a pattern matches, node by node, one SCAN page at a time (pages may repeat names). */
  async function* scanNames(pattern: string): AsyncGenerator<string[]> {
    const nodes = client.nodes ? client.nodes("master") : [client];
    if (nodes.length === 0) {
      throw new Error("redisStore: the cluster client knows no master nodes yet (not connected?)");
    }
    for (const node of nodes) {
      let cursor = "0";
      do {
        const [next, names] = await within("scan", () =>
          node.scan(cursor, "MATCH", pattern, "COUNT", scanCount, "TYPE", "string"),
        );
        yield names;
        cursor = next;
      } while (cursor !== "0");
    }
  }

  return {
    client: options.client,
    prefix,

    async claim(request) {
      if (plainClaims && stubFits(request)) {
        const name = nameOf(request);
        try {
          const reply = await runPlain("claim", () =>
            client.set!(name, claimStub(request), "PX", claimStubLifeMs(request), "NX", "GET"),
          );
          // Claimed: the request's time stands in for the server's, which the reply does not carry.
          if (reply === null)
            return { claimed: true, record: claimedRecord(request, request.now), now: request.now };
          const record = readRecord(request.scope, request.key, reply);
          // A settled record that is there is live (its key goes the millisecond before it expires), and
          // replaying it needs no clock: the server's time then was before its key's expiry. Unless the key
          // outlives its record (its expiry lifted or moved by another program, or set by a store on another
          // clock): one the caller's clock already sees expired goes to the script, which judges it by the
          // server's. So does one a caller will cache by the store's clock (exactNow), which the reply lacks.
          if (
            (record?.status === RecordStatus.completed || record?.status === RecordStatus.failed) &&
            record.expiresAt > request.now &&
            request.exactNow !== true
          ) {
            return { claimed: false, record, now: record.expiresAt - 1 };
          }
          // A record in progress or unknown is judged by the server's time, which the script reads; a stub
          // is read as its record there, and anything else is refused there.
        } catch (error) {
          if (!isUnknownSyntax(error)) throw error;
          plainClaims = false;
        }
      }
      const reply = await run(
        claimScript,
        namesOf(request),
        claimScript.argv(request, clockNow(request.now), clockOffset()),
      );
      if (typeof reply === "number")
        return { claimed: true, record: claimedRecord(request, reply), now: reply };
      const [now, value] = Array.isArray(reply) ? (reply as [number, unknown]) : [Number.NaN, reply];
      return { claimed: false, record: toRecord(request.scope, request.key, value), now };
    },

    async takeover(request) {
      const reply = await run(
        takeoverScript,
        namesOf(request),
        takeoverScript.argv(request, clockNow(request.now), clockOffset()),
      );
      return reply === null ? null : toRecord(request.scope, request.key, reply);
    },

    async settle(request) {
      const reply = await run(
        settleScript,
        nameOf(request),
        settleScript.argv(request, clockNow(request.now), clockOffset()),
      );
      // The reply stops before the outcome, which the request holds.
      return reply === null ? null : toRecord(request.scope, request.key, reply, request);
    },

    async renew(request) {
      const argv = renewScript.argv(request, clockNow(request.now), clockOffset());
      return yesOrNo("renew", await run(renewScript, nameOf(request), argv));
    },

    async release(request) {
      return yesOrNo("release", await run(releaseScript, namesOf(request), releaseScript.argv(request)));
    },

    async get(id, now) {
      const reply = await run(getScript, nameOf(id), getScript.argv(undefined, clockNow(now), clockOffset()));
      return reply === null ? undefined : toRecord(id.scope, id.key, reply);
    },

    async delete(id) {
      return yesOrNo("delete", await run(deleteScript, nameOf(id)));
    },

    async list(query) {
      const limit = listLimit("redisStore", query.limit);
      const after = query.cursor === undefined ? undefined : decodeListCursor("redisStore", query.cursor);
      const keyPrefix = query.keyPrefix ?? "";
      // Scope and key prefix live in the name, so SCAN's MATCH narrows by them on the server.
      const pattern =
        globLiteral(prefix) +
        (query.scope === undefined ? "*:" : `${encodePart(query.scope)}:`) +
        `${encodePart(matchablePrefix(keyPrefix))}*`;

      const seen = new Set<string>();
      const candidates: { scope: string; key: string; name: string }[] = [];
      for await (const names of scanNames(pattern)) {
        for (const name of names) {
          if (seen.has(name)) continue;
          seen.add(name);
          const id = parseRecordName(prefix, name);
          if (!id || (query.scope !== undefined && id.scope !== query.scope)) continue;
          if (!id.key.startsWith(keyPrefix) || (after && compareIds(id, after) <= 0)) continue;
          candidates.push({ ...id, name });
        }
      }
      candidates.sort(compareIds);

      // Read records in (scope, key) order only until the page, plus one to tell whether more follow, is full.
      const records: IdempotencyRecord[] = [];
      for (let next = 0; records.length <= limit && next < candidates.length; ) {
        const batch = candidates.slice(next, next + Math.min(256, Math.max(16, limit + 1 - records.length)));
        next += batch.length;
        const replies = await Promise.all(batch.map((id) => run(peekScript, id.name)));
        for (const [i, reply] of replies.entries()) {
          const id = batch[i]!;
          // Gone since the scan, or a value that is not one of our records.
          const record = readRecord(id.scope, id.key, reply);
          if (record && listMatches(record, query) && records.length <= limit) records.push(record);
        }
      }
      if (records.length <= limit) return { records } satisfies ListPage;
      records.length = limit;
      return { records, nextCursor: encodeListCursor(records[limit - 1]!) };
    },

    async purge({ now, limit }) {
      const max = purgeLimit("redisStore", limit);
      // Redis deletes a record itself once the server's clock passes its expiresAt, at a cost in
      // proportion to what expired. Under the server clock nothing expired is left to find, and a scan
      // would cost the whole keyspace to find it.
      if (clock === "server") return { deleted: 0 };
      let deleted = 0;
      for await (const names of scanNames(`${globLiteral(prefix)}*`)) {
        const ours = names.filter((name) => parseRecordName(prefix, name) !== undefined);
        // In batches no larger than what is left to delete, so the limit is never overshot.
        for (let next = 0; next < ours.length && deleted < max; ) {
          const batch = ours.slice(next, next + Math.min(max - deleted, 256));
          next += batch.length;
          const args = purgeScript.argv(undefined, clockNow(now), clockOffset());
          const replies = await Promise.all(batch.map((name) => run(purgeScript, name, args)));
          deleted += replies.filter((reply) => reply === 1).length;
        }
        if (deleted >= max) break;
      }
      return { deleted };
    },
  };
}

function resolveOptions(options: RedisStoreOptions) {
  if (typeof options !== "object" || options === null) invalidOption(owner, "options", "must be an object");
  // A node-redis cluster, sentinel or v5 legacy() client would misread the store's commands: refused.
  // A GLIDE client with compression would store records its scripts cannot read: refused too.
  const refusal = nodeRedisRefusal(options.client) ?? glideRefusal(options.client);
  if (refusal !== undefined) invalidOption(owner, "client", refusal);
  // A node-redis client in legacyMode is driven through its v4 commands; its own are callback-style.
  const nodeRedis = nodeRedisOf(options.client);
  if (nodeRedis === undefined && isLegacyMode(options.client)) {
    invalidOption(
      owner,
      "client",
      "is a node-redis client in legacyMode whose v4 commands cannot be reached",
    );
  }
  const upstash = isUpstash(options.client);
  const client = nodeRedis
    ? nodeRedisCommands(nodeRedis)
    : upstash
      ? upstashCommands(options.client as UpstashRedisLike)
      : isGlide(options.client)
        ? glideCommands(options.client)
        : (options.client as RedisLike);
  for (const method of ["evalsha", "eval", "scan"] as const) {
    if (typeof client?.[method] !== "function") {
      invalidOption(
        owner,
        "client",
        `must be a Redis client such as an ioredis Redis or Cluster, a node-redis client, an @upstash/redis Redis or a Valkey GLIDE client (no ${method}() method)`,
      );
    }
  }
  // SCAN's MATCH ignores an ioredis keyPrefix while script keys get it: list and purge would miss records.
  const clientPrefix = (client as { options?: { keyPrefix?: unknown } }).options?.keyPrefix;
  if (typeof clientPrefix === "string" && clientPrefix !== "") {
    invalidOption(
      owner,
      "client",
      `has keyPrefix ${JSON.stringify(clientPrefix)}; leave it unset and pass { prefix } instead`,
    );
  }
  const prefix = options.prefix ?? defaultPrefix;
  // The parts after it hold no ":", so a prefix that ends in one can never be read as part of another
  // store's names ("app:" and "app:eu:" stay apart; "app" and "app2" would not).
  if (typeof prefix !== "string" || !prefix.endsWith(":")) {
    invalidOption(owner, "prefix", `must be a string ending in ":", got ${JSON.stringify(prefix)}`);
  }
  const prefixRefusal = upstash ? upstashPrefixRefusal(prefix) : undefined;
  if (prefixRefusal !== undefined) invalidOption(owner, "prefix", prefixRefusal);
  const commandTimeoutMs = durationOption(
    owner,
    "commandTimeoutMs",
    options.commandTimeoutMs,
    defaultCommandTimeoutMs,
  );
  const clock = options.clock ?? "server";
  if (clock !== "server" && clock !== "request")
    invalidOption(owner, "clock", 'must be "server" or "request"');
  const offset = options.clockOffsetMs ?? 0;
  if (typeof offset !== "function" && !Number.isSafeInteger(offset)) {
    invalidOption(
      owner,
      "clockOffsetMs",
      `must be an integer (ms) or a function returning one, got ${String(offset)}`,
    );
  }
  if (clock === "request" && options.clockOffsetMs !== undefined) {
    invalidOption(owner, "clockOffsetMs", 'moves the server\'s clock, which clock "request" does not read');
  }
  const offsetMs = (): number => {
    const value = typeof offset === "function" ? offset() : offset;
    if (!Number.isFinite(value)) {
      throw new IdempotencyError("invalid_options", `redisStore: clockOffsetMs returned ${String(value)}.`);
    }
    return Math.round(value);
  };
  return {
    client,
    prefix,
    commandTimeoutMs,
    clock,
    offsetMs,
    offsetIsZero: offset === 0,
    remembersReleases: upstash,
  };
}

/**
 * Whether a request's stub is well formed: whole, non-negative ms, and a key life that is a safe integer
 * (anything else the script claim handles, or refuses).
 */
function stubFits(request: ClaimRequest): boolean {
  const { leaseMs, ttlMs } = request;
  return (
    Number.isSafeInteger(leaseMs) &&
    Number.isSafeInteger(ttlMs) &&
    leaseMs >= 0 &&
    ttlMs >= 0 &&
    Number.isSafeInteger(claimStubLifeMs(request))
  );
}

/** Redis before 7.0 answers SET with both NX and GET (6.2), or with GET at all (older), this way; unapplied. */
function isUnknownSyntax(error: unknown): boolean {
  return error instanceof Error && /^ERR syntax error/i.test(error.message);
}

/**
 * Whether the store batches its own commands: only on a standalone client (a Cluster's commands go to
 * many nodes' connections) that does not already pipeline by itself (ioredis `enableAutoPipelining`).
 */
function pipelines(client: RedisLike): boolean {
  const autoPipelining = (client as { options?: { enableAutoPipelining?: unknown } }).options
    ?.enableAutoPipelining;
  return typeof client.pipeline === "function" && client.nodes === undefined && autoPipelining !== true;
}

/**
 * The part of a key prefix whose encoding prefixes the encoding of every key it starts. A prefix ending
 * in a high surrogate may be the first half of a pair in the key, which is encoded whole: leave it to the
 * exact filter rather than narrow MATCH by it.
 */
function matchablePrefix(keyPrefix: string): string {
  const last = keyPrefix.charCodeAt(keyPrefix.length - 1);
  return last >= 0xd800 && last <= 0xdbff ? keyPrefix.slice(0, -1) : keyPrefix;
}

/**
 * A script's 1 (done) or 0 (not done). Anything else is no answer from Redis (a client that made up a
 * reply, as @upstash/redis does for a request its abort signal stopped): it throws, so the core treats
 * the operation as unanswered rather than as refused.
 */
function yesOrNo(operation: string, reply: unknown): boolean {
  if (reply === 1) return true;
  if (reply === 0) return false;
  throw new Error(
    `redisStore: ${operation} got a reply that is neither 1 nor 0 (${typeof reply}) from the client`,
  );
}
