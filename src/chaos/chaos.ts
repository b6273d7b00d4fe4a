/**
 * `chaos()`: run a user's tool under every repeat source (docs/testing.md) against a throwaway SQLite store,
 * count its effects with a probe, and give a verdict per source. One intended call must produce one
 * effect whatever repeats it; a second one is a double effect.
 */
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { durationOption, invalidOption } from "../core/option-checks.js";
import { type SqliteStore, sqliteStore } from "../sqlite/index.js";
import {
  type ChaosContext,
  type ChaosTarget,
  type Instance,
  importTarget,
  instantiate,
  isWrappedTool,
  type ModuleRef,
  parseModuleRef,
} from "./chaos-module.js";
import { chaosProbeFileEnv, countEffects, probeFor } from "./chaos-probe.js";
import {
  doubleEffectCauses,
  RepeatSource,
  type ScenarioOutcome,
  type ScenarioRun,
  scenarios,
  sourceTitles,
} from "./chaos-sources.js";

/** How one repeat source fared. */
export const SourceVerdict = {
  /** One effect for one intended call. */
  pass: "pass",
  /** More than one effect: the repeat ran the effect again. */
  doubleEffect: "double_effect",
  /** No effect, or the scenario could not run: nothing was proven. */
  inconclusive: "inconclusive",
  /** Not run (the crash source without a module to load in a child). */
  skipped: "skipped",
} as const;
export type SourceVerdict = (typeof SourceVerdict)[keyof typeof SourceVerdict];

export interface SourceResult {
  readonly source: RepeatSource;
  readonly title: string;
  readonly verdict: SourceVerdict;
  /** Effects the probe counted. */
  readonly effects: number;
  /** What each call got, in order ("ran", "replay", "returned", an error code, "killed after the effect" …). */
  readonly outcomes: readonly string[];
  /** One line on the verdict. */
  readonly detail: string;
  readonly durationMs: number;
}

export interface ChaosReport {
  /** The tool's name (`toolName` of a wrapped tool, else the function's or the export's name). */
  readonly tool: string;
  /** Whether the tool under test was wrapped with `idempotent()`. */
  readonly kind: "idempotent" | "plain";
  readonly sources: readonly SourceResult[];
  /** True when no source produced a double effect and none was inconclusive. */
  readonly ok: boolean;
  /** Where the store and the probe file were kept, when `dir` was given. */
  readonly dir: string | undefined;
}

export interface ChaosProgress {
  readonly phase: "start" | "end";
  readonly source: RepeatSource;
  readonly title: string;
  /** 0-based. */
  readonly index: number;
  readonly total: number;
  /** With `phase: "end"`. */
  readonly result?: SourceResult;
}

export interface ChaosOptions {
  /** The arguments of the one intended call. Default `{}`. */
  readonly args?: unknown | undefined;
  /** Which sources to run, in order. Default: all of them. */
  readonly sources?: readonly RepeatSource[] | undefined;
  /**
   * `"<path>#<export>"` of the tool, for the crash source's child process, when `tool` is given as a
   * function. Not needed when `tool` is that string already.
   */
  readonly module?: string | undefined;
  /** The lease offered to the factory as `ctx.leaseMs` (whole ms from 1 to 2^31 − 1). Default 1000. */
  readonly leaseMs?: number | undefined;
  /** Bound on each source (whole ms from 1 to 2^31 − 1). Default 30 000. */
  readonly timeoutMs?: number | undefined;
  /** Where the SQLite file and the probe file go; kept afterwards. Default: a temporary folder, removed. */
  readonly dir?: string | undefined;
  /** Where relative module paths start. Default `process.cwd()`. */
  readonly cwd?: string | undefined;
  /** Called as each source starts and ends. */
  readonly onProgress?: ((progress: ChaosProgress) => void) | undefined;
}

