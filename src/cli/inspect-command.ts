/**
 * `idempotool inspect list|show`: read records from any store named by URL. Also the helpers the record
 * commands share (inspect, purge, reconcile): `--store` with `--table`/`--prefix`, and ages like `10m`.
 */
import { type Command, InvalidArgumentError, Option } from "commander";
import { isSealed } from "../core/result-codec.js";
import { decodeCompletedNote, decodeResult } from "../core/serialize.js";
import { type IdempotencyRecord, type ListQuery, RecordStatus } from "../core/store.js";
import { iso, parseDuration, shortDuration } from "../core/time.js";
import { readTrail, type TrailEntry, trailScope } from "../review/index.js";
import { positiveInteger } from "./arguments.js";
import { ExitCode, OptionError, UsageError } from "./errors.js";
import type { CommandContext } from "./main.js";
import { printable, type Styles, styles, table, terminalJson } from "./output.js";
import { redactUrl } from "./redact.js";
import { type OpenedStore, type OpenOptions, openStore, parseStoreUrl, type StoreUrl } from "./store-url.js";

/** `10m`, `2h`, `7d`, `90s`, `500ms`: a duration in milliseconds. */
export function duration(value: string): number {
  const ms = parseDuration(value);
  if (ms === undefined) throw new InvalidArgumentError("must be a duration like 90s, 10m, 2h or 7d");
  return ms;
}

export interface StoreFlags {
  readonly store: string;
  readonly table?: string;
  readonly prefix?: string;
}

/** Add `--store`, `--table` and `--prefix` to a record command. */
export function storeOptions(command: Command): Command {
  return command
    .requiredOption(
      "--store <url>",
      "the store: sqlite://path, postgres://user@host/db, redis://host:6379 or dynamodb://table?region=…",
    )
    .option("--table <name>", "the SQLite, PostgreSQL or DynamoDB table (default: the store's own)")
    .option("--prefix <prefix>", "the Redis key prefix (default: the store's own)");
}

/**
 * The store the flags name, `--table` or `--prefix` applied over the URL's, without opening it. A bad
 * URL, or a flag the kind of store does not take, is a usage error (one line, exit 2).
 */
export function flaggedStoreUrl(flags: StoreFlags): StoreUrl {
  const url = parseStoreUrl(flags.store);
  if (flags.table !== undefined && url.kind === "redis")
    throw new OptionError("--table is for SQLite, PostgreSQL and DynamoDB; Redis takes --prefix");
  if (flags.prefix !== undefined && url.kind !== "redis")
    throw new OptionError("--prefix is for Redis; SQLite, PostgreSQL and DynamoDB take --table");
  return url.kind === "redis"
    ? { ...url, prefix: flags.prefix ?? url.prefix }
    : { ...url, table: flags.table ?? url.table };
}

/**
 * Open the store the flags name; a bad URL, a missing store or table, or an unreachable server is a
 * usage error (one line, exit 2). Nothing is created: `readOnly` also refuses a Redis prefix with no records.
 */
export async function openFlaggedStore(
  flags: StoreFlags | StoreUrl,
  options: Pick<OpenOptions, "readOnly"> = {},
): Promise<OpenedStore> {
  const url = "kind" in flags ? flags : flaggedStoreUrl(flags);
  return openStore(url, { create: false, ...options });
}

/** Run one store operation; a failure becomes one clear line naming the store. */
export async function storeCall<T>(flags: StoreFlags, operation: string, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    const reason = printable(error instanceof Error ? error.message : String(error));
    const shown = printable(redactUrl(flags.store));
    throw new UsageError(`cannot ${operation} the store ${shown}: ${reason}`, { cause: error });
  }
}

interface ListFlags extends StoreFlags {
  readonly tool?: string;
  readonly status?: RecordStatus;
  readonly scope?: string;
  readonly keyPrefix?: string;
  readonly olderThan?: number;
  readonly limit: number;
  readonly includeTrail?: boolean;
  readonly json?: boolean;
}

const statuses = Object.values(RecordStatus);

const listExamples = `
Examples:
  $ idempotool inspect list --store sqlite://./idempotool.db
  $ idempotool inspect list --store postgres://agent@db/agents --table tool_calls --status unknown
  $ idempotool inspect list --store redis://127.0.0.1:6379 --prefix agents:idem: --tool send_email --older-than 2h --json`;

