#!/usr/bin/env node
/**
 * The `idempotool` command line.
 */
import { Command } from "commander";
import { runDemo } from "./demo.js";

export function buildProgram(): Command {
  const program = new Command()
    .name("idempotool")
    .description("Make the side-effectful tools of LLM agents safe to call twice.")
    .showHelpAfterError();

  program
    .command("demo")
    .description("Show an agent's send_email meeting every repeat source, on a fresh embedded SQLite file")
    .option("--dir <path>", "where to put the SQLite file and the outbox (default: a fresh temporary folder)")
    .addHelpText(
      "after",
      "\nExamples:\n  $ idempotool demo\n  $ idempotool demo --dir ./demo-run\n\nExits 0 only if no email was sent twice.",
    )
    .action(async (options: { dir?: string }) => {
      const { ok } = await runDemo(options.dir ? { dir: options.dir } : {});
      process.exitCode = ok ? 0 : 1;
    });

  return program;
}

await buildProgram().parseAsync(process.argv);
