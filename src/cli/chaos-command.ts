/**
 * `idempotool chaos <module>#<export>`: run a tool under every repeat source against a throwaway SQLite
 * store, with progress per source, and exit 1 on any double effect.
 */
import { type Command, InvalidArgumentError } from "commander";
import { type ChaosReport, chaos, SourceVerdict } from "../chaos/chaos.js";
import { RepeatSource } from "../chaos/chaos-sources.js";
import { commaList, milliseconds } from "./arguments.js";
import { ExitCode, UsageError } from "./errors.js";
import type { CommandContext } from "./main.js";
import { printableLine, type Styles, styles, table } from "./output.js";
import { progress } from "./progress.js";

interface ChaosFlags {
  readonly args: string;
  readonly only?: RepeatSource[];
  readonly leaseMs: number;
  readonly timeout: number;
  readonly dir?: string;
  readonly json?: boolean;
}

const sources = Object.values(RepeatSource);

const examples = `
The export is either a tool wrapped with idempotent(), or a factory that builds the tool on the run's
store: (ctx: { store, probe, leaseMs }) => tool, where tool is a wrapped tool or a plain async function.
The tool calls ctx.probe() (or chaosProbe() from idempotool/chaos) where its effect happens.
Sources: ${sources.join(", ")}.

Examples:
  $ idempotool chaos ./src/tools.ts#sendEmail --args '{"to":"alice@example.com"}'
  $ idempotool chaos ./dist/tools.js#sendEmail --only crash,duplicate_emission
  $ idempotool chaos ./src/tools.ts --json > chaos-report.json      (the default export)

Exit codes: 0 one effect per intended call under every source; 1 a double effect, or a source that
proved nothing (no effect counted); 2 the module could not be loaded.`;

/** Register `chaos` on its command. */
export function chaosCommand(command: Command, context: CommandContext): void {
  command
    .description(
      "Run a tool under every repeat source (retry, resume, duplicate, double click, crash) and count its effects",
    )
    .argument(
      "<module#export>",
      "the module and export of the tool or its factory (TypeScript loads through tsx)",
    )
    .option("--args <json>", "the arguments of the one intended call", "{}")
    .option("--only <sources>", `run only these sources (comma-separated: ${sources.join(", ")})`, sourceList)
    .option("--lease-ms <ms>", "the lease offered to the factory as ctx.leaseMs", milliseconds, 1_000)
    .option("--timeout <ms>", "how long each source may take", milliseconds, 30_000)
    .option(
      "--dir <path>",
      "keep the SQLite store and the probe file here (default: a temporary folder, removed)",
    )
    .option("--json", "print the report as JSON")
    .addHelpText("after", examples)
    .action(async (spec: string, flags: ChaosFlags) => {
      let args: unknown;
      try {
        args = JSON.parse(flags.args);
      } catch (error) {
        throw new UsageError(`--args is not JSON: ${(error as Error).message}`, { cause: error });
      }
      const out = context.io.stdout;
      const total = flags.only?.length ?? sources.length;
      const bar = progress(total, context.io.stderr);
      let report: ChaosReport;
      try {
        report = await chaos(spec, {
          args,
          leaseMs: flags.leaseMs,
          timeoutMs: flags.timeout,
          ...(flags.only ? { sources: flags.only } : {}),
          ...(flags.dir ? { dir: flags.dir } : {}),
          onProgress: (p) => {
            if (p.phase === "start") bar.step(p.title);
          },
        });
      } finally {
        bar.stop();
      }
      if (flags.json) out.write(`${JSON.stringify({ module: spec, ...report }, null, 2)}\n`);
      else for (const line of render(report, spec, styles(out))) out.write(`${printableLine(line)}\n`);
      context.setExitCode(report.ok ? ExitCode.ok : ExitCode.findings);
    });
}

function render(report: ChaosReport, spec: string, s: Styles): string[] {
  const kind = report.kind === "idempotent" ? "wrapped with idempotent()" : "a plain function";
  const lines = [s.bold(`idempotool chaos: ${report.tool} (${kind}) from ${spec}`), ""];
  lines.push(
    ...table(
      ["repeat source", "effects", "verdict", "what each call got"],
      report.sources.map((r) => [
        r.title,
        String(r.effects),
        verdictCell(r.verdict, s),
        r.outcomes.join(", "),
      ]),
    ),
  );
  lines.push("");
  for (const r of report.sources) lines.push(`${r.title}: ${r.detail}`);
  if (report.dir) lines.push("", `The store and the probe file are in ${report.dir}.`);
  lines.push("");
  const doubled = report.sources.filter((r) => r.verdict === SourceVerdict.doubleEffect);
  const unproven = report.sources.filter((r) => r.verdict === SourceVerdict.inconclusive);
  if (doubled.length > 0) {
    lines.push(
      s.red(
        `${doubled.length} of ${report.sources.length} repeat sources produced a double effect: ${doubled.map((r) => r.source).join(", ")}.`,
      ),
    );
    if (report.kind === "plain")
      lines.push("Wrap the tool with idempotent() and call it with a key chosen before the call.");
  } else if (unproven.length > 0) {
    lines.push(
      s.yellow(
        `${unproven.length} repeat source(s) proved nothing: ${unproven.map((r) => r.source).join(", ")}.`,
      ),
    );
  } else {
    lines.push(s.green("Every repeat source produced one effect for one intended call."));
  }
  return lines;
}

function verdictCell(verdict: SourceVerdict, s: Styles): string {
  switch (verdict) {
    case SourceVerdict.pass:
      return s.green("pass");
    case SourceVerdict.doubleEffect:
      return s.red("DOUBLE EFFECT");
    case SourceVerdict.inconclusive:
      return s.yellow("inconclusive");
    default:
      return s.dim("skipped");
  }
}

function sourceList(value: string): RepeatSource[] {
  const names = commaList(value);
  const unknown = names.filter((name) => !(sources as string[]).includes(name));
  if (names.length === 0 || unknown.length > 0) {
    throw new InvalidArgumentError(`must name sources from ${sources.join(", ")}, comma-separated`);
  }
  return names as RepeatSource[];
}
