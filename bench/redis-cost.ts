/**
 * What a call costs on Redis, split between the client and the server: this process's CPU per call
 * (`process.cpuUsage`) and the Redis server's (`INFO cpu`, its own user + system time, networking
 * included), with commands per call and calls/s. On a machine where client and server share the cores,
 * these two decide the throughput, not the round trip. Give it a Redis server of its own (a fresh
 * `redis-server --port 6391`): the server's CPU counts everybody's commands.
 *
 *   node --import tsx bench/redis-cost.ts [--redis redis://127.0.0.1:6391] [--lib dist] [--compare DIR]
 *     [--workload first,replay,contended] [--concurrency 1,32] [--calls 20000] [--reps 3] [--node-redis 4,6]
 *     [--subjects NAME,…] [--counts [--hooks]]
 *
 * Subjects: idempotool (--lib) on ioredis, candidate (--compare), each again on node-redis clients of the
 * majors --node-redis names (default 4: 4.7.1, the version @node-idempotency's adapter opens; 6: the `redis`
 * devDependency; "" for none), the floor (SET NX PX + SET XX PX; GET) on ioredis, and @node-idempotency's
 * Redis adapter. Prints Markdown, the median of --reps runs per cell. --counts adds a table of what a call
 * costs in turns of the event loop, system calls and the server's socket reads (where a call waits rather
 * than computes); --hooks adds the timers, immediates and nextTicks it creates (the hook costs CPU of its own).
 */
import { createHook } from "node:async_hooks";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { createClient } from "redis";
import { createClient as createClient4 } from "redis4";
import { nodeIdempotencyRedis, nodeIdempotencySubject } from "./lib/anchors.js";
import { idempotoolSubject } from "./lib/backends/memory.js";
import { redisFloor } from "./lib/backends/redis.js";
import { median, redisCostSetup } from "./lib/redis-cost-options.js";
import { type Subject, SubjectName, toolArgs } from "./lib/subject.js";

const setup = await redisCostSetup(
  "cost",
  {
    workload: { type: "string", default: "first,replay,contended" },
    concurrency: { type: "string", default: "1,32" },
    calls: { type: "string", default: "20000" },
    subjects: { type: "string" },
    "node-redis": { type: "string", default: "4" },
    counts: { type: "boolean", default: false },
    hooks: { type: "boolean", default: false },
  },
  "3",
);
const { values, redis, prefix, lib, candidate, reps, serverStats } = setup;
const calls = Number(values.calls);
const workloads = (values.workload as string).split(",") as ("first" | "replay" | "contended")[];
const concurrencies = (values.concurrency as string).split(",").map(Number);
const nodeIdempotency = await nodeIdempotencyRedis(setup.url);
const fingerprint = lib.core.sha256Hex(lib.core.canonicalJson(toolArgs));

const subjects: Subject[] = [];
const idem = lib.redis!.redisStore({ client: redis, prefix: `${prefix}i:` });
subjects.push(idempotoolSubject(lib, () => idem, "redisStore"));
if (candidate) {
  const store = candidate.redis!.redisStore({ client: redis, prefix: `${prefix}c:` });
  subjects.push(idempotoolSubject(candidate, () => store, "candidate", false, SubjectName.candidate));
}
// idempotool again on node-redis clients (createClient()): version 4 is the one @node-idempotency's adapter uses.
const nodeRedisClients: { quit(): Promise<unknown> }[] = [];
for (const major of (values["node-redis"] as string).split(",").filter(Boolean)) {
  const client =
    major === "4"
      ? createClient4({ url: setup.url })
      : major === "6"
        ? createClient({ url: setup.url })
        : undefined;
  if (!client) throw new Error(`--node-redis: 4 or 6, got ${major}`);
  await client.connect();
  nodeRedisClients.push(client);
  const store = lib.redis!.redisStore({ client, prefix: `${prefix}n${major}:` });
  subjects.push({
    ...idempotoolSubject(lib, () => store, `redisStore({ client: node-redis ${major} })`),
    name: `idempotool (node-redis ${major})` as SubjectName,
  });
  if (candidate) {
    const other = candidate.redis!.redisStore({ client, prefix: `${prefix}c${major}:` });
    subjects.push({
      ...idempotoolSubject(
        candidate,
        () => other,
        `candidate on node-redis ${major}`,
        false,
        SubjectName.candidate,
      ),
      name: `candidate (node-redis ${major})` as SubjectName,
    });
  }
}
subjects.push(redisFloor(redis, `${prefix}f:`, fingerprint));
subjects.push(nodeIdempotencySubject({ storage: () => nodeIdempotency.storage, prefix: `${prefix}n` }));
const chosen = (values.subjects as string | undefined)?.split(",");
const measured = chosen ? subjects.filter((s) => chosen.includes(s.name)) : subjects;

