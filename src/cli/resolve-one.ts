/**
 * One resolution, as every form of `idempotool resolve` applies it: the flags, the refusal that comes
 * before anything is written (a sealed record without the tool's encryption), the warning before a key
 * is freed, and the line that says what was done. A refusal because the record is not as it was seen
 * (`record_changed`, `record_not_resolvable`) is exit 1, with what to do.
 */

import { isIdempotencyError } from "../core/errors.js";
import { isSealed } from "../core/result-codec.js";
import type { IdempotencyRecord } from "../core/store.js";
import type { ReconcileTool } from "../reconcile/index.js";
import { type ResolveAs, type ResolveOptions, recordVersion, type TrailEntry } from "../review/index.js";
import { resolveRecordAsked } from "../review/resolve.js";
import { confirm } from "./confirm.js";
import { ExitCode, UsageError } from "./errors.js";
import { storeCall } from "./inspect-command.js";
import type { CommandContext } from "./main.js";
import { printable, styles } from "./output.js";
import { redactUrl } from "./redact.js";
import { resolutionTelemetry } from "./resolution-telemetry.js";
import type { QueueFlags } from "./review-command.js";
import type { OpenedStore } from "./store-url.js";

/** How the command line names an outcome. */
export type CliAs = "completed" | "not-executed" | "failed";

export interface ResolveFlags extends Omit<QueueFlags, "limit"> {
  readonly limit?: number;
  readonly as?: CliAs;
  readonly result?: string;
  readonly error?: string;
  readonly evidence?: string;
  readonly by?: string;
  readonly expectVersion?: string;
  readonly verify?: boolean;
  readonly apply?: boolean;
  readonly yes?: boolean;
  readonly dryRun?: boolean;
  readonly workerGone?: boolean;
}

/** What the checked flags say to do, with everything parsed before the store is opened. */
export interface Resolution {
  readonly as: ResolveAs;
  readonly result?: unknown;
  readonly error?: ResolveOptions["error"];
  readonly evidence: string;
  readonly by: string;
}

/** The words the command line uses for an outcome. */
export function cliAs(as: ResolveAs): CliAs {
  return as === "not_executed" ? "not-executed" : as;
}

/**
 * Whether the record's notes are sealed and the tool's encryption was not given: a resolution in
 * plaintext would be refused by the tool, so it is refused here first, with what to do.
 */
export function refuseSealed(
  record: IdempotencyRecord,
  tool: ReconcileTool | undefined,
  hooks: string | undefined,
): void {
  if (tool?.encryption !== undefined) return;
  if (![record.error, record.result].some((text) => text !== null && isSealed(text))) return;
  const name = printable(JSON.stringify(record.tool));
  throw new UsageError(
    hooks === undefined
      ? `this record's notes are sealed (${name} encrypts its outcomes), so a resolution must be sealed too: ` +
          `give --hooks <module> whose tools[${name}] has the tool's encryption. Nothing was changed`
      : `this record's notes are sealed, and ${hooks} gives no encryption for tools[${name}]: add the tool's ` +
          "encryption there. Nothing was changed",
  );
}

/** Said when an outcome may be stored for a tool whose encryption was not given. */
export const plaintextNote =
  "Without --hooks, the outcome is stored in plaintext; a tool with encryption would refuse to replay it.";

/** What not-executed risks, said before it acts. */
export function notExecutedWarning(tool: string, count: number): string {
  const one = count === 1;
  return (
    `Resolving as not-executed frees ${one ? "the key" : `${count} keys`}: the next call with ${one ? "it" : "each"} ` +
    `runs ${printable(tool)} again. If the effect did happen, it happens twice.`
  );
}

