import { parseArgs } from "node:util";
import { BackendName, backendNames, SqliteDriver, sqliteBackendNames } from "./backends/backend.js";
import { Workload } from "./subject.js";

export interface BenchOptions {
  /** The Node major the run must be on (`--node`): `npm run bench` starts that Node, and the run checks it did. */
  readonly node: number | undefined;
  readonly quick: boolean;
  readonly stores: readonly BackendName[];
  readonly workloads: readonly Workload[];
  readonly concurrencies: readonly number[] | undefined;
  readonly reps: number;
  readonly durationMs: number;
  readonly warmupMs: number;
  /** A forced full GC before each timed repetition (off by default: see docs/benchmarks.md). */
  readonly gcEachRep: boolean;
  /** Run the scale part (1 M records; purge) after the table. */
  readonly scale: boolean;
  /** Only the scale part. */
  readonly scaleOnly: boolean;
  /** Also run the fleet row (several OS processes on Redis and PostgreSQL). */
  readonly fleet: boolean;
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
  readonly mysqlUrl: string;
}

export const usage = `Usage: npm run bench -- [options]
   (or, built and on the Node of your choice:
    scripts/node.sh 24 --with-better-sqlite3 --expose-gc --import tsx bench/run.ts [options])

  --node N                 run on Node N (22 or 24; default 24), installed by scripts/node.sh if missing
  --quick                  smoke run: 3 short repetitions per cell (~1 min)
  --store LIST             memory,sqlite,tiered-sqlite,redis,node-redis,tiered-redis,postgres,mysql,dynamodb (default: all). sqlite and
                           tiered-sqlite run on each driver, a row group each ("sqlite (node:sqlite)",
                           "sqlite (better-sqlite3)", …); node:sqlite or better-sqlite3 picks both groups on
                           that driver; "tiered" = every tiered group
  --workload LIST          first,replay,contended (default: all)
  --concurrency LIST       only these concurrencies (default: 1,32; PostgreSQL and MySQL also 16)
  --reps N                 timed repetitions per cell (default 5; quick 3)
  --duration MS            length of one repetition (default 300; quick 60)
  --warmup MS              warm-up per cell (default 200; quick 30)
  --gc                     a forced full GC before each timed repetition (needs node --expose-gc, as
                           npm run bench gives it); off by default, as a serving process never runs one
  --scale                  also run the scale part: 1 M records in SQLite and PostgreSQL, purge cost
  --scale-only             only the scale part
  --fleet                  also run the fleet row: 4 processes × 32 in flight on Redis (ioredis, node-redis) and PostgreSQL
  --scale-rows N           rows for the large store (default 1000000)
  --lib DIR                the built library to measure (default dist)
  --compare DIR            also measure the build in DIR as "candidate", interleaved with the baseline
  --out DIR                where the JSON goes (default bench/results)
  --no-write               print only
  --label TEXT             recorded in the JSON (e.g. the experiment measured)
  --redis-autopipelining   give the shared ioredis client enableAutoPipelining: true
  --redis URL              default redis://127.0.0.1:6379
  --pg-url URL             default $IDEMPOTOOL_TEST_PG_URL or postgres://postgres@127.0.0.1:5432/test
  --mysql-url URL          default $IDEMPOTOOL_TEST_MYSQL_URL or mysql://root@127.0.0.1:3306/test
`;

/** Names `--store` takes besides the row groups' own: each stands for several groups. */
const storeAliases: Record<string, readonly BackendName[]> = {
  sqlite: Object.values(sqliteBackendNames).map((n) => n.store),
  "tiered-sqlite": Object.values(sqliteBackendNames).map((n) => n.tiered),
  [SqliteDriver.node]: Object.values(sqliteBackendNames[SqliteDriver.node]),
  [SqliteDriver.betterSqlite3]: Object.values(sqliteBackendNames[SqliteDriver.betterSqlite3]),
  tiered: [...Object.values(sqliteBackendNames).map((n) => n.tiered), BackendName.tieredRedis],
  dynamodb: [BackendName.dynamodb],
  "node-redis": [BackendName.redisNodeRedis],
};

function list<T extends string>(
  value: string | undefined,
  allowed: readonly T[],
  option: string,
  aliases: Record<string, readonly T[]> = {},
): T[] | undefined {
  if (value === undefined) return undefined;
  const items = value.split(",").flatMap((raw) => {
    const item = raw.trim();
    if (aliases[item]) return [...aliases[item]];
    if (!(allowed as readonly string[]).includes(item)) {
      const names = [...Object.keys(aliases), ...allowed].map((n) => (n.includes(" ") ? `"${n}"` : n));
      throw new Error(`--${option}: unknown "${item}" (one of ${names.join(", ")})`);
    }
    return [item as T];
  });
  // In the order of `allowed` (the order they run in), each once.
  return allowed.filter((name) => items.includes(name));
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
      node: { type: "string" },
      quick: { type: "boolean", default: false },
      store: { type: "string" },
      workload: { type: "string" },
      concurrency: { type: "string" },
      reps: { type: "string" },
      duration: { type: "string" },
      warmup: { type: "string" },
      gc: { type: "boolean", default: false },
      scale: { type: "boolean", default: false },
      "scale-only": { type: "boolean", default: false },
      fleet: { type: "boolean", default: false },
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
      "mysql-url": {
        type: "string",
        default: process.env.IDEMPOTOOL_TEST_MYSQL_URL ?? "mysql://root@127.0.0.1:3306/test",
      },
      help: { type: "boolean", short: "h", default: false },
    },
    strict: true,
  });
  if (values.help) return "help";
  const quick = values.quick;
  const concurrencies = values.concurrency?.split(",").map((c) => integer(c.trim(), "concurrency", 1));
  return {
    node: values.node === undefined ? undefined : integer(values.node, "node", 0),
    quick,
    stores: list(values.store, backendNames, "store", storeAliases) ?? backendNames,
    workloads: list(values.workload, Object.values(Workload), "workload") ?? Object.values(Workload),
    concurrencies,
    reps: integer(values.reps, "reps", quick ? 3 : 5),
    durationMs: integer(values.duration, "duration", quick ? 60 : 300),
    warmupMs: integer(values.warmup, "warmup", quick ? 30 : 200),
    gcEachRep: values.gc,
    scale: values.scale || values["scale-only"],
    scaleOnly: values["scale-only"],
    fleet: values.fleet,
    scaleRows: integer(values["scale-rows"], "scale-rows", 1_000_000),
    lib: values.lib,
    compare: values.compare,
    out: values.out,
    write: !values["no-write"],
    label: values.label,
    redisUrl: values.redis,
    redisAutoPipelining: values["redis-autopipelining"],
    pgUrl: values["pg-url"],
    mysqlUrl: values["mysql-url"],
  };
}
