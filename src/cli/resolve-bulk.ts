/**
 * `idempotool resolve --tool T --scope S --older-than D --as …`: every record a filter names, resolved
 * alike. It lists them first (and stops there with `--dry-run`), asks for the count as confirmation
 * (`--yes` skips it), then resolves each with the version it was listed at, so a record that changed
 * meanwhile is skipped and reported, never overwritten.
 */

import type { ReconcileTool } from "../reconcile/index.js";
import { resolveRecord } from "../review/index.js";
import { confirm } from "./confirm.js";
import { ExitCode, UsageError } from "./errors.js";
import type { CommandContext } from "./main.js";
import { printable, styles } from "./output.js";
import { resolutionTelemetry } from "./resolution-telemetry.js";
import {
  cliAs,
  notExecutedWarning,
  plaintextNote,
  type Resolution,
  type ResolveFlags,
  refused,
  storeFailure,
} from "./resolve-one.js";
import { queueTable, readQueue } from "./review-command.js";
import type { OpenedStore } from "./store-url.js";

/** List, confirm, then resolve every record the filter names. */
export async function resolveBulk(
  context: CommandContext,
  store: OpenedStore,
  flags: ResolveFlags,
  resolution: Resolution,
  tools: Readonly<Record<string, ReconcileTool>> | undefined,
): Promise<void> {
  const { stdout, stderr } = context.io;
  const s = styles(stdout);
  const tool = flags.tool!;
  const scope = flags.scope!;
  const queue = await readQueue(store, { ...flags, limit: flags.limit ?? 1000 }, tools, stderr);
  const n = queue.items.length;
  const whose = `${printable(tool)} in scope ${printable(scope)}`;
  if (n === 0) {
    stdout.write(`Nothing to resolve: no record of ${whose} needs a person and matches.\n`);
    return;
  }
  for (const line of queueTable(queue, s)) stdout.write(`${line}\n`);
  const as = cliAs(resolution.as);
  const more = n < queue.total ? ` (the oldest ${n} of ${queue.total}; run again for the rest)` : "";
  stdout.write(`${flags.dryRun ? "Would resolve" : "To resolve"} ${n} of ${whose} as ${as}${more}.\n`);
  if (flags.dryRun) {
    stdout.write("Dry run: nothing changed.\n");
    return;
  }
  const sealed = queue.items.filter((item) => item.sealed).length;
  if (sealed > 0) {
    throw new UsageError(
      `${sealed} of them keep sealed notes, so their resolutions must be sealed too: give --hooks <module> ` +
        `whose tools[${printable(JSON.stringify(tool))}] has the tool's encryption. Nothing was changed`,
    );
  }
  const noteless = queue.items.some((item) => item.status === "in_progress");
  if (resolution.as !== "not_executed" && noteless && tools?.[tool]?.encryption === undefined) {
    stderr.write(`${plaintextNote}\n`);
  }
  const keys = `${n} key${n === 1 ? "" : "s"} of ${whose}`;
  const question =
    resolution.as === "not_executed"
      ? `Free ${keys}? This runs their effects again if the evidence is wrong. Type ${n} to confirm: `
      : resolution.as === "completed"
        ? `Record ${keys} as completed? Their repeats will replay the result given instead of running. Type ${n} to confirm: `
        : `Record ${keys} as failed? Their repeats will get the error given back. Type ${n} to confirm: `;
  if (resolution.as === "not_executed") stderr.write(`${notExecutedWarning(tool, n)}\n`);
  if (!flags.yes && !(await confirm(context.io, question, String(n)))) {
    throw new UsageError(`not confirmed (the answer must be ${n}): nothing was changed`);
  }
  const counts = { resolved: 0, changed: 0, failed: 0 };
  const onResolution = await resolutionTelemetry();
  for (const item of queue.items) {
    const where = `${printable(item.scope)}/${printable(item.key)}`;
    try {
      await resolveRecord({
        store,
        scope: item.scope,
        key: item.key,
        as: resolution.as,
        evidence: resolution.evidence,
        by: resolution.by,
        via: "cli",
        expectVersion: item.version,
        ...(resolution.as === "completed" ? { result: resolution.result } : {}),
        ...(resolution.error !== undefined ? { error: resolution.error } : {}),
        ...(tools?.[item.tool] !== undefined ? { tool: tools[item.tool] } : {}),
        ...(flags.workerGone ? { minStaleMs: 0 } : {}),
        onResolution,
      });
      counts.resolved++;
      stdout.write(`${s.green("resolved")}  ${where}\n`);
    } catch (error) {
      const failure = storeFailure(flags, error);
      const message = printable(failure instanceof Error ? failure.message : String(failure));
      if (refused(error)) {
        counts.changed++;
        stdout.write(`${s.yellow("changed")}   ${where}: skipped, ${error.code}: ${message}\n`);
      } else {
        counts.failed++;
        stdout.write(`${s.red("failed")}    ${where}: ${message}\n`);
      }
    }
  }
  stdout.write(
    `${counts.resolved} resolved, ${counts.changed} changed since listed (skipped), ${counts.failed} failed.\n`,
  );
  if (counts.failed > 0) context.setExitCode(ExitCode.failure);
  else if (counts.changed > 0) context.setExitCode(ExitCode.findings);
}
