#!/usr/bin/env node
/**
 * The `idempotool` command line. Each command is configured in its own file on a subcommand made
 * here, so they all inherit the same behaviour: the global `--debug` flag, one error handler mapping
 * failures to exit 2 with one clear line (errors.ts), colour only on a TTY (output.ts), progress on
 * long work (progress.ts) and store URLs (store-url.ts). A new command (inspect, purge, reconcile)
 * adds one `…Command(program.command("name"), context)` line below.
 */
import { realpathSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Command } from "commander";
import { auditCommand } from "./audit-command.js";
import { chaosCommand } from "./chaos-command.js";
import { runDemo } from "./demo.js";
import { ExitCode, reportError } from "./errors.js";
import { inspectCommand } from "./inspect-command.js";
import type { OutputStream } from "./output.js";
import { purgeCommand } from "./purge-command.js";
import { reconcileCommand } from "./reconcile-command.js";

/** Where a command writes. Tests pass their own. */
export interface CliIo {
  readonly stdout: NodeJS.WritableStream & OutputStream;
  readonly stderr: NodeJS.WritableStream & OutputStream;
}

/** What every command gets. */
export interface CommandContext {
  readonly io: CliIo;
  /** The exit code to end with; the highest one set wins. */
  setExitCode(code: ExitCode): void;
}

const examples = `
Examples:
  $ idempotool demo
  $ idempotool audit tools.json
  $ idempotool audit --mcp "npx -y @modelcontextprotocol/server-memory"
  $ idempotool chaos ./src/tools.ts#sendEmail --args '{"to":"alice@example.com"}'

Exit codes: 0 all good; 1 the command found a problem (a tool without a key, a double effect);
2 it could not run (bad usage or input, an unreachable server or store). --debug prints stack traces.`;

export function buildProgram(context: CommandContext): Command {
  const { io } = context;
  const program = new Command()
    .name("idempotool")
    .description("Make the side-effectful tools of LLM agents safe to call twice.")
    .option("--debug", "print stack traces and causes when something fails")
    .showHelpAfterError()
    .exitOverride()
    .configureOutput({
      writeOut: (text) => io.stdout.write(text),
      writeErr: (text) => io.stderr.write(text),
    })
    .addHelpText("after", examples);

  program
    .command("demo")
    .description("Show an agent's send_email meeting every repeat source, on a fresh embedded SQLite file")
    .option("--dir <path>", "where to put the SQLite file and the outbox (default: a fresh temporary folder)")
    .addHelpText(
      "after",
      "\nExamples:\n  $ idempotool demo\n  $ idempotool demo --dir ./demo-run\n\nExits 0 only if no email was sent twice.",
    )
    .action(async (options: { dir?: string }) => {
      const { ok } = await runDemo({
        ...(options.dir ? { dir: options.dir } : {}),
        write: (line) => io.stdout.write(`${line}\n`),
      });
      context.setExitCode(ok ? ExitCode.ok : ExitCode.findings);
    });

  auditCommand(program.command("audit"), context);
  chaosCommand(program.command("chaos"), context);
  inspectCommand(program.command("inspect"), context);
  purgeCommand(program.command("purge"), context);
  reconcileCommand(program.command("reconcile"), context);
  return program;
}

/**
 * Run the command line on `argv` (as `process.argv`) and return the exit code; never throws.
 * @example
 * process.exitCode = await runCli(["node", "idempotool", "audit", "tools.json"]);
 */
export async function runCli(
  argv: readonly string[],
  io: CliIo = { stdout: process.stdout, stderr: process.stderr },
): Promise<ExitCode> {
  let exitCode: ExitCode = ExitCode.ok;
  const program = buildProgram({
    io,
    setExitCode: (code) => {
      exitCode = Math.max(exitCode, code) as ExitCode;
    },
  });
  try {
    await program.parseAsync([...argv]);
  } catch (error) {
    // Parsing may fail before commander has read --debug, so look for it in argv itself.
    return reportError(error, argv.includes("--debug"), (text) => io.stderr.write(text));
  }
  return exitCode;
}

function isEntryPoint(): boolean {
  const script = process.argv[1];
  if (!script) return false;
  try {
    return realpathSync(script) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (isEntryPoint()) {
  // `idempotool audit … | head`: a reader that stops early is not an error.
  process.stdout.on("error", (error: NodeJS.ErrnoException) => {
    if (error.code === "EPIPE") process.exit(process.exitCode ?? 0);
    throw error;
  });
  process.exitCode = await runCli(process.argv);
}
