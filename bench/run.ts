/**
 * `npm run bench`: idempotool on every store beside the floor (the raw store operations the design needs, on
 * the same client) and beside the libraries users would pick instead, in one run. Prints a Markdown table
 * with ratios and the speed targets (PASS/MISS) on stdout, progress on stderr, and writes the JSON to
 * bench/results/<timestamp>.json. It measures the BUILT library (dist/, or --lib), not the TypeScript source.
 *
 *   npm run bench -- --quick                      a smoke run
 *   npm run bench -- --node 22                    on Node 22 (default 24; scripts/bench.sh starts it)
 *   npm run bench -- --store memory,sqlite --workload replay
 *   npm run bench -- --scale                      also 1 M records and purge cost (slow: minutes)
 */
import { mkdirSync, renameSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import {
  type Backend,
  type BackendName,
  type BackendSetup,
  backendNames,
  Skip,
  SqliteDriver,
  sqliteBackendNames,
} from "./lib/backends/backend.js";
import { dynamoBackends } from "./lib/backends/dynamodb.js";
import { memoryBackend } from "./lib/backends/memory.js";
import { mysqlBackends } from "./lib/backends/mysql.js";
import { postgresBackends } from "./lib/backends/postgres.js";
import { redisBackends } from "./lib/backends/redis.js";
import { sqliteBackends } from "./lib/backends/sqlite.js";
import { type FleetCell, fleetTable, runFleet } from "./lib/fleet.js";
import { loadLibrary } from "./lib/library.js";
import { machine } from "./lib/machine.js";
import { type BenchOptions, parseOptions, usage } from "./lib/options.js";
import { progress } from "./lib/progress.js";
import { driversTable, resultsTable, type SkippedRow, targetsTable } from "./lib/report.js";
import {
  type Cell,
  keyMaker,
  plannedSteps,
  runBackends,
  type SanityResult,
  sanityCheck,
  summarize,
} from "./lib/runner.js";
import { runScale, type ScaleResult, scaleTable } from "./lib/scale.js";
import { toolArgs } from "./lib/subject.js";
import { evaluateTargets } from "./lib/targets.js";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

async function main(): Promise<number> {
  const parsed = parseOptions(process.argv.slice(2));
  if (parsed === "help") {
    process.stdout.write(usage);
    return 0;
  }
  const options: BenchOptions = parsed;
  const nodeMajor = Number(process.versions.node.split(".")[0]);
  if (options.node !== undefined && options.node !== nodeMajor) {
    throw new Error(
      `--node ${options.node}, but this is Node ${process.version}: npm run bench starts the Node it names ` +
        `(or run scripts/node.sh ${options.node} --with-better-sqlite3 --expose-gc --import tsx bench/run.ts)`,
    );
  }
  if (options.gcEachRep && typeof (globalThis as { gc?: unknown }).gc !== "function") {
    throw new Error("--gc needs node --expose-gc (npm run bench gives it)");
  }
  // tsx turns source maps on for the bench's own TypeScript; the measured library is plain JS, and no
  // stack trace it (or an anchor) builds should pay for source-map lookups.
  process.setSourceMapsEnabled(false);
  const p = progress();
  const lib = await loadLibrary(path.resolve(root, options.lib));
  const candidate =
    options.compare === undefined ? undefined : await loadLibrary(path.resolve(root, options.compare));
  const startedAt = new Date();
  const tag = `b${startedAt.getTime().toString(36)}`;
  const nextKey = keyMaker(tag);
  const host = machine(root);
  const fingerprint = lib.core.fingerprint(toolArgs);
  p.note(
    `idempotool bench (${lib.dir}) · node ${host.node} · ${host.cpu} × ${host.cores} · load ${host.loadAverage.join(" ")}`,
  );

  const wanted = (name: BackendName) => options.stores.includes(name);
  const skipped: SkippedRow[] = [];
  const setups: BackendSetup[] = [];
  const info: Record<string, string> = {};
  const skipAll = (backends: BackendName[], reason: string) => {
    for (const backend of backends.filter(wanted)) skipped.push({ backend, subject: "all", reason });
    p.note(`skipped ${backends.filter(wanted).join(", ")}: ${reason}`);
  };
  const attempt = async (backends: BackendName[], setup: () => BackendSetup | Promise<BackendSetup>) => {
    if (!backends.some(wanted)) return;
    try {
      const s = await setup();
      setups.push(s);
      Object.assign(info, s.info);
    } catch (error) {
      if (!(error instanceof Skip)) throw error;
      skipAll(backends, error.message);
    }
  };
  for (const [store, backends] of [
    ["postgres", ["postgres"]],
    ["mysql", ["mysql"]],
    ["redis", ["redis", "redis (node-redis 4)", "tiered-redis"]],
    ["dynamodb", ["dynamodb (dynalite)"]],
  ] as const) {
    const reason = lib.missing[store];
    if (reason === undefined) continue;
    for (const backend of backends.filter(wanted)) skipped.push({ backend, subject: "idempotool", reason });
    p.note(`idempotool on ${backends.join(" and ")}: skipped, ${reason}; the other rows still run`);
  }

  const cells: Cell[] = [];
  const sanity: SanityResult[] = [];
  let scale: ScaleResult | undefined;
  const notes: string[] = [];
  const settings = {
    reps: options.reps,
    durationMs: options.durationMs,
    warmupMs: options.warmupMs,
    gcEachRep: options.gcEachRep,
    workloads: options.workloads,
    concurrencies: options.concurrencies,
  };
  try {
    if (!options.scaleOnly) {
      await attempt(["memory"], () => memoryBackend(lib, candidate));
      for (const driver of Object.values(SqliteDriver)) {
        const file = path.join(root, "bench", "tmp", `${tag}-${driver.replace(/\W/g, "-")}.db`);
        await attempt(Object.values(sqliteBackendNames[driver]), () =>
          sqliteBackends(lib, driver, file, fingerprint, candidate),
        );
      }
      await attempt(["redis", "redis (node-redis 4)", "tiered-redis"], () =>
        redisBackends(
          lib,
          {
            url: options.redisUrl,
            prefix: `ib:${tag}:`,
            fingerprint,
            autoPipelining: options.redisAutoPipelining,
          },
          candidate,
        ),
      );
      await attempt(["postgres"], () =>
        postgresBackends(lib, { url: options.pgUrl, tag, fingerprint }, candidate),
      );
      await attempt(["mysql"], () => mysqlBackends(lib, { url: options.mysqlUrl, tag, fingerprint }));
      await attempt(["dynamodb (dynalite)"], () => dynamoBackends(lib, candidate));
      // In the order of backendNames, so the SQLite groups of both drivers run (and print) side by side.
      const backends: Backend[] = setups
        .flatMap((s) => s.backends)
        .filter((b) => wanted(b.name))
        .sort((a, b) => backendNames.indexOf(a.name) - backendNames.indexOf(b.name));

      for (const backend of backends) {
        for (const subject of backend.subjects) {
          const result = await sanityCheck(backend, subject, nextKey);
          sanity.push(result);
          if (!result.ok)
            p.note(`SANITY FAILED ${backend.name} ${subject.name}: ${result.checks.join("; ")}`);
        }
      }
      p.note(`sanity: ${sanity.filter((s) => s.ok).length}/${sanity.length} subjects dedupe as they must`);
      // A family (the same store on each SQLite driver) runs as one interleaved batch.
      const batches: Backend[][] = [];
      for (const backend of backends) {
        const last = batches.at(-1);
        if (backend.family !== undefined && last?.[0]?.family === backend.family) last.push(backend);
        else batches.push([backend]);
      }
      for (const batch of batches) p.plan(plannedSteps(batch, settings));
      for (const batch of batches) cells.push(...(await runBackends(batch, settings, nextKey, p)));
      for (const setup of setups) {
        if (setup.notes && setup.backends.some((b) => wanted(b.name)))
          notes.push(...(await setup.notes(nextKey)), "");
      }
    }
  } finally {
    for (const setup of setups)
      await setup.close().catch((error: unknown) => p.note(`cleanup: ${String(error)}`));
  }
  if (options.scale) {
    scale = await runScale(lib, {
      rows: options.scaleRows,
      quick: options.quick,
      file: path.join(root, "bench", "tmp", `${tag}-scale.db`),
      pgUrl: options.pgUrl,
      tag,
      progress: p,
    });
  }
  const fleetOptions = { processes: 4, inFlight: 32 };
  let fleet: FleetCell[] | undefined;
  if (options.fleet) {
    fleet = await runFleet({
      lib,
      ...fleetOptions,
      callersPerKey: 8,
      warmupMs: 1000,
      durationMs: options.durationMs * 4,
      reps: options.reps,
      tag,
      fingerprint,
      redisUrl: options.redisUrl,
      pgUrl: options.pgUrl,
      backends: ["redis", "redis (node-redis 4)", "postgres"],
      workloads: ["first", "contended"],
      note: (text) => p.note(text),
    });
  }
  p.done();

  const targets = evaluateTargets(cells);
  const candidateTargets = candidate ? evaluateTargets(cells, "candidate") : undefined;
  const finishedAt = new Date();
  const command = `node ${process.execArgv.join(" ")} bench/run.ts ${process.argv.slice(2).join(" ")}`
    .replace(/\s+/g, " ")
    .trim();
  const lines = [
    `# idempotool bench — ${startedAt.toISOString()}`,
    "",
    `command: ${command}`,
    `library: ${path.relative(root, lib.dir) || "."} (built JavaScript) · node ${host.node} · ${host.cpu} × ${host.cores} cores · ${host.platform}`,
    `load average: ${host.loadAverage.join(" ")} at start, ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(
        " ",
      )} at end · ${options.reps} reps × ${options.durationMs} ms after ${options.warmupMs} ms warm-up; medians`,
    `servers: ${
      Object.entries(info)
        .map(([k, v]) => `${k} ${v}`)
        .join(" · ") || "—"
    }`,
    "",
  ];
  if (!options.scaleOnly) {
    lines.push(
      "`idempotool ÷ row`: idempotool's ops/s over that row's, the median of per-repetition ratios (ABAB interleaved).",
      "",
      resultsTable(cells, skipped),
      "",
      targetsTable(targets),
      "",
    );
    const drivers = driversTable(cells);
    if (drivers) {
      lines.push(
        "The same SQLite rows on both drivers, interleaved: node:sqlite's figure over better-sqlite3's (above 1,",
        "node:sqlite is faster), the median of per-repetition ratios; CPU µs/call is a ratio of medians.",
        "",
        drivers,
        "",
      );
    }
    if (candidateTargets) {
      lines.push(
        `The same targets for the candidate (${path.relative(root, candidate?.dir ?? "")}):`,
        "",
        targetsTable(candidateTargets),
        "",
      );
    }
  }
  if (notes.length > 0) lines.push(...notes);
  if (scale) lines.push(scaleTable(scale), "");
  if (fleet) lines.push(fleetTable(fleet, fleetOptions), "");
  const failedSanity = sanity.filter((s) => !s.ok);
  if (failedSanity.length > 0) {
    lines.push(
      "SANITY FAILURES:",
      ...failedSanity.map((s) => `- ${s.backend} ${s.subject}: ${s.checks.join("; ")}`),
      "",
    );
  }
  process.stdout.write(`${lines.join("\n")}\n`);

  if (options.write) {
    const out = path.resolve(root, options.out);
    mkdirSync(out, { recursive: true });
    const file = path.join(out, `${startedAt.toISOString().replace(/[:.]/g, "-")}.json`);
    const json = {
      startedAt: startedAt.toISOString(),
      finishedAt: finishedAt.toISOString(),
      command,
      label: options.label,
      options,
      machine: { ...host, loadAverageAtEnd: os.loadavg() },
      servers: info,
      library: lib.dir,
      skipped,
      sanity,
      cells: cells.map((c) => ({ ...c, median: summarize(c) })),
      targets,
      notes,
      candidate: candidate?.dir,
      candidateTargets,
      scale,
      fleet,
    };
    // Written under a .tmp name (git-ignored) and renamed, so an interrupted run leaves no half file behind.
    writeFileSync(`${file}.tmp`, `${JSON.stringify(json, null, 2)}\n`);
    renameSync(`${file}.tmp`, file);
    p.note(`wrote ${path.relative(root, file)}`);
  }
  return failedSanity.length > 0 || cells.some((c) => !c.dedupOk) || fleet?.some((c) => !c.dedupOk) ? 1 : 0;
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exitCode = 2;
  },
);
