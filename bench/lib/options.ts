import { parseArgs } from "node:util";
import { type BackendName, backendNames } from "./backends/backend.js";
import { Workload } from "./subject.js";

export interface BenchOptions {
  readonly quick: boolean;
  readonly stores: readonly BackendName[];
  readonly workloads: readonly Workload[];
  readonly concurrencies: readonly number[] | undefined;
  readonly reps: number;
  readonly durationMs: number;
  readonly warmupMs: number;
  /** Run the scale part (1 M records; purge) after the table. */
  readonly scale: boolean;
  /** Only the scale part. */
  readonly scaleOnly: boolean;
  readonly scaleRows: number;
  readonly lib: string;
  /** Another build measured beside `lib`, as the "candidate" subject (an experiment). */
  readonly compare: string | undefined;
  readonly out: string;
  readonly write: boolean;
  readonly label: string | undefined;
  readonly redisUrl: string;
  /** ioredis `enableAutoPipelining` on the shared client (node-redis, under @node-idempotency, always pipelines). */
  readonly redisAutoPipelining: boolean;
  readonly pgUrl: string;
}

export const usage = `Usage: npm run bench -- [options]     (or: node --expose-gc --import tsx bench/run.ts [options])

  --quick                  smoke run: 3 short repetitions per cell (~1 min)
  --store LIST             memory,sqlite,postgres,redis,tiered-sqlite,tiered-redis (default: all; "tiered" = both tiered)
  --workload LIST          first,replay,contended (default: all)
  --concurrency LIST       only these concurrencies (default: 1,32; PostgreSQL also 16)
  --reps N                 timed repetitions per cell (default 5; quick 3)
  --duration MS            length of one repetition (default 300; quick 60)
  --warmup MS              warm-up per cell (default 200; quick 30)
  --scale                  also run the scale part: 1 M records in SQLite and PostgreSQL, purge cost
  --scale-only             only the scale part
  --scale-rows N           rows for the large store (default 1000000)
  --lib DIR                the built library to measure (default dist)
  --compare DIR            also measure the build in DIR as "candidate", interleaved with the baseline
  --out DIR                where the JSON goes (default bench/results)
  --no-write               print only
  --label TEXT             recorded in the JSON (e.g. the experiment measured)
  --redis-autopipelining   give the shared ioredis client enableAutoPipelining: true
  --redis URL              default redis://127.0.0.1:6379
  --pg-url URL             default $IDEMPOTOOL_TEST_PG_URL or postgres://postgres@127.0.0.1:5432/test
`;

function list<T extends string>(
  value: string | undefined,
  allowed: readonly T[],
  option: string,
  aliases: Record<string, readonly T[]> = {},
): T[] | undefined {
  if (value === undefined) return undefined;
  return value.split(",").flatMap((raw) => {
    const item = raw.trim();
    if (aliases[item]) return [...aliases[item]];
    if (!(allowed as readonly string[]).includes(item)) {
      throw new Error(`--${option}: unknown "${item}" (one of ${allowed.join(", ")})`);
    }
    return [item as T];
  });
}

function integer(value: string | undefined, option: string, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 1)
    throw new Error(`--${option} must be a positive integer, got ${value}`);
  return n;
}

export function parseOptions(argv: readonly string[]): BenchOptions | "help" {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      quick: { type: "boolean", default: false },
      store: { type: "string" },
      workload: { type: "string" },
      concurrency: { type: "string" },
      reps: { type: "string" },
      duration: { type: "string" },
      warmup: { type: "string" },
      scale: { type: "boolean", default: false },
      "scale-only": { type: "boolean", default: false },
      "scale-rows": { type: "string" },
      lib: { type: "string", default: "dist" },
      compare: { type: "string" },
      out: { type: "string", default: "bench/results" },
      "no-write": { type: "boolean", default: false },
      label: { type: "string" },
      redis: { type: "string", default: "redis://127.0.0.1:6379" },
      "redis-autopipelining": { type: "boolean", default: false },
      "pg-url": {
        type: "string",
        default: process.env.IDEMPOTOOL_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/test",
      },
      help: { type: "boolean", short: "h", default: false },
    },
    strict: true,
  });
  if (values.help) return "help";
  const quick = values.quick;
  const concurrencies = values.concurrency?.split(",").map((c) => integer(c.trim(), "concurrency", 1));
  return {
    quick,
    stores:
      list(values.store, backendNames, "store", { tiered: ["tiered-sqlite", "tiered-redis"] }) ??
      backendNames,
    workloads: list(values.workload, Object.values(Workload), "workload") ?? Object.values(Workload),
    concurrencies,
    reps: integer(values.reps, "reps", quick ? 3 : 5),
    durationMs: integer(values.duration, "duration", quick ? 60 : 300),
    warmupMs: integer(values.warmup, "warmup", quick ? 30 : 200),
    scale: values.scale || values["scale-only"],
    scaleOnly: values["scale-only"],
    scaleRows: integer(values["scale-rows"], "scale-rows", 1_000_000),
    lib: values.lib,
    compare: values.compare,
    out: values.out,
    write: !values["no-write"],
    label: values.label,
    redisUrl: values.redis,
    redisAutoPipelining: values["redis-autopipelining"],
    pgUrl: values["pg-url"],
  };
}
