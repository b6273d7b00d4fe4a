/**
 * Where repeats come from (docs/testing.md, "chaos()"), each as a scenario `chaos()` runs against the tool
 * under test: what the callers do, and what each of them got back. The harness counts the effects around
 * them.
 */
import { spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { findTypeScriptLoader, type Instance, type ModuleRef } from "./chaos-module.js";
import { chaosKillEnv, chaosProbeFileEnv, onEffect } from "./chaos-probe.js";

/** Where repeats come from: transport and user retries, framework resumes, duplicate emissions, crashes. */
export const RepeatSource = {
  /** The call succeeded, its reply was lost, the client sends it again with the same key. */
  transportRetry: "transport_retry",
  /** A framework re-runs the node body on resume: a fresh instance of the tool, the same key from state. */
  frameworkResume: "framework_resume",
  /** The model emits the same call twice in one turn: two concurrent calls with one key. */
  duplicateEmission: "duplicate_emission",
  /** The user clicks again while the first call is still in flight, right after its effect. */
  userRetry: "user_retry",
  /** The process is SIGKILLed after the effect, before the record is settled; then a retry. */
  crash: "crash",
} as const;
export type RepeatSource = (typeof RepeatSource)[keyof typeof RepeatSource];

export const sourceTitles: Readonly<Record<RepeatSource, string>> = {
  transport_retry: "transport retry after success",
  framework_resume: "framework resume with the same key",
  duplicate_emission: "duplicate emission, two concurrent calls",
  user_retry: "user retry while the first call runs",
  crash: "SIGKILL after the effect, then a retry",
};

/** Why a source could produce a second effect, for the report. */
export const doubleEffectCauses: Readonly<Record<RepeatSource, string>> = {
  transport_retry: "the retry with the same key ran the effect again: nothing dedupes on the key",
  framework_resume:
    "a fresh instance with the same key ran the effect again: the dedup state lives in the instance, not in the store",
  duplicate_emission: "both concurrent calls ran the effect: there is no atomic claim on the key",
  user_retry:
    "the second click ran the effect while the first was in flight: an in-progress call is not waited for",
  crash:
    "the retry after the crash ran the effect again: the record did not survive the process (an in-memory store?), " +
    "or a stale claim was taken over although nothing downstream dedupes (give it a verify hook instead)",
};

/** What the crash child needs to load the tool as the harness did. */
export interface ChildConfig {
  readonly module: ModuleRef;
  readonly cwd: string;
  readonly args: unknown;
  readonly key: string;
  readonly scope: string;
  readonly storePath: string;
  readonly leaseMs: number;
}

/** One scenario's inputs. */
export interface ScenarioRun {
  readonly instance: Instance;
  /** A fresh instance (the factory called again, on a new store connection); the same one for a wrapped export. */
  readonly freshInstance: () => Promise<Instance>;
  readonly args: unknown;
  readonly key: string;
  readonly scope: string;
  readonly signal: AbortSignal;
  /** For the crash source; undefined when the tool was given as a function with no `module`. */
  readonly child: Omit<ChildConfig, "args" | "key" | "scope"> | undefined;
  readonly probeFile: string;
  readonly timeoutMs: number;
}

export interface ScenarioOutcome {
  /** What each call got, in order: "ran", "replay", "returned", an error code … */
  readonly outcomes: readonly string[];
  /** Set when the scenario could not run as meant. */
  readonly skipped?: string;
  /** Set when something went wrong around the tool (the crash child could not start). */
  readonly problem?: string;
  readonly note?: string;
}

type Scenario = (run: ScenarioRun) => Promise<ScenarioOutcome>;

/** Call the tool once and say what the caller got. */
async function attempt(instance: Instance, run: ScenarioRun): Promise<string> {
  try {
    const value = await instance.call(run.args, { key: run.key, scope: run.scope, signal: run.signal });
    if (
      typeof value === "object" &&
      value !== null &&
      typeof (value as { was_replay?: unknown }).was_replay === "boolean"
    ) {
      return (value as { was_replay: boolean }).was_replay ? "replay" : "ran";
    }
    return "returned";
  } catch (error) {
    const code = (error as { code?: unknown } | null)?.code;
    if (typeof code === "string") return code;
    return `threw: ${error instanceof Error ? error.message : String(error)}`;
  }
}

export const scenarios: Readonly<Record<RepeatSource, Scenario>> = {
  async transport_retry(run) {
    const first = await attempt(run.instance, run);
    return { outcomes: [first, await attempt(run.instance, run)] };
  },

  async framework_resume(run) {
    // The node body runs, is interrupted, and runs again from the top with the key from checkpointed state.
    const first = await attempt(run.instance, run);
    const resumed = await run.freshInstance();
    const note =
      resumed === run.instance ? "an already wrapped export resumes on the same instance" : undefined;
    return { outcomes: [first, await attempt(resumed, run)], ...(note ? { note } : {}) };
  },

  async duplicate_emission(run) {
    return { outcomes: await Promise.all([attempt(run.instance, run), attempt(run.instance, run)]) };
  },

  async user_retry(run) {
    // The second click comes right after the first call's effect, before that call has returned.
    let click!: () => void;
    const clicked = new Promise<void>((resolve) => {
      click = resolve;
    });
    const stopListening = onEffect(() => click());
    const first = attempt(run.instance, run).finally(() => click());
    await clicked;
    stopListening();
    const second = attempt(run.instance, run);
    return { outcomes: [await first, await second] };
  },

  async crash(run) {
    if (!run.child) {
      return {
        outcomes: [],
        skipped:
          'the tool was given as a function: pass options.module ("<path>#<export>") so a child process can load it',
      };
    }
    const child = await runCrashChild({ ...run.child, args: run.args, key: run.key, scope: run.scope }, run);
    if (child.problem) return { outcomes: [child.outcome], problem: child.problem };
    return { outcomes: [child.outcome, await attempt(run.instance, run)] };
  },
};

/** Spawn the child that calls the tool and dies at its probe. */
function runCrashChild(
  config: ChildConfig,
  run: ScenarioRun,
): Promise<{ outcome: string; problem?: string }> {
  const here = fileURLToPath(import.meta.url);
  const fromSource = here.endsWith(".ts");
  const script = join(dirname(here), fromSource ? "chaos-child.ts" : "chaos-child.js");
  const needsLoader = fromSource || /\.(ts|mts|cts|tsx)$/.test(config.module.path);
  const loader = needsLoader ? findTypeScriptLoader(config.cwd) : undefined;
  if (needsLoader && !loader) {
    return Promise.resolve({
      outcome: "not started",
      problem:
        "the crash child needs tsx to load TypeScript; install tsx beside idempotool: npm install tsx; or point chaos at compiled JavaScript",
    });
  }
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [...(loader ? ["--import", loader.importUrl] : []), script, JSON.stringify(config)],
      {
        cwd: config.cwd,
        env: { ...process.env, [chaosProbeFileEnv]: run.probeFile, [chaosKillEnv]: "1" },
        stdio: ["ignore", "ignore", "pipe"],
      },
    );
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => {
      stderr = (stderr + chunk.toString()).slice(-2_000);
    });
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill("SIGKILL");
    }, run.timeoutMs);
    child.on("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.on("exit", (code, signal) => {
      clearTimeout(timer);
      const said = stderr.trim().split("\n").at(-1) ?? "";
      if (timedOut)
        resolve({ outcome: "timed out", problem: `the crash child ran past ${run.timeoutMs} ms` });
      else if (signal === "SIGKILL") resolve({ outcome: "killed after the effect" });
      else if (code === 0) resolve({ outcome: "exited without calling probe()" });
      else if (code === 3) resolve({ outcome: `threw before any effect: ${said}` });
      else
        resolve({
          outcome: "could not start",
          problem: `the crash child could not load the tool: ${said || `exit ${code}`}`,
        });
    });
  });
}