/**
 * Run a tool under every repeat source and count its effects.
 *
 * `tool` is `"<module>#<export>"` (what `idempotool chaos` takes) or the export itself: a tool wrapped
 * with `idempotent()`, or a factory `(ctx) => tool` that gets the run's store, probe and lease and
 * returns a wrapped tool or a plain async function. The tool calls `ctx.probe()` (or `chaosProbe()`)
 * where its effect happens. A plain function is not idempotent, and the double effects show it.
 * @example
 * // test/tools.ts
 * import { idempotent } from "idempotool";
 * import type { ChaosContext } from "idempotool/chaos";
 *
 * export const sendEmail = ({ store, probe, leaseMs }: ChaosContext) =>
 *   idempotent(
 *     async (args: { to: string }) => {
 *       probe(args); // where the email leaves
 *       return "sent";
 *     },
 *     { name: "send_email", store, leaseMs },
 *   );
 *
 * // test/send-email.test.ts
 * import { chaos } from "idempotool/chaos";
 *
 * const report = await chaos("./test/tools.ts#sendEmail", { args: { to: "alice@example.com" } });
 * report.ok; // true: every source produced one email
 */
export async function chaos(tool: ChaosTarget | string, options: ChaosOptions = {}): Promise<ChaosReport> {
  // The probe's file reaches a wrapped export through the environment, so runs in one process take turns.
  const run = queue.then(() => runChaos(tool, options));
  queue = run.then(
    () => undefined,
    () => undefined,
  );
  return run;
}

let queue: Promise<void> = Promise.resolve();

async function runChaos(tool: ChaosTarget | string, options: ChaosOptions): Promise<ChaosReport> {
  const o = resolveChaosOptions(options);
  const ref: ModuleRef | undefined =
    typeof tool === "string"
      ? parseModuleRef(tool, o.cwd)
      : o.module
        ? parseModuleRef(o.module, o.cwd)
        : undefined;
  if (typeof tool !== "string" && typeof tool !== "function") {
    invalidOption(
      owner,
      "tool",
      'must be "<module>#<export>", a tool wrapped with idempotent(), or a factory (ctx) => tool',
    );
  }
  const target = typeof tool === "string" ? await importTarget(ref!, o.cwd) : tool;
  const fallbackName = ref?.exportName ?? ((tool as { name?: string }).name || "tool");

  const dir = o.dir ?? mkdtempSync(join(tmpdir(), "idempotool-chaos-"));
  if (o.dir) mkdirSync(dir, { recursive: true });
  const runId = randomBytes(4).toString("hex");
  const storePath = join(dir, `chaos-${runId}.db`);
  const probeFile = join(dir, `chaos-${runId}-effects.jsonl`);
  const stores: SqliteStore[] = [];
  const contextOn = (): ChaosContext => {
    const store = sqliteStore({ path: storePath });
    stores.push(store);
    return { store, probe: probeFor(probeFile), leaseMs: o.leaseMs };
  };

  // A wrapped export calls the env-driven chaosProbe(); a factory's ctx.probe writes the same file.
  const previousProbe = process.env[chaosProbeFileEnv];
  process.env[chaosProbeFileEnv] = probeFile;
  try {
    const instance = await instantiate(target, contextOn(), fallbackName);
    const freshInstance = async (): Promise<Instance> =>
      isWrappedTool(target) ? instance : instantiate(target, contextOn(), fallbackName);
    const results: SourceResult[] = [];
    for (const [index, source] of o.sources.entries()) {
      const progress = { source, title: sourceTitles[source], index, total: o.sources.length };
      o.onProgress?.({ phase: "start", ...progress });
      const result = await runSource(source, {
        instance,
        freshInstance,
        args: o.args,
        key: `chaos-${source}`,
        scope: `chaos-${runId}-${source}`,
        probeFile,
        timeoutMs: o.timeoutMs,
        child: ref ? { module: ref, cwd: o.cwd, storePath, leaseMs: o.leaseMs } : undefined,
      });
      results.push(result);
      o.onProgress?.({ phase: "end", ...progress, result });
    }
    const ok = results.every((r) => r.verdict === SourceVerdict.pass || r.verdict === SourceVerdict.skipped);
    return { tool: instance.name, kind: instance.kind, sources: results, ok, dir: o.dir ? dir : undefined };
  } finally {
    if (previousProbe === undefined) delete process.env[chaosProbeFileEnv];
    else process.env[chaosProbeFileEnv] = previousProbe;
    for (const store of stores) await store.close();
    if (!o.dir) rmSync(dir, { recursive: true, force: true });
  }
}

