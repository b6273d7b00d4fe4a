/**
 * `idempotool review`: the records that need a person (in progress past their lease, or `unknown`),
 * oldest first, as a table or as the `ReviewQueue` JSON. Exits 1 when the queue is not empty, so a
 * cron job or a dashboard can alert on it. Reads only.
 */
import cliProgress from "cli-progress";
import type { Command } from "commander";
import { shortDuration } from "../core/time.js";
import type { ReconcileTool } from "../reconcile/index.js";
import { type ReviewItem, type ReviewQueue, reviewQueue } from "../review/index.js";
import { positiveInteger } from "./arguments.js";
import { ExitCode } from "./errors.js";
import { duration, openFlaggedStore, type StoreFlags, storeCall, storeOptions } from "./inspect-command.js";
import type { CommandContext } from "./main.js";
import { type OutputStream, printable, type Styles, styles, table, terminalJson } from "./output.js";
import { loadHooks } from "./reconcile-command.js";
import type { OpenedStore } from "./store-url.js";

/** The filters `review` and a bulk `resolve` share. */
export interface QueueFlags extends StoreFlags {
  readonly tool?: string;
  readonly scope?: string;
  readonly keyPrefix?: string;
  readonly olderThan?: number;
  readonly limit: number;
  readonly hooks?: string;
}

interface ReviewFlags extends QueueFlags {
  readonly json?: boolean;
}

const examples = `
A record needs a person when its worker stopped without recording an outcome (in progress,
its lease passed) or when nobody knows whether its effect happened (unknown). Repeats of such
a call get outcome_unknown until it is resolved: idempotool resolve, or a verify hook
(idempotool reconcile).

Examples:
  $ idempotool review --store sqlite://./idempotool.db
  $ idempotool review --store postgres://agent@db/agents --tool send_email --older-than 10m
  $ idempotool review --store redis://127.0.0.1:6379 --scope tenant-a --json
  $ idempotool review --store sqlite://./idempotool.db --hooks ./hooks.js    # open sealed notes

Exit codes: 0 nothing needs a person; 1 some record does; 2 it could not run.`;

/**
 * Add the queue's filters to a command. `words` prefixes each filter's help (`by filter: `), `hooks` is
 * what `--hooks` does for it.
 */
export function queueOptions(command: Command, limit: number, hooks: string, words = ""): Command {
  return storeOptions(command)
    .option("--tool <name>", `${words}only this tool's records`)
    .option("--scope <scope>", `${words}only this scope`)
    .option("--key-prefix <prefix>", `${words}only keys starting with this`)
    .option("--older-than <age>", `${words}only records first tried longer ago (10m, 2h, 3d)`, duration)
    .option("--limit <n>", `${words}at most this many records, the oldest`, positiveInteger, limit)
    .option("--hooks <module>", hooks);
}

/** Register `review` on its command. */
export function reviewCommand(command: Command, context: CommandContext): void {
  queueOptions(
    command,
    100,
    "a module exporting `tools` (as for reconcile): their encryption opens sealed notes",
  )
    .description("List the records that need a person: leases passed and unknown outcomes, oldest first")
    .option("--json", "print the queue as JSON (items, total, byTool, oldestAgeMs, …)")
    .addHelpText("after", examples)
    .action(async (flags: ReviewFlags) => {
      const tools = flags.hooks !== undefined ? await loadHooks(flags.hooks) : undefined;
      const store = await openFlaggedStore(flags, { readOnly: true });
      let queue: ReviewQueue;
      try {
        queue = await readQueue(store, flags, tools, context.io.stderr);
      } finally {
        await store.close();
      }
      const out = context.io.stdout;
      if (flags.json) out.write(`${terminalJson(queue)}\n`);
      else for (const line of queueLines(queue, styles(out))) out.write(`${line}\n`);
      context.setExitCode(queue.total > 0 ? ExitCode.findings : ExitCode.ok);
    });
}

/** Read the queue the flags describe; a bar counts the records looked at when stderr is a terminal. */
export async function readQueue(
  store: OpenedStore,
  flags: QueueFlags,
  tools: Readonly<Record<string, ReconcileTool>> | undefined,
  err: NodeJS.WritableStream & OutputStream,
): Promise<ReviewQueue> {
  // Progress only for a person watching: a log or a pipe gets the answer, not a count of pages.
  const bar =
    err.isTTY === true
      ? new cliProgress.SingleBar(
          { format: "reading the store, records looked at: {value}", stream: err, clearOnComplete: true },
          cliProgress.Presets.shades_classic,
        )
      : undefined;
  let started = false;
  try {
    return await storeCall(flags, "read", () =>
      reviewQueue({
        store,
        limit: flags.limit,
        ...(flags.tool !== undefined ? { tool: flags.tool } : {}),
        ...(flags.scope !== undefined ? { scope: flags.scope } : {}),
        ...(flags.keyPrefix !== undefined ? { keyPrefix: flags.keyPrefix } : {}),
        ...(flags.olderThan !== undefined ? { olderThanMs: flags.olderThan } : {}),
        ...(tools !== undefined ? { tools } : {}),
        onProgress: (scanned) => {
          if (!bar) return;
          if (!started) bar.start(0, 0);
          started = true;
          bar.setTotal(scanned);
          bar.update(scanned);
        },
      }),
    );
  } finally {
    if (started) bar?.stop();
  }
}

