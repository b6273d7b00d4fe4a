/**
 * What a settle costs Redis: the server's CPU (`INFO cpu`) and commands (`INFO commandstats`) per settle of a
 * call claimed with the plain `SET NX GET`, the second half of every first call, with the claims made
 * beforehand and left out of the count. Builds interleave per repetition, so drift on a shared machine hits
 * each alike. Give it a Redis server of its own (a fresh `redis-server --port 6391 --save ''`): the server's
 * CPU counts everybody's commands.
 *
 *   node --import tsx bench/redis-settle-cost.ts [--redis redis://127.0.0.1:6391] [--lib dist] [--compare DIR]
 *     [--settles 20000] [--in-flight 32] [--reps 5]
 *
 * Prints Markdown: the median of --reps per build, and with --compare the median of the per-repetition
 * ratios of server CPU.
 */
import { randomUUID } from "node:crypto";
import type { Library } from "./lib/library.js";
import { median, redisCostSetup } from "./lib/redis-cost-options.js";

const setup = await redisCostSetup(
  "settle",
  { settles: { type: "string", default: "20000" }, "in-flight": { type: "string", default: "32" } },
  "5",
);
const { values, redis, prefix, reps, serverStats } = setup;
const settles = Number(values.settles);
const inFlight = Number(values["in-flight"]);
const builds: { name: string; lib: Library }[] = [{ name: setup.libName, lib: setup.lib }];
if (setup.candidate) builds.push({ name: setup.candidateName!, lib: setup.candidate });

/** `count` calls of `call(i)`, `inFlight` at once. */
async function drive(count: number, call: (i: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < count) await call(next++);
    }),
  );
}

const result = '{"queued":true,"to":"alice@example.com","messageId":"m-1"}';
const cells = new Map<string, { server: number[]; commands: number[] }>();
for (let rep = 0; rep < reps; rep++) {
  const order = rep % 2 === 0 ? builds : [...builds].reverse();
  for (const [b, { name, lib }] of order.entries()) {
    const store = lib.redis!.redisStore({ client: redis, prefix: `${prefix}${rep}:${b}:` });
    const request = (i: number) => ({
      scope: "",
      key: `k${i}`,
      tool: "send_email",
      fingerprint: "f".repeat(64),
      token: randomUUID(),
      leaseMs: 60_000,
      ttlMs: 86_400_000,
      now: Date.now(),
    });
    const claims = Array.from({ length: settles }, (_, i) => request(i));
    await drive(settles, (i) => store.claim(claims[i]!));
    const before = await serverStats();
    await drive(settles, (i) =>
      store.settle({ ...claims[i]!, status: "completed", result, error: null }).then((record) => {
        if (record === null) throw new Error(`${name}: the settle of ${claims[i]!.key} was refused`);
      }),
    );
    const after = await serverStats();
    const cell = cells.get(name) ?? { server: [], commands: [] };
    cells.set(name, cell);
    cell.server.push((after.cpuUs - before.cpuUs) / settles);
    // INFO itself counts once.
    cell.commands.push((after.commands - before.commands - 1) / settles);
  }
}

process.stdout.write(
  `Redis per settle of a plain claim (${settles} settles, ${inFlight} in flight, median of ${reps}; node ${process.version})\n\n` +
    "| build | server CPU µs | commands |\n|---|---:|---:|\n",
);
for (const [name, cell] of cells) {
  process.stdout.write(
    `| ${name} | ${median(cell.server).toFixed(2)} | ${median(cell.commands).toFixed(2)} |\n`,
  );
}

const [first, second] = [...cells.values()];
if (first && second) {
  // Repetition by repetition (the builds ran back to back), as the bench's ratios are.
  const ratios = first.server.map((us, i) => us / second.server[i]!);
  process.stdout.write(
    `\nserver CPU per settle, ${builds[0]!.name} ÷ ${builds[1]!.name}: median ${median(ratios).toFixed(2)} ` +
      `(range ${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)})\n`,
  );
}

await setup.close();