async function runSource(source: RepeatSource, run: Omit<ScenarioRun, "signal">): Promise<SourceResult> {
  const started = Date.now();
  const before = countEffects(run.probeFile);
  const timeout = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<ScenarioOutcome>((resolve) => {
    timer = setTimeout(() => {
      timeout.abort(new Error(`${sourceTitles[source]} ran past ${run.timeoutMs} ms`));
      resolve({ outcomes: ["timed out"], problem: `it ran past ${run.timeoutMs} ms` });
    }, run.timeoutMs);
  });
  let outcome: ScenarioOutcome;
  try {
    outcome = await Promise.race([scenarios[source]({ ...run, signal: timeout.signal }), timedOut]);
  } finally {
    clearTimeout(timer);
  }
  const effects = countEffects(run.probeFile) - before;
  const { verdict, detail } = judge(source, outcome, effects);
  return {
    source,
    title: sourceTitles[source],
    verdict,
    effects,
    outcomes: outcome.outcomes,
    detail,
    durationMs: Date.now() - started,
  };
}

function judge(
  source: RepeatSource,
  outcome: ScenarioOutcome,
  effects: number,
): { verdict: SourceVerdict; detail: string } {
  const note = outcome.note ? ` (${outcome.note})` : "";
  if (outcome.skipped) return { verdict: SourceVerdict.skipped, detail: outcome.skipped };
  if (effects > 1) {
    return {
      verdict: SourceVerdict.doubleEffect,
      detail: `${effects} effects: ${doubleEffectCauses[source]}${note}`,
    };
  }
  if (outcome.problem) return { verdict: SourceVerdict.inconclusive, detail: outcome.problem };
  if (effects === 0) {
    return {
      verdict: SourceVerdict.inconclusive,
      detail:
        "no effect was counted: the tool must call ctx.probe() (or chaosProbe()) where its effect happens",
    };
  }
  const failedClosed = outcome.outcomes.includes("outcome_unknown")
    ? "; the retry failed closed with outcome_unknown (a verify hook would resolve it)"
    : "";
  return { verdict: SourceVerdict.pass, detail: `one effect${failedClosed}${note}` };
}

interface ResolvedChaosOptions {
  readonly args: unknown;
  readonly sources: readonly RepeatSource[];
  readonly module: string | undefined;
  readonly leaseMs: number;
  readonly timeoutMs: number;
  readonly dir: string | undefined;
  readonly cwd: string;
  readonly onProgress: ((progress: ChaosProgress) => void) | undefined;
}

const owner = "chaos()";

function resolveChaosOptions(options: ChaosOptions): ResolvedChaosOptions {
  if (typeof options !== "object" || options === null) invalidOption(owner, "options", "must be an object");
  const all = Object.values(RepeatSource);
  const sources = options.sources ?? all;
  if (!Array.isArray(sources) || sources.length === 0 || sources.some((s) => !all.includes(s))) {
    invalidOption(owner, "sources", `must be a non-empty list of ${all.map((s) => `"${s}"`).join(", ")}`);
  }
  if (options.onProgress !== undefined && typeof options.onProgress !== "function") {
    invalidOption(owner, "onProgress", "must be a function");
  }
  return {
    args: options.args ?? {},
    sources,
    module: options.module,
    leaseMs: durationOption(owner, "leaseMs", options.leaseMs, 1_000),
    timeoutMs: durationOption(owner, "timeoutMs", options.timeoutMs, 30_000),
    dir: options.dir === undefined ? undefined : resolve(options.dir),
    cwd: options.cwd ?? process.cwd(),
    onProgress: options.onProgress,
  };
}
