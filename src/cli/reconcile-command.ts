/**
 * `idempotool reconcile`: run the reconciler over a store with the tools' hooks from a module. A dry run
 * unless `--apply`; progress per record on stderr; a summary of the decisions on stdout.
 */
import { existsSync } from "node:fs";
import { isAbsolute, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import cliProgress from "cli-progress";
import type { Command } from "commander";
import { findTypeScriptLoader } from "../chaos/chaos-module.js";
import { Decision, type ReconcileDecision, type ReconcileTool, reconcileOnce } from "../reconcile/index.js";
import { milliseconds, positiveInteger } from "./arguments.js";
import { ExitCode, UsageError } from "./errors.js";
import { openFlaggedStore, recordJson, type StoreFlags, storeOptions } from "./inspect-command.js";
import type { CommandContext } from "./main.js";
import { needsPackages } from "./optional-packages.js";
import { printable, type Styles, styles, table, terminalJson } from "./output.js";

interface ReconcileFlags extends StoreFlags {
  readonly hooks: string;
  readonly apply?: boolean;
  readonly tool?: string;
  readonly scope?: string;
  readonly limit?: number;
  readonly leaseMs: number;
  readonly json?: boolean;
}

const examples = `
The hooks module exports \`tools\` (or a default export): an object from tool name to
{ verify(record, ctx), compensate?(record, ctx) }, or to a saga from idempotool/saga. verify must
only read (a dry run asks it too); it answers completed, failed, not_executed, compensate or unknown.

Examples:
  $ idempotool reconcile --store sqlite://./idempotool.db --hooks ./reconcile-hooks.js
  $ idempotool reconcile --store postgres://agent@db/agents --hooks ./hooks.ts --apply
  $ idempotool reconcile --store redis://127.0.0.1:6379 --hooks ./hooks.js --tool send_email --json

Exit codes: 0 nothing left to review; 1 records need review or a hook failed; 2 it could not run.`;

/** Register `reconcile` on its command. */
export function reconcileCommand(command: Command, context: CommandContext): void {
  storeOptions(command)
    .description("Resolve stale and unknown records with the tools' verify hooks (a dry run unless --apply)")
    .requiredOption("--hooks <module>", "a module exporting `tools`: tool name → { verify, compensate? }")
    .option("--apply", "settle, release and compensate (default: a dry run that changes nothing)")
    .option("--tool <name>", "only this tool's records")
    .option("--scope <scope>", "only this scope")
    .option("--limit <n>", "examine at most this many records", positiveInteger)
    .option("--lease-ms <ms>", "the reconciler's lease on a record while its hook runs", milliseconds, 60_000)
    .option("--json", "print the summary and every decision as JSON")
    .addHelpText("after", examples)
    .action(async (flags: ReconcileFlags) => {
      const tools = await loadHooks(flags.hooks);
      const store = await openFlaggedStore(flags, { readOnly: !flags.apply });
      const err = context.io.stderr;
      const tty = err.isTTY === true;
      const bar = tty
        ? new cliProgress.SingleBar(
            { format: "reconciling {value} records {decision}", stream: err, clearOnComplete: true },
            cliProgress.Presets.shades_classic,
          )
        : undefined;
      bar?.start(0, 0, { decision: "" });
      const s = styles(context.io.stdout);
      let summary: Awaited<ReturnType<typeof reconcileOnce>>;
      try {
        summary = await reconcileOnce({
          store,
          tools,
          dryRun: !flags.apply,
          leaseMs: flags.leaseMs,
          ...(flags.tool !== undefined ? { tool: flags.tool } : {}),
          ...(flags.scope !== undefined ? { scope: flags.scope } : {}),
          ...(flags.limit !== undefined ? { limit: flags.limit } : {}),
          onDecision: (d) => {
            if (bar) {
              bar.setTotal(bar.getTotal() + 1);
              bar.increment(1, { decision: decisionWords(d) });
            } else if (!flags.json) {
              err.write(
                `reconcile${d.dryRun ? " (dry run)" : ""}: ${printable(d.scope)}/${printable(d.key)} ` +
                  `(${printable(d.tool)}): ${decisionWords(d)}\n`,
              );
            }
          },
        });
      } catch (error) {
        const reason = printable(error instanceof Error ? error.message : String(error));
        throw new UsageError(`cannot reconcile the store: ${reason}`, { cause: error });
      } finally {
        bar?.stop();
        await store.close();
      }
      const out = context.io.stdout;
      if (flags.json) {
        const { decisions, ...counts } = summary;
        const listed = decisions.map(({ record, error, ...d }) => ({
          ...d,
          status: record.status,
          record: recordJson(record),
          ...(error !== undefined ? { error: error instanceof Error ? error.message : String(error) } : {}),
        }));
        out.write(`${terminalJson({ ...counts, decisions: listed })}\n`);
      } else {
        if (summary.decisions.length > 0) {
          // Keys, scopes and a hook's error text come from elsewhere: escaped, so none drives the terminal.
          const rows = summary.decisions.map((d) => [
            printable(d.scope),
            printable(d.key),
            printable(d.tool),
            paintDecision(s, d),
            printable(d.reason),
          ]);
          for (const line of table(["scope", "key", "tool", "decision", "reason"], rows))
            out.write(`${line}\n`);
        }
        // A dry run changed nothing: its counts say what --apply would do, not what was done.
        const acted = summary.dryRun
          ? [
              `would settle ${summary.completed} as completed, ${summary.failed} as failed`,
              `release ${summary.released}`,
              `compensate ${summary.compensated}`,
            ].join(", ")
          : [
              `${summary.completed} completed`,
              `${summary.failed} failed`,
              `${summary.released} released`,
              `${summary.compensated} compensated`,
            ].join(", ");
        const left = [
          `${summary.needsReview} need review`,
          `${summary.skipped} skipped`,
          `${summary.errors} errors`,
        ].join(", ");
        out.write(
          summary.dryRun
            ? `${s.yellow("dry run, nothing changed (--apply to act): ")}${summary.examined} examined; ${acted}; ${left}\n`
            : `${summary.examined} examined, ${acted}, ${left}\n`,
        );
      }
      if (summary.needsReview > 0 || summary.errors > 0) context.setExitCode(ExitCode.findings);
    });
}

/** A dry run's decision about a record: what `--apply` would do, or what it found (a hook's error). */
const wouldDo: Readonly<Record<Decision, string>> = {
  [Decision.completed]: "would settle completed",
  [Decision.failed]: "would settle failed",
  [Decision.released]: "would release",
  [Decision.compensated]: "would compensate",
  [Decision.needsReview]: "needs review",
  [Decision.skipped]: "would skip",
  [Decision.error]: "error",
};

/**
 * A decision as the table and the progress lines show it: in a dry run, what `--apply` would do
 * (`would settle completed`, `would release`); otherwise what was done (`completed`, `released`).
 */
function decisionWords(d: ReconcileDecision): string {
  return d.dryRun ? wouldDo[d.decision] : d.decision;
}

function paintDecision(s: Styles, d: ReconcileDecision): string {
  const words = decisionWords(d);
  if (d.decision === Decision.error) return s.red(words);
  if (d.decision === Decision.needsReview) return s.yellow(words);
  if (d.decision === Decision.skipped) return s.dim(words);
  return s.green(words);
}

let typeScriptRegistered = false;

/**
 * Registers tsx for the rest of the process, once; false when it is not installed. Each register() adds
 * another layer of hooks to Node's loader chain for good: a process that runs the command line again and
 * again (runCli()) would pile them up.
 */
async function registerTypeScript(): Promise<boolean> {
  if (typeScriptRegistered) return true;
  const loader = findTypeScriptLoader(process.cwd());
  if (!loader) return false;
  const api = (await import(loader.apiUrl)) as { register: () => unknown };
  // Another run may have registered it while this one imported tsx.
  if (!typeScriptRegistered) api.register();
  typeScriptRegistered = true;
  return true;
}

/**
 * Import the hooks module and check its `tools`. A saga counts as its `reconciler`. Each entry may carry
 * the tool's storage options (`ttlMs`, `maxResultBytes`, `redact`, `encryption`) too: `review` and
 * `resolve` read them to open sealed notes and to store a resolution as the tool stores its outcomes.
 */
export async function loadHooks(spec: string): Promise<Record<string, ReconcileTool>> {
  const path = isAbsolute(spec) ? spec : resolve(process.cwd(), spec);
  if (!existsSync(path)) throw new UsageError(`there is no hooks module at ${path}`);
  if (/\.(ts|mts|cts)$/.test(path) && !(await registerTypeScript())) {
    throw new UsageError(needsPackages("a TypeScript hooks module", ["tsx"]));
  }
  let module: Record<string, unknown>;
  try {
    module = (await import(pathToFileURL(path).href)) as Record<string, unknown>;
  } catch (error) {
    const reason = error instanceof Error ? error.message.split("\n")[0] : String(error);
    throw new UsageError(`cannot load the hooks module ${path}: ${reason}`, { cause: error });
  }
  const exported = module.tools ?? module.default;
  if (typeof exported !== "object" || exported === null) {
    throw new UsageError(`${path} exports no \`tools\` object (tool name → { verify, compensate? })`);
  }
  const tools: Record<string, ReconcileTool> = {};
  for (const [name, value] of Object.entries(exported)) {
    const entry = (value as { reconciler?: unknown } | null)?.reconciler ?? value;
    if (typeof (entry as { verify?: unknown } | null)?.verify !== "function") {
      throw new UsageError(`${path}: tools.${name} has no verify function`);
    }
    tools[name] = entry as ReconcileTool;
  }
  return tools;
}