/** Resolve one record by scope and key, as the flags say. */
export async function resolveOne(
  context: CommandContext,
  store: OpenedStore,
  flags: ResolveFlags,
  id: { readonly scope: string; readonly key: string },
  resolution: Resolution,
  tools: Readonly<Record<string, ReconcileTool>> | undefined,
): Promise<void> {
  const record = await storeCall(flags, "read", () => store.get(id, Date.now()));
  if (record === undefined) {
    context.io.stderr.write(
      `idempotool: no live record for key ${printable(JSON.stringify(id.key))} in scope ` +
        `${printable(JSON.stringify(id.scope))}: nothing to resolve (see idempotool review)\n`,
    );
    context.setExitCode(ExitCode.findings);
    return;
  }
  const tool = tools?.[record.tool];
  refuseSealed(record, tool, flags.hooks);
  // A record the resolution will refuse (settled, changed) is refused without asking. Whether a lease is live,
  // or passed long enough, is the store's clock's to say: for a record in progress the resolution asks, below,
  // once it has judged it so.
  const refusable =
    record.status === "completed" ||
    record.status === "failed" ||
    (flags.expectVersion !== undefined && recordVersion(record) !== flags.expectVersion);
  // A worker that stopped before writing any note leaves nothing to show whether its tool encrypts.
  if (
    resolution.as !== "not_executed" &&
    !refusable &&
    tool === undefined &&
    record.status === "in_progress"
  ) {
    context.io.stderr.write(`${plaintextNote}\n`);
  }
  const ask =
    resolution.as === "not_executed" && !refusable
      ? async () => {
          context.io.stderr.write(`${notExecutedWarning(record.tool, 1)}\n`);
          if (flags.yes) return;
          const question = `Free key ${printable(JSON.stringify(id.key))} of ${printable(record.tool)} in scope ${printable(JSON.stringify(id.scope))}? Type yes to confirm: `;
          if (!(await confirm(context.io, question, "yes"))) {
            throw new UsageError("not confirmed: nothing was changed");
          }
        }
      : undefined;
  await applyOne(context, store, flags, id, {
    ...resolution,
    via: "cli",
    tool,
    // What was confirmed is the record as read: one that changed while the operator answered is refused.
    expectVersion: flags.expectVersion ?? recordVersion(record),
    ask,
  });
}

/** Apply one resolution and say what became of it; a refusal is exit 1, with what to do. */
export async function applyOne(
  context: CommandContext,
  store: OpenedStore,
  flags: ResolveFlags,
  id: { readonly scope: string; readonly key: string },
  r: Resolution & {
    readonly via: string;
    readonly tool: ReconcileTool | undefined;
    readonly expectVersion: string | undefined;
    /** Called once the resolution would go ahead, before it writes anything; it throws to stop it. */
    readonly ask?: (() => Promise<void>) | undefined;
  },
): Promise<void> {
  const options: ResolveOptions = {
    store,
    scope: id.scope,
    key: id.key,
    as: r.as,
    evidence: r.evidence,
    by: r.by,
    via: r.via,
    ...(r.as === "completed" ? { result: r.result } : {}),
    ...(r.error !== undefined ? { error: r.error } : {}),
    ...(r.expectVersion !== undefined ? { expectVersion: r.expectVersion } : {}),
    ...(r.tool !== undefined ? { tool: r.tool } : {}),
    ...(flags.workerGone ? { minStaleMs: 0 } : {}),
    onResolution: await resolutionTelemetry(),
  };
  let entry: TrailEntry;
  try {
    entry = await resolveRecordAsked(options, r.ask);
  } catch (error) {
    if (refused(error)) {
      context.io.stderr.write(
        `idempotool: ${error.code}: ${printable(error.message)} (idempotool review shows it as it is now)\n`,
      );
      context.setExitCode(ExitCode.findings);
      return;
    }
    throw storeFailure(flags, error);
  }
  context.io.stdout.write(`${doneLine(entry, styles(context.io.stdout).green)}\n`);
}

/** `record_changed` and `record_not_resolvable`: the record is not as the operator saw it. */
export function refused(error: unknown): error is Error & { code: string } {
  return isIdempotencyError(error, "record_changed") || isIdempotencyError(error, "record_not_resolvable");
}

/** An idempotool error passes as it is (its code says what to do); a store's own names the store. */
export function storeFailure(flags: ResolveFlags, error: unknown): unknown {
  if (isIdempotencyError(error)) return error;
  const reason = error instanceof Error ? error.message : String(error);
  const shown = printable(redactUrl(flags.store));
  return new UsageError(`cannot resolve in the store ${shown}: ${printable(reason)}`, { cause: error });
}

/** What was done, in one line. */
export function doneLine(entry: TrailEntry, paint: (text: string) => string): string {
  const what =
    entry.as === "completed"
      ? "as completed: repeats now replay the result given"
      : entry.as === "failed"
        ? "as failed: repeats now get the error given"
        : "as not-executed: the key is free, and the next call runs the tool";
  const where = `${printable(entry.scope)}/${printable(entry.key)} (${printable(entry.tool)})`;
  return `${paint("Resolved")} ${where} ${what}. Trail: by ${printable(entry.by)} via ${entry.via} at ${entry.at}.`;
}
