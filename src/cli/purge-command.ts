/**
 * `idempotool purge`: remove expired records in batches until none is left, with a count per batch
 * (a bar on a TTY, a line per batch otherwise, on stderr) and the total on stdout.
 */
import cliProgress from "cli-progress";
import type { Command } from "commander";
import { positiveInteger } from "./arguments.js";
import { openFlaggedStore, type StoreFlags, storeCall, storeOptions } from "./inspect-command.js";
import type { CommandContext } from "./main.js";
import { styles } from "./output.js";

interface PurgeFlags extends StoreFlags {
  readonly batch: number;
  readonly json?: boolean;
}

const examples = `
Only records past their expiry go: live records, in progress or settled, are never touched.
The cost is proportional to what expired, batch by batch.

Examples:
  $ idempotool purge --store sqlite://./idempotool.db
  $ idempotool purge --store postgres://agent@db/agents --table tool_calls --batch 5000
  $ idempotool purge --store redis://127.0.0.1:6379 --prefix agents:idem: --json`;

/** Register `purge` on its command. */
export function purgeCommand(command: Command, context: CommandContext): void {
  storeOptions(command)
    .description("Remove expired records, in batches, with counts and progress")
    .option("--batch <n>", "records removed per store call", positiveInteger, 1000)
    .option("--json", "print the counts as JSON")
    .addHelpText("after", examples)
    .action(async (flags: PurgeFlags) => {
      const store = await openFlaggedStore(flags);
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
      const out = context.io.stdout;
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
