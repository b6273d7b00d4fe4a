/**
 * `idempotool resolve`: record what a person found out about a record that needs one. One record by
 * scope and key (`--as`, or `--verify` to ask the tool's hook now), or every record a filter names
 * (`--tool`, `--scope`, `--older-than`), after a dry-run list and a confirmation. Each resolution goes
 * through `resolveRecord()` (src/review): fenced, refused if the record changed since it was read, and
 * kept in the trail with who, when and on what evidence.
 */
import { readFileSync } from "node:fs";
import { userInfo } from "node:os";
import { type Command, Option } from "commander";
import { refuseUnconfirmable } from "./confirm.js";
import { OptionError } from "./errors.js";
import { openFlaggedStore } from "./inspect-command.js";
import type { CommandContext } from "./main.js";
import { loadHooks } from "./reconcile-command.js";
import { resolveBulk } from "./resolve-bulk.js";
import { type Resolution, type ResolveFlags, resolveOne } from "./resolve-one.js";
import { resolveByVerify } from "./resolve-verify.js";
import { queueOptions } from "./review-command.js";

const examples = `
What each resolution means (read docs/review.md first):
  completed     the effect happened; every repeat replays the --result you give (for an MCP tool,
                give it as the tool returns it: {"content":[...]})
  not-executed  the effect never happened; the key is freed and the next call runs the tool again.
                If the evidence is wrong, the effect happens twice: it asks first (--yes in scripts)
  failed        it failed for good; every repeat gets --error back
The evidence is kept in plaintext in the store's trail for 366 days: never put a secret in it.

Examples:
  $ idempotool resolve default turn-7-alice --store sqlite://./idempotool.db --as completed \\
      --result '{"messageId":"m-81"}' --evidence "provider log: m-81 delivered 10:02 UTC"
  $ idempotool resolve tenant-a order-42 --store postgres://agent@db/agents --as not-executed \\
      --evidence "no charge in the Stripe dashboard for this key" --expect-version 3f2a9c0d11e84b57
  $ idempotool resolve default turn-7-alice --store sqlite://./idempotool.db --hooks ./hooks.js \\
      --verify --apply
  $ idempotool resolve --store sqlite://./idempotool.db --as not-executed --tool send_email \\
      --scope tenant-a --older-than 2h --evidence "provider outage, nothing sent" --dry-run

Exit codes: 0 resolved (or nothing to do); 1 refused because the record changed or needs no
resolution, or a verify hook could not say; 2 it could not run (bad usage, the store, no
confirmation).`;

/** Register `resolve` on its command. */
export function resolveCommand(command: Command, context: CommandContext): void {
  queueOptions(
    command,
    1000,
    "a module exporting `tools` (as for reconcile): their verify hooks and storage options (encryption)",
    "by filter: ",
  )
    .description("Record what a person found out about records that need one (see idempotool review)")
    .argument("[scope]", "the record's scope (with <key>; leave both out to resolve by filter)")
    .argument("[key]", "the record's idempotency key")
    .addOption(
      new Option("--as <outcome>", "what happened: completed, not-executed or failed").choices([
        "completed",
        "not-executed",
        "failed",
      ]),
    )
    .option("--result <json>", "with --as completed: the result repeats replay, as JSON or @file")
    .option("--error <message>", "with --as failed: the error repeats get back")
    .option("--evidence <text>", "what you relied on (kept in plaintext in the trail)")
    .option("--by <name>", "who resolves it (default: your OS user)")
    .option("--expect-version <v>", "refuse if the record changed since `review --json` showed this version")
    .option("--verify", "ask the tool's verify hook (from --hooks) now, and show its answer")
    .option("--apply", "with --verify: resolve the record as the hook answered")
    .option("--dry-run", "by filter: list what would be resolved, and change nothing")
    .option("--yes", "do not ask for confirmation (for scripts)")
    .option(
      "--worker-gone",
      "you know the worker that held a passed lease is gone: free or fail its record without the 10-minute wait",
    )
    .addHelpText("after", examples)
    .action(async (scope: string | undefined, key: string | undefined, flags: ResolveFlags) => {
      const io = context.io;
      if ((scope === undefined) !== (key === undefined)) {
        throw new OptionError(
          "give both <scope> and <key> to resolve one record, or neither to resolve by filter",
        );
      }
      const one = scope !== undefined && key !== undefined ? { scope, key } : undefined;
      checkFlags(flags, one !== undefined);
      const tools = flags.hooks !== undefined ? await loadHooks(flags.hooks) : undefined;
      if (one && flags.verify) {
        const store = await openFlaggedStore(flags);
        try {
          await resolveByVerify(context, store, flags, one, tools ?? {}, byOf(flags));
        } finally {
          await store.close();
        }
        return;
      }
      const resolution = resolutionOf(flags);
      if (resolution.as === "not_executed") {
        refuseUnconfirmable(
          io,
          flags.yes || flags.dryRun,
          "Resolving as not-executed frees the key, so the next call runs the tool again (a second effect " +
            "if the evidence is wrong): it",
        );
      } else if (!one) {
        refuseUnconfirmable(io, flags.yes || flags.dryRun, "Resolving by filter");
      }
      const store = await openFlaggedStore(flags);
      try {
        if (one) await resolveOne(context, store, flags, one, resolution, tools);
        else await resolveBulk(context, store, flags, resolution, tools);
      } finally {
        await store.close();
      }
    });
}