const showExamples = `
Examples:
  $ idempotool inspect show default turn-7-alice --store sqlite://./idempotool.db
  $ idempotool inspect show tenant-a order-42 --store redis://127.0.0.1:6379 --json`;

/** Register `inspect` (with `list` and `show`) on its command. */
export function inspectCommand(command: Command, context: CommandContext): void {
  command
    .description("List or show idempotency records in a store")
    .addHelpText("after", `${listExamples}${showExamples.replace("\nExamples:", "")}`);

  storeOptions(command.command("list"))
    .description("List records in order of scope, then key (not by age), as a table or JSON")
    .option("--tool <name>", "only this tool's records")
    .addOption(new Option("--status <status>", "only records in this status").choices(statuses))
    .option("--scope <scope>", "only this scope")
    .option("--key-prefix <prefix>", "only keys starting with this")
    .option("--older-than <age>", "only records created longer ago than this (10m, 2h, 7d)", duration)
    .option("--limit <n>", "at most this many records, the first in that order", positiveInteger, 100)
    .option(
      "--include-trail",
      `also list the trail of resolutions (scope ${trailScope}), left out by default`,
    )
    .option("--json", "print the records as JSON")
    .addHelpText("after", listExamples)
    .action(async (flags: ListFlags) => {
      const store = await openFlaggedStore(flags, { readOnly: true });
      try {
        const records = await storeCall(flags, "read", () => listRecords(store, flags));
        const out = context.io.stdout;
        if (flags.json) {
          out.write(`${terminalJson(records.map(recordJson))}\n`);
          return;
        }
        if (records.length === 0) {
          out.write("No records match.\n");
          return;
        }
        const s = styles(out);
        const now = Date.now();
        // Keys and scopes come from callers, often models: escaped, so none can drive the terminal.
        const rows = records.map((r) => [
          printable(r.scope),
          printable(r.key),
          printable(r.tool),
          paint(s, r.status),
          String(r.attempts),
          iso(r.createdAt),
          shortDuration(now - r.createdAt),
          note(r, now),
        ]);
        for (const line of table(
          ["scope", "key", "tool", "status", "attempts", "created", "age", "note"],
          rows,
        ))
          out.write(`${line}\n`);
        out.write(
          `${records.length} record${records.length === 1 ? "" : "s"}${records.length === flags.limit ? ` (the first ${flags.limit}; raise --limit for more)` : ""}\n`,
        );
      } finally {
        await store.close();
      }
    });

  storeOptions(command.command("show"))
    .description("Show one record in full, and the trail of its resolutions")
    .argument("<scope>", 'the scope ("default" unless the caller gave one)')
    .argument("<key>", "the idempotency key")
    .option("--json", "print the record (null when there is none) and its trail as JSON")
    .addHelpText("after", showExamples)
    .action(async (scope: string, key: string, flags: StoreFlags & { json?: boolean }) => {
      const store = await openFlaggedStore(flags, { readOnly: true });
      try {
        const [record, trail] = await storeCall(flags, "read", () =>
          Promise.all([store.get({ scope, key }, Date.now()), readTrail({ store, scope, key })]),
        );
        const out = context.io.stdout;
        if (!record) {
          // A key freed by an operator (not-executed) has no record left, only its trail.
          context.io.stderr.write(
            `idempotool: no live record for key ${printable(JSON.stringify(key))} in scope ${printable(JSON.stringify(scope))}\n`,
          );
          context.setExitCode(ExitCode.findings);
          if (flags.json && trail.length > 0) out.write(`${terminalJson({ record: null, trail })}\n`);
          else if (trail.length > 0)
            for (const line of trailLines(trail, styles(out))) out.write(`${line}\n`);
          return;
        }
        if (flags.json) {
          out.write(`${terminalJson({ ...recordJson(record), trail })}\n`);
          return;
        }
        const s = styles(out);
        const json = recordJson(record);
        for (const [name, value] of Object.entries(json)) {
          const text =
            name === "status"
              ? paint(s, String(value))
              : typeof value === "string"
                ? printable(value)
                : terminalJson(value);
          out.write(`${s.bold(name.padEnd(16))}${text}\n`);
        }
        const resolved = resolvedNote(record);
        if (resolved !== undefined) out.write(`${s.bold("resolved by".padEnd(16))}${resolved}\n`);
        for (const line of trailLines(trail, s)) out.write(`${line}\n`);
      } finally {
        await store.close();
      }
    });
}

