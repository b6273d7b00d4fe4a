/**
 * What bench/redis-cost.ts and bench/redis-settle-cost.ts share: the options `--redis`, `--lib`, `--compare`
 * and `--reps`, the builds they load, one ioredis client on the Redis of their own, the server's counters
 * read from `INFO`, and the clean-up of the keys a run wrote.
 */
import path from "node:path";
import { fileURLToPath } from "node:url";
import { type ParseArgsOptionsConfig, parseArgs } from "node:util";
import { Redis } from "ioredis";
import { type Library, loadLibrary } from "./library.js";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/** What the server has done so far, from `INFO all`: every counter only ever grows. */
export interface ServerStats {
  /** Its own user + system CPU, µs (networking included). */
  readonly cpuUs: number;
  /** Commands run, those inside scripts included (`INFO commandstats`). */
  readonly commands: number;
  /** Reads from clients' sockets (each a batch of whatever a client wrote since the last). */
  readonly reads: number;
  /** Writes to clients' sockets. */
  readonly writes: number;
  readonly bytesIn: number;
  readonly bytesOut: number;
}

/**
 * Parses the common options beside a tool's own (`own`; `reps` defaults to `repsDefault`), loads `--lib`
 * and `--compare`, and connects to `--redis`. Keys go under `prefix`, which `close()` deletes.
 */
export async function redisCostSetup<T extends ParseArgsOptionsConfig>(
  tool: string,
  own: T,
  repsDefault: string,
) {
  const { values } = parseArgs({
    options: {
      redis: { type: "string", default: "redis://127.0.0.1:6391" },
      lib: { type: "string", default: "dist" },
      compare: { type: "string" },
      reps: { type: "string", default: repsDefault },
      ...own,
    },
  });
  const common = values as { redis: string; lib: string; compare?: string; reps: string };
  const lib: Library = await loadLibrary(path.resolve(root, common.lib));
  const candidate = common.compare ? await loadLibrary(path.resolve(root, common.compare)) : undefined;
  const redis = new Redis(common.redis, { maxRetriesPerRequest: 1 });
  const prefix = `idempotool-${tool}:${process.pid}:`;

  async function serverStats(): Promise<ServerStats> {
    const info = await redis.info("all");
    const field = (name: string) => Number(new RegExp(`${name}:([\\d.]+)`).exec(info)?.[1] ?? Number.NaN);
    let commands = 0;
    for (const [, n] of info.matchAll(/^cmdstat_\S+:calls=(\d+)/gm)) commands += Number(n);
    return {
      cpuUs: (field("used_cpu_user") + field("used_cpu_sys")) * 1e6,
      commands,
      reads: field("total_reads_processed"),
      writes: field("total_writes_processed"),
      bytesIn: field("total_net_input_bytes"),
      bytesOut: field("total_net_output_bytes"),
    };
  }

  return {
    values,
    url: common.redis,
    reps: Number(common.reps),
    lib,
    /** `--lib`'s directory as given. */
    libName: common.lib,
    candidate,
    candidateName: common.compare,
    redis,
    prefix,
    serverStats,
    /** Deletes every key under `prefix` and disconnects the client. */
    async close() {
      let cursor = "0";
      do {
        const [next, names] = await redis.scan(cursor, "MATCH", `${prefix}*`, "COUNT", 1000);
        cursor = next;
        if (names.length > 0) await redis.unlink(...names);
      } while (cursor !== "0");
      redis.disconnect();
    },
  };
}

/** The median of `xs` (the upper one of an even count). */
export const median = (xs: readonly number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