/** Refuse flags that do not go together, before anything is opened. */
function checkFlags(flags: ResolveFlags, one: boolean): void {
  const given = (name: keyof ResolveFlags) => flags[name] !== undefined;
  if (flags.verify) {
    if (!one) throw new OptionError("--verify resolves one record: give its <scope> and <key>");
    if (!given("hooks"))
      throw new OptionError("--verify needs --hooks <module>, the module with the tool's verify hook");
    for (const name of ["as", "result", "error"] as const) {
      if (given(name))
        throw new OptionError(
          `--verify takes no --${name}: the hook's answer decides (add --apply to act on it)`,
        );
    }
  } else {
    if (flags.apply) throw new OptionError("--apply goes with --verify (without it, --as says what to do)");
    if (!given("as"))
      throw new OptionError(
        "say what happened with --as completed, not-executed or failed (or ask the hook with --verify)",
      );
    if (!given("evidence"))
      throw new OptionError('say what you relied on with --evidence "<text>": it is the point of the trail');
    if (flags.as === "completed" && !given("result")) {
      throw new OptionError(
        "--as completed needs --result <json|@file>: the result every repeat will replay",
      );
    }
    if (flags.as !== "completed" && given("result"))
      throw new OptionError("--result goes with --as completed");
    if (flags.as === "failed" && !given("error")) {
      throw new OptionError("--as failed needs --error <message>: the error every repeat will get back");
    }
    if (flags.as !== "failed" && given("error")) throw new OptionError("--error goes with --as failed");
  }
  if (one) {
    for (const [name, flag] of [
      ["tool", "--tool"],
      ["scope", "--scope"],
      ["keyPrefix", "--key-prefix"],
      ["olderThan", "--older-than"],
      ["dryRun", "--dry-run"],
    ] as const) {
      if (given(name)) {
        throw new OptionError(`${flag} is for resolving by filter; leave out <scope> and <key> to use it`);
      }
    }
  } else {
    if (given("expectVersion")) {
      throw new OptionError(
        "--expect-version is for one record; by filter, each record is held to the version listed",
      );
    }
    const missing = (["tool", "scope", "olderThan"] as const).filter((name) => !given(name));
    if (missing.length > 0) {
      throw new OptionError(
        "to resolve by filter, give --tool, --scope and --older-than (or <scope> and <key> for one record); " +
          `missing: ${missing.map((name) => (name === "olderThan" ? "--older-than" : `--${name}`)).join(", ")}`,
      );
    }
  }
  if (flags.evidence !== undefined && flags.evidence.trim() === "") {
    throw new OptionError("--evidence must say what you relied on, not be empty");
  }
}

/** The resolution the flags describe, the result parsed: a bad one is refused before the store is opened. */
function resolutionOf(flags: ResolveFlags): Resolution {
  const by = byOf(flags);
  const evidence = flags.evidence!;
  if (flags.as === "completed") return { as: "completed", result: resultOf(flags.result!), evidence, by };
  if (flags.as === "failed") return { as: "failed", error: flags.error!, evidence, by };
  return { as: "not_executed", evidence, by };
}

/** `--result '{"messageId":"m-81"}'` or `--result @result.json`. */
function resultOf(text: string): unknown {
  let json = text;
  if (text.startsWith("@")) {
    try {
      json = readFileSync(text.slice(1), "utf8");
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      throw new OptionError(`--result ${text}: cannot read ${text.slice(1)}: ${reason}`);
    }
  }
  try {
    return JSON.parse(json) as unknown;
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new OptionError(
      `--result must be JSON (quote it for the shell: --result '{"messageId":"m-81"}') or @file: ${reason}`,
    );
  }
}

/** `--by`, else the OS user, else $USER. */
export function byOf(flags: { readonly by?: string }): string {
  if (flags.by !== undefined) {
    if (flags.by.trim() === "") throw new OptionError("--by must name who resolves it, not be empty");
    return flags.by;
  }
  let name: string | undefined;
  try {
    name = userInfo().username;
  } catch {
    // No passwd entry for this uid (a container): the environment may still say.
  }
  name ||= process.env.USER;
  if (!name) throw new OptionError("cannot tell who you are from the OS: say it with --by <name>");
  return name;
}