/**
 * A completed record's note of the operator who recorded its outcome, when it has one: the name, time and
 * evidence as repeats report them (`resolved_by_operator`). A sealed note opens only with the tool's keys.
 */
function resolvedNote(record: IdempotencyRecord): string | undefined {
  if (record.status !== RecordStatus.completed || record.error === null) return undefined;
  if (isSealed(record.error))
    return "sealed (the tool's encryption opens it; the trail below says who and when)";
  let note: ReturnType<typeof decodeCompletedNote>;
  try {
    note = decodeCompletedNote(record.error);
  } catch {
    return undefined;
  }
  const r = note.resolution;
  return r ? `${printable(r.by)} at ${printable(r.at)}: ${printable(r.evidence)}` : undefined;
}

/** The trail of a record's resolutions, oldest first: who, when, as what, on what evidence, how it ended. */
export function trailLines(trail: readonly TrailEntry[], s: Styles): string[] {
  if (trail.length === 0) return [];
  const lines = ["", s.bold(`trail (${trail.length} resolution${trail.length === 1 ? "" : "s"})`)];
  for (const entry of trail) {
    const as = entry.as === "not_executed" ? "not-executed" : entry.as;
    const state =
      entry.state === "applied" ? s.green("applied") : s.yellow("interrupted: look at the record");
    lines.push(
      `  ${printable(entry.at)}  ${printable(entry.by)}  as ${as}  via ${printable(entry.via)}  ${state}`,
      `    evidence: ${printable(entry.evidence)}`,
      `    before: ${printable(entry.before.status)}, attempt ${entry.before.attempts}, version ${printable(entry.before.version)}`,
    );
  }
  return lines;
}

async function listRecords(store: OpenedStore, flags: ListFlags): Promise<IdempotencyRecord[]> {
  const query: ListQuery = {
    ...(flags.tool !== undefined ? { tool: flags.tool } : {}),
    ...(flags.status !== undefined ? { status: flags.status } : {}),
    ...(flags.scope !== undefined ? { scope: flags.scope } : {}),
    ...(flags.keyPrefix !== undefined ? { keyPrefix: flags.keyPrefix } : {}),
    ...(flags.olderThan !== undefined ? { createdBefore: Date.now() - flags.olderThan } : {}),
  };
  // The trail's records are the operators' notes, not calls: only asked for, or when their scope is named.
  const withTrail = flags.includeTrail === true || flags.scope === trailScope;
  const records: IdempotencyRecord[] = [];
  let cursor: string | undefined;
  do {
    const page = await store.list({
      ...query,
      limit: Math.min(flags.limit - records.length, 1000),
      ...(cursor ? { cursor } : {}),
    });
    records.push(...(withTrail ? page.records : page.records.filter((r) => r.scope !== trailScope)));
    cursor = page.nextCursor;
  } while (cursor !== undefined && records.length < flags.limit);
  return records.slice(0, flags.limit);
}

/** A record for people and for `--json`: times in ISO-8601, the result and failure parsed. */
export function recordJson(r: IdempotencyRecord): Record<string, unknown> {
  const parsed = (text: string | null) => {
    try {
      return decodeResult(text) ?? null;
    } catch {
      return text;
    }
  };
  return {
    scope: r.scope,
    key: r.key,
    tool: r.tool,
    status: r.status,
    fingerprint: r.fingerprint,
    attempts: r.attempts,
    createdAt: iso(r.createdAt),
    updatedAt: iso(r.updatedAt),
    leaseExpiresAt: iso(r.leaseExpiresAt),
    expiresAt: iso(r.expiresAt),
    result: parsed(r.result),
    error: parsed(r.error),
  };
}

export function paint(s: Styles, status: string): string {
  if (status === RecordStatus.completed) return s.green(status);
  if (status === RecordStatus.failed) return s.red(status);
  if (status === RecordStatus.unknown) return s.yellow(status);
  return status;
}

function note(r: IdempotencyRecord, now: number): string {
  // An expired record no longer counts: the next claim of its key starts afresh, and purge removes it.
  if (r.expiresAt <= now) return `expired ${shortDuration(now - r.expiresAt)} ago; purge removes it`;
  if (r.status === RecordStatus.unknown) return "needs a verify hook or an operator";
  if (r.status === RecordStatus.inProgress) {
    return r.leaseExpiresAt <= now
      ? "stale: lease passed"
      : `lease ${shortDuration(r.leaseExpiresAt - now)} left`;
  }
  return `expires in ${shortDuration(r.expiresAt - now)}`;
}
