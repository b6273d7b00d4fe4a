/**
 * `idempotool resolve <scope> <key> --verify [--apply]`: ask the tool's verify hook about one record now,
 * show its answer, and with `--apply` resolve the record as it answered (via `verify` in the trail).
 */
import { messageOf } from "../core/outcomes.js";
import type { ReconcileOutcome, ReconcileTool } from "../reconcile/index.js";
import { needsReview, recordVersion } from "../review/index.js";
import { confirm, refuseUnconfirmable } from "./confirm.js";
import { ExitCode, UsageError } from "./errors.js";
import { storeCall } from "./inspect-command.js";
import type { CommandContext } from "./main.js";
import { printable, terminalJson } from "./output.js";
import {
  applyOne,
  notExecutedWarning,
  type Resolution,
  type ResolveFlags,
  refuseSealed,
} from "./resolve-one.js";
import type { OpenedStore } from "./store-url.js";

/** Ask the hook; show the answer; act on it with --apply. */
export async function resolveByVerify(
  context: CommandContext,
  store: OpenedStore,
  flags: ResolveFlags,
  id: { readonly scope: string; readonly key: string },
  tools: Readonly<Record<string, ReconcileTool>>,
  by: string,
): Promise<void> {
  const { stdout, stderr } = context.io;
  const now = Date.now();
  const record = await storeCall(flags, "read", () => store.get(id, now));
  const name = `${printable(id.scope)}/${printable(id.key)}`;
  if (record === undefined) {
    stderr.write(`idempotool: no live record for ${name}: nothing to verify (see idempotool review)\n`);
    context.setExitCode(ExitCode.findings);
    return;
  }
  const version = recordVersion(record);
  if (flags.expectVersion !== undefined && flags.expectVersion !== version) {
    stderr.write(
      `idempotool: record_changed: ${name} changed since version ${printable(flags.expectVersion)} was listed; ` +
        "nothing was asked or changed (idempotool review shows it as it is now)\n",
    );
    context.setExitCode(ExitCode.findings);
    return;
  }
  if (!needsReview(record, now)) {
    const why =
      record.status === "in_progress"
        ? "its owner holds a live lease and may be running the tool now"
        : `its outcome is recorded already (${record.status})`;
    stderr.write(
      `idempotool: record_not_resolvable: ${name} needs no resolution: ${why}. Nothing was asked\n`,
    );
    context.setExitCode(ExitCode.findings);
    return;
  }
  const tool = tools[record.tool];
  if (tool === undefined) {
    throw new UsageError(
      `${flags.hooks} has no tools[${printable(JSON.stringify(record.tool))}]: add the tool's verify hook there`,
    );
  }
  if (flags.apply) refuseSealed(record, tool, flags.hooks);
  let answer: ReconcileOutcome;
  try {
    answer = await tool.verify(record, {
      key: record.key,
      scope: record.scope,
      tool: record.tool,
      signal: new AbortController().signal,
    });
  } catch (error) {
    stderr.write(
      `idempotool: the verify hook of ${printable(record.tool)} failed for ${name}: ` +
        `${printable(messageOf(error))}. Nothing was changed; the record still needs a person\n`,
    );
    context.setExitCode(ExitCode.findings);
    return;
  }
  const reason = "reason" in answer && typeof answer.reason === "string" ? answer.reason : undefined;
  stdout.write(
    `The verify hook of ${printable(record.tool)} answers ${printable(String(answer.status))} for ${name}` +
      `${reason !== undefined ? `: ${printable(reason)}` : ""}\n`,
  );
  if (answer.status === "completed") stdout.write(`result: ${terminalJson(answer.result)}\n`);
  if (answer.status === "failed") stdout.write(`error: ${printable(messageOf(answer.error))}\n`);
  const resolution = resolutionOf(
    answer,
    flags.evidence ?? `verify hook: ${answer.status}${reason ? `: ${reason}` : ""}`,
    by,
  );
  if (resolution === undefined) {
    const undo =
      answer.status === "compensate"
        ? " Undoing the effect is reconcile's: idempotool reconcile --apply."
        : "";
    stdout.write(
      `Nothing to ${flags.apply ? "apply" : "resolve"}: the record still needs a person; resolve it with --as once you know.${undo}\n`,
    );
    context.setExitCode(ExitCode.findings);
    return;
  }
  const as = resolution.as === "not_executed" ? "not-executed" : resolution.as;
  if (!flags.apply) {
    stdout.write(
      `Nothing changed; --apply resolves it as ${as}${as === "completed" ? " with this result" : ""}.\n`,
    );
    return;
  }
  if (resolution.as === "not_executed") {
    stderr.write(`${notExecutedWarning(record.tool, 1)}\n`);
    refuseUnconfirmable(context.io, flags.yes, "Freeing the key as the hook says");
    if (
      !flags.yes &&
      !(await confirm(
        context.io,
        `Free key ${printable(JSON.stringify(id.key))} as the hook says? Type yes to confirm: `,
        "yes",
      ))
    ) {
      throw new UsageError("not confirmed: nothing was changed");
    }
  }
  await applyOne(context, store, flags, id, { ...resolution, via: "verify", tool, expectVersion: version });
}

/** The resolution a hook's answer stands for; none for `unknown` and `compensate`. */
function resolutionOf(answer: ReconcileOutcome, evidence: string, by: string): Resolution | undefined {
  switch (answer.status) {
    case "completed":
      return { as: "completed", result: answer.result, evidence, by };
    case "not_executed":
      return { as: "not_executed", evidence, by };
    case "failed": {
      const code = (answer.error as { code?: unknown } | null)?.code;
      const error = {
        message: messageOf(answer.error) || "the verify hook found it failed",
        ...(typeof code === "string" || typeof code === "number" ? { code } : {}),
        ...(answer.data !== undefined ? { data: answer.data } : {}),
      };
      return { as: "failed", error, evidence, by };
    }
    default:
      return undefined;
  }
}