/** This process's turns of the event loop and read and write system calls so far (--counts). */
function clientCounts() {
  const io = readFileSync("/proc/self/io", "utf8");
  const field = (name: string) => Number(new RegExp(`${name}: (\\d+)`).exec(io)?.[1] ?? Number.NaN);
  const { loopCount, events } = performance.nodeTiming.uvMetricsInfo;
  return { turns: loopCount, events, syscr: field("syscr"), syscw: field("syscw") };
}
// Timers, immediates and nextTicks created (--hooks: the hook itself costs CPU, so it is off by default).
const created = { Timeout: 0, Immediate: 0, TickObject: 0 };
if (values.hooks) {
  createHook({
    init(_id, type) {
      if (type in created) created[type as keyof typeof created]++;
    },
  }).enable();
}

let round = 0;
/** `count` calls of `workload` on `subject`, `concurrency` in flight. */
async function drive(subject: Subject, workload: string, concurrency: number, count: number) {
  const tag = `${round++}`;
  if (workload === "replay") await subject.first(`r${tag}`, toolArgs);
  let next = 0;
  let refused = 0;
  const worker = async () => {
    while (next < count) {
      const i = next++;
      if (workload === "first") await subject.first(`f${tag}-${i}`, toolArgs);
      else if (workload === "replay") await subject.replay(`r${tag}`, toolArgs);
      else {
        // Groups of `concurrency` callers on one fresh key. A caller that comes after the group's flight
        // ended finds the key claimed: the floor refuses it (it has no record to wait on), as do anchors
        // that refuse a key in flight. That is counted, not fatal.
        try {
          await subject.contended(`c${tag}-${Math.floor(i / concurrency)}`, toolArgs);
        } catch {
          refused++;
        }
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return refused;
}

const versionOf = (name: string) =>
  (createRequire(import.meta.url)(`${name}/package.json`) as { version: string }).version;
process.stdout.write(
  `Cost per call on Redis (${calls} calls per rep, median of ${reps}; node ${process.version}; ` +
    `node-redis 4 is ${versionOf("redis4")} (@node-idempotency's adapter: ${versionOf("@node-idempotency/storage-adapter-redis/node_modules/redis")}), ` +
    `node-redis 6 is ${versionOf("redis")}, ioredis ${versionOf("ioredis")})\n\n` +
    "| workload | in flight | subject | client CPU µs | server CPU µs | commands | calls/s | refused |\n" +
    "|---|---:|---|---:|---:|---:|---:|---:|\n",
);
/** Per call: the figures of the main table, then --counts' (each a list, one per repetition). */
type Cell = Record<string, number[]>;
const countsTable: string[] = [];
const ratios: string[] = [];
for (const workload of workloads) {
  for (const concurrency of concurrencies) {
    const cells = new Map<string, Cell>();
    for (let rep = 0; rep < reps; rep++) {
      // Every other repetition in reverse, so that drift on a shared machine hits each subject alike.
      for (const subject of rep % 2 === 0 ? measured : [...measured].reverse()) {
        await drive(subject, workload, concurrency, Math.min(calls, 3000));
        const before = await serverStats();
        const counts = values.counts ? clientCounts() : undefined;
        const made = { ...created };
        const elu = performance.eventLoopUtilization();
        const cpu = process.cpuUsage();
        const start = performance.now();
        const refused = await drive(subject, workload, concurrency, calls);
        const seconds = (performance.now() - start) / 1000;
        const used = process.cpuUsage(cpu);
        const busy = performance.eventLoopUtilization(elu);
        const countsAfter = values.counts ? clientCounts() : undefined;
        const after = await serverStats();
        const cell = cells.get(subject.name) ?? {};
        cells.set(subject.name, cell);
        const add = (name: string, value: number) => {
          cell[name] ??= [];
          cell[name].push(value);
        };
        add("client", (used.user + used.system) / calls);
        add("server", (after.cpuUs - before.cpuUs) / calls);
        // INFO itself counts once.
        add("commands", (after.commands - before.commands - 1) / calls);
        add("rate", calls / seconds);
        add("refused", refused);
        if (counts && countsAfter) {
          add("turns", (countsAfter.turns - counts.turns) / calls);
          add("events", (countsAfter.events - counts.events) / calls);
          add("syscw", (countsAfter.syscw - counts.syscw) / calls);
          add("syscr", (countsAfter.syscr - counts.syscr) / calls);
          // The INFO before was read and answered inside the window.
          add("serverReads", (after.reads - before.reads - 1) / calls);
          add("bytesIn", (after.bytesIn - before.bytesIn) / calls);
          add("idle", (busy.idle * 1000) / calls);
          add("timers", (created.Timeout - made.Timeout) / calls);
          add("immediates", (created.Immediate - made.Immediate) / calls);
          add("ticks", (created.TickObject - made.TickObject) / calls);
        }
      }
    }
    // With --compare: each build over the candidate, repetition by repetition (they ran back to back).
    for (const [name, cell] of cells) {
      const other = cells.get(name.replace(/^idempotool/, SubjectName.candidate));
      if (!name.startsWith("idempotool") || !other) continue;
      const ratio = (field: string) =>
        median(cell[field]!.map((value, i) => value / other[field]![i]!)).toFixed(2);
      ratios.push(
        `| ${workload} | ${concurrency} | ${name.replace(/^idempotool ?/, "") || "ioredis"} | ${ratio("rate")} | ${ratio("client")} | ${ratio("server")} |`,
      );
    }
    for (const [name, cell] of cells) {
      const m = (field: string, digits: number) => median(cell[field]!).toFixed(digits);
      process.stdout.write(
        `| ${workload} | ${concurrency} | ${name} | ${m("client", 1)} | ${m("server", 1)} | ${m("commands", 2)} | ${m("rate", 0)} | ${m("refused", 0)} |\n`,
      );
      if (values.counts) {
        const hooked = values.hooks
          ? `${m("timers", 2)} | ${m("immediates", 2)} | ${m("ticks", 2)}`
          : "– | – | –";
        countsTable.push(
          `| ${workload} | ${concurrency} | ${name} | ${m("turns", 3)} | ${m("events", 3)} | ${m("syscw", 3)} | ${m("syscr", 3)} | ${m("serverReads", 3)} | ${m("bytesIn", 0)} | ${m("idle", 1)} | ${hooked} |`,
        );
      }
    }
  }
}
if (ratios.length > 0) {
  process.stdout.write(
    `\n${setup.libName} over ${setup.candidateName}, the median of per-repetition ratios\n\n` +
      "| workload | in flight | client library | calls/s | client CPU | server CPU |\n|---|---:|---|---:|---:|---:|\n" +
      `${ratios.join("\n")}\n`,
  );
}
if (values.counts) {
  process.stdout.write(
    "\nPer call (--counts): this process's event-loop turns and I/O events (libuv's metrics), write and read system calls " +
      "(/proc/self/io), the server's reads from client sockets and bytes in, the event loop's idle µs, and with --hooks the timers, " +
      "immediates and nextTicks created\n\n" +
      "| workload | in flight | subject | loop turns | I/O events | client writes | client reads | server reads | bytes in | idle µs | timers | immediates | nextTicks |\n" +
      "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n" +
      `${countsTable.join("\n")}\n`,
  );
}

await nodeIdempotency.close();
for (const client of nodeRedisClients) await client.quit();
await setup.close();