const why: Readonly<Record<ReviewItem["reason"], string>> = {
  lease_passed: "lease passed",
  unknown: "unknown",
};

/** The widest tool, scope and key cells, so a row fits 100 columns; the details line gives them in full. */
const widest = { tool: 16, scope: 16, key: 27 } as const;

function cut(text: string, maxCell: number): string {
  const chars = [...text];
  return chars.length > maxCell ? `${chars.slice(0, maxCell - 1).join("")}…` : text;
}

/**
 * The queue for a person: a one-line summary, then one row per record with its details indented below
 * (first and last attempt, why the outcome is unknown, the verify hook's last answer), within 100 columns
 * for ordinary keys. Text from the store is escaped: keys and errors often come from models.
 */
export function queueLines(queue: ReviewQueue, s: Styles): string[] {
  if (queue.total === 0) {
    return [`${s.green("Nothing needs a person:")} no unknown outcome, no lease passed (${looked(queue)}).`];
  }
  const tools = Object.entries(queue.byTool)
    .sort(([a, x], [b, y]) => y - x || (a < b ? -1 : 1))
    .map(([tool, n]) => `${n} ${printable(tool)}`)
    .join(", ");
  const lines = [
    `${s.yellow(`${counted(queue.total, "record")} ${queue.total === 1 ? "needs" : "need"} a person`)} ` +
      `(${tools}); the oldest was first tried ${shortDuration(queue.oldestAgeMs ?? 0)} ago.`,
    "",
  ];
  lines.push(...queueTable(queue, s));
  lines.push("");
  const shown = queue.items.length;
  lines.push(
    shown < queue.total
      ? `Showing the oldest ${shown} of ${queue.total}; raise --limit for more (${looked(queue)}).`
      : `${queue.total === 1 ? "It is" : `All ${queue.total} are`} shown (${looked(queue)}).`,
  );
  lines.push(
    "To resolve one: idempotool resolve <scope> <key> --as … --evidence … (idempotool resolve --help)",
  );
  return lines;
}

/** One row per record, its details indented below it. */
export function queueTable(queue: ReviewQueue, s: Styles): string[] {
  const rows = queue.items.map((item) => [
    shortDuration(item.ageMs),
    cut(printable(item.tool), widest.tool),
    cut(printable(item.scope), widest.scope),
    cut(printable(item.key), widest.key),
    item.reason === "unknown" ? s.yellow(why[item.reason]) : why[item.reason],
    String(item.attempts),
    item.leaseHolder,
  ]);
  const [header, rule, ...body] = table(["age", "tool", "scope", "key", "why", "tries", "holder"], rows);
  const lines = [header!, rule!];
  queue.items.forEach((item, i) => {
    lines.push(body[i]!);
    for (const detail of details(item)) lines.push(`    ${s.dim(detail)}`);
  });
  return lines;
}

function details(item: ReviewItem): string[] {
  const lines: string[] = [];
  // Each name cut in the row, in full on a line of its own (to copy into idempotool resolve).
  for (const name of ["tool", "scope", "key"] as const) {
    const text = printable(item[name]);
    if ([...text].length > widest[name]) lines.push(`${name}: ${text}`);
  }
  lines.push(
    `first ${seconds(item.firstAttemptAt)}, last ${seconds(item.lastAttemptAt)}, version ${item.version}`,
  );
  if (item.failure) {
    const code = item.failure.code !== undefined ? ` (${item.failure.code})` : "";
    lines.push(
      `why unknown: ${printable(item.failure.name)}${printable(String(code))}: ${printable(item.failure.message)}`,
    );
  }
  if (item.preview !== undefined) {
    // Up to 1,000 characters of JSON: the start says what the call was for, --json has it all.
    const chars = [...printable(item.preview)];
    lines.push(`arguments: ${chars.length > 80 ? `${chars.slice(0, 79).join("")}…` : chars.join("")}`);
  }
  if (item.verify) {
    const reason = item.verify.reason !== undefined ? `: ${printable(item.verify.reason)}` : "";
    lines.push(`verify hook said ${printable(item.verify.status)}${reason} (${item.verify.at})`);
  }
  if (item.sealed)
    lines.push("sealed: its notes are encrypted; --hooks with the tool's encryption opens them");
  return lines;
}

/** ISO-8601 to the second: a person compares attempts, not milliseconds (--json keeps them). */
function seconds(iso: string): string {
  return iso.replace(/\.\d{3}Z$/, "Z");
}

function looked(queue: ReviewQueue): string {
  return `${counted(queue.scanned, "record")} looked at`;
}

function counted(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? "" : "s"}`;
}
