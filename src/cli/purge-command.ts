/**
 * `idempotool purge`: remove expired records in batches until none is left, with a count per batch
 * (a bar on a TTY, a line per batch otherwise, on stderr) and the total on stdout. `--dry-run` counts
 * what would go and removes nothing. Redis deletes each record itself when it expires, so on Redis there is
 * nothing to purge, and purge says so.
 */
import cliProgress from "cli-progress";
import type { Command } from "commander";
import type { IdempotencyRecord } from "../core/store.js";
import { positiveInteger } from "./arguments.js";
import {
  flaggedStoreUrl,
  openFlaggedStore,
  type StoreFlags,
  storeCall,
  storeOptions,
} from "./inspect-command.js";
import type { CommandContext } from "./main.js";
import { styles } from "./output.js";
import type { OpenedStore } from "./store-url.js";

interface PurgeFlags extends StoreFlags {
  readonly batch: number;
  readonly dryRun?: boolean;
  readonly json?: boolean;
}

/** What purge says on Redis, in place of a count. */
export const redisExpiresItself =
  "Redis expires records itself: each record's key carries its expiry, and Redis deletes the key when it " +
  "passes. There is nothing to purge.";

const examples = `
Only records past their expiry go: live records, in progress or settled, are never touched.
The cost is proportional to what expired, batch by batch. --dry-run reads every record to count
the expired ones, and removes none. On Redis there is nothing to purge: Redis expires records itself.

Examples:
  $ idempotool purge --store sqlite://./idempotool.db
  $ idempotool purge --store postgres://agent@db/agents --table tool_calls --batch 5000
  $ idempotool purge --store 'dynamodb://idempotool_records?region=eu-west-1' --dry-run --json`;

/** Register `purge` on its command. */
export function purgeCommand(command: Command, context: CommandContext): void {
  storeOptions(command)
    .description("Remove expired records, in batches, with counts and progress")
    .option("--batch <n>", "records removed per store call", positiveInteger, 1000)
    .option("--dry-run", "count the expired records that would go, and remove none")
    .option("--json", "print the counts as JSON")
    .addHelpText("after", examples)
    .action(async (flags: PurgeFlags) => {
      const url = flaggedStoreUrl(flags);
      const out = context.io.stdout;
      if (url.kind === "redis") {
        // The store's purge under the server's clock finds nothing by design: nothing to connect for.
        if (flags.json) {
          const counts = flags.dryRun ? { dryRun: true, expired: 0 } : { deleted: 0, batches: 0 };
          out.write(`${JSON.stringify({ ...counts, note: redisExpiresItself })}\n`);
        } else out.write(`${redisExpiresItself}\n`);
        return;
      }
      const store = await openFlaggedStore(url);
      if (flags.dryRun) {
        let expired: number;
        try {
          expired = await countExpired(store, flags, context);
        } finally {
          await store.close();
        }
        if (flags.json) {
          out.write(`${JSON.stringify({ dryRun: true, expired })}\n`);
          return;
        }
        const s = styles(out);
        out.write(
          `${s.yellow("dry run, nothing removed (run without --dry-run to remove): ")}` +
            `${s.bold(String(expired))} expired record${expired === 1 ? "" : "s"} would be removed\n`,
        );
        return;
      }
      const err = context.io.stderr;
      const bar =
        err.isTTY === true
          ? new cliProgress.SingleBar(
              { format: "purging {bar} {value} removed, batch {batch}", stream: err, clearOnComplete: true },
              cliProgress.Presets.shades_classic,
            )
          : undefined;
      let deleted = 0;
      let batches = 0;
      try {
        bar?.start(flags.batch, 0, { batch: 0 });
        for (;;) {
          const now = Date.now();
          const batch = await storeCall(flags, "purge", () => store.purge({ now, limit: flags.batch }));
          batches += 1;
          deleted += batch.deleted;
          if (bar) {
            bar.setTotal(deleted + flags.batch);
            bar.update(deleted, { batch: batches });
          } else {
            err.write(`purge: batch ${batches} removed ${batch.deleted} (${deleted} in all)\n`);
          }
          if (batch.deleted === 0) break;
        }
      } finally {
        bar?.stop();
        await store.close();
      }
      if (flags.json) {
        out.write(`${JSON.stringify({ deleted, batches })}\n`);
        return;
      }
      const s = styles(out);
      out.write(
        `${s.bold(String(deleted))} expired record${deleted === 1 ? "" : "s"} removed in ${batches} batch${batches === 1 ? "" : "es"}\n`,
      );
    });
}

/**
 * How many records `purge` would remove now: the store's own list, page by page, counting those whose
 * expiry has passed by the clock its purge judges by. Reads only.
 */
async function countExpired(store: OpenedStore, flags: PurgeFlags, context: CommandContext): Promise<number> {
  const err = context.io.stderr;
  const bar =
    err.isTTY === true
      ? new cliProgress.SingleBar(
          { format: "counting {value} records read, {expired} expired", stream: err, clearOnComplete: true },
          cliProgress.Presets.shades_classic,
        )
      : undefined;
  const cutoff = await storeCall(flags, "read", async () =>
    store.purgeCutoff ? store.purgeCutoff() : Date.now(),
  );
  let read = 0;
  let expired = 0;
  let cursor: string | undefined;
  try {
    bar?.start(0, 0, { expired: 0 });
    do {
      const after = cursor;
      const page = await storeCall(flags, "read", () =>
        store.list({ limit: 1000, ...(after !== undefined ? { cursor: after } : {}) }),
      );
      read += page.records.length;
      expired += page.records.filter((record: IdempotencyRecord) => record.expiresAt <= cutoff).length;
      cursor = page.nextCursor;
      if (bar) {
        bar.setTotal(read);
        bar.update(read, { expired });
      } else {
        err.write(`purge --dry-run: read ${read} records, ${expired} expired\n`);
      }
    } while (cursor !== undefined);
  } finally {
    bar?.stop();
  }
  return expired;
}
