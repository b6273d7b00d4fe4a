#!/usr/bin/env node
/**
 * The `idempotool` command line. Each command is configured in its own file on a subcommand made
 * here, so they all inherit the same behaviour: the global `--debug` flag, one error handler mapping
 * failures to exit 2 with one clear line (errors.ts), colour only on a TTY (output.ts), progress on
 * long work (progress.ts) and store URLs (store-url.ts). A new command (inspect, purge, reconcile)
 * adds one `…Command(program.command("name"), context)` line below.
 */
import { readFileSync, realpathSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Command } from "commander";
import { auditCommand } from "./audit-command.js";
import { chaosCommand } from "./chaos-command.js";
import { consoleCommand } from "./console/console-command.js";
import { runDemo } from "./demo.js";
import { ExitCode, reportError } from "./errors.js";
import { inspectCommand } from "./inspect-command.js";
import { type OutputStream, printable } from "./output.js";
import { proxyCommand } from "./proxy-command.js";
import { purgeCommand } from "./purge-command.js";
import { reconcileCommand } from "./reconcile-command.js";
import { scrub, secretsIn } from "./redact.js";
import { resolveCommand } from "./resolve-command.js";
import { reviewCommand } from "./review-command.js";

/** Where a command writes, and what it reads as standard input. Tests pass their own. */
export interface CliIo {
  readonly stdout: NodeJS.WritableStream & OutputStream;
  readonly stderr: NodeJS.WritableStream & OutputStream;
  /** What `audit -` reads; `process.stdin` when not given (and only then touched). */
  readonly stdin?: NodeJS.ReadableStream;
}

/** What every command gets. */
export interface CommandContext {
  readonly io: CliIo;
  /** The exit code to end with; the highest one set wins. */
  setExitCode(code: ExitCode): void;
  /** Secrets from the arguments (store passwords), scrubbed from every error before it is printed. */
  readonly secrets?: readonly string[];
}

const examples = `
Examples:
  $ idempotool demo
  $ idempotool audit tools.json
  $ idempotool audit --mcp "npx -y @modelcontextprotocol/server-memory"
  $ idempotool chaos ./src/tools.ts#sendEmail --args '{"to":"alice@example.com"}'
  $ idempotool proxy -- npx -y @modelcontextprotocol/server-filesystem ./notes

Exit codes: 0 all good; 1 the command found a problem (a tool without a key, a double effect);
2 it could not run (bad usage or input, an unreachable server or store). --debug prints stack traces.`;

/**
 * The version in idempotool's package.json, read as a file: a JSON import needs an import attribute some
 * runtimes refuse. From dist/cli/main.js and src/cli/main.ts alike, the package's root is two folders up.
 */
export function packageVersion(): string {
  try {
    const manifest = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as {
      version?: unknown;
    };
    if (typeof manifest.version === "string") return manifest.version;
  } catch {
    // Not where a package keeps it (a bundle): say so rather than fail every command.
  }
  return "unknown";
}

export function buildProgram(context: CommandContext): Command {
  const { io } = context;
  const secrets = context.secrets ?? [];
  const program = new Command()
    .name("idempotool")
    .description("Make the side-effectful tools of LLM agents safe to call twice.")
    .version(packageVersion(), "-V, --version", "print idempotool's version")
    .option("--debug", "print stack traces and causes when something fails")
    .exitOverride()
    .configureOutput({
      writeOut: (text) => io.stdout.write(text),
      writeErr: (text) => io.stderr.write(scrub(text, secrets)),
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
  consoleCommand(program.command("console"), context);
  inspectCommand(program.command("inspect"), context);
  proxyCommand(program.command("proxy"), context);
  purgeCommand(program.command("purge"), context);
  reconcileCommand(program.command("reconcile"), context);
  resolveCommand(program.command("resolve"), context);
  reviewCommand(program.command("review"), context);
  for (const command of commandTree(program)) {
    command.configureOutput({ outputError: (text, write) => write(usageLine(text, commandPath(command))) });
  }
  return program;
}

function commandTree(command: Command): Command[] {
  return [command, ...command.commands.flatMap(commandTree)];
}

/** `idempotool inspect list`. */
export function commandPath(command: Command): string {
  const names: string[] = [];
  for (let c: Command | null = command; c; c = c.parent) names.unshift(c.name());
  return names.join(" ");
}

/**
 * A usage error commander found, as the one line every command prints:
 * `idempotool: <what went wrong>; see idempotool <command> --help`.
 * @example
 * usageLine("error: option '--limit <n>' argument 'abc' is invalid. must be a positive whole number", "idempotool inspect list");
 * // 'idempotool: --limit must be a positive whole number, not "abc"; see idempotool inspect list --help\n'
 */
export function usageLine(text: string, command: string): string {
  let what = text
    .replace(/^error:\s*/, "")
    .replace(/\s*\n\s*/g, " ")
    .trim();
  const invalid = /^option '(-[^\s',]+)[^']*' argument '(.*)' is invalid\. (.*)$/s.exec(what);
  if (invalid) {
    const [, flag, value, reason] = invalid as unknown as [string, string, string, string];
    const choices = /^Allowed choices are (.*?)\.?$/s.exec(reason);
    const rule = choices ? `must be one of ${choices[1]}` : reason.replace(/\.$/, "");
    what = `${flag} ${rule}, not ${JSON.stringify(value)}`;
  }
  return `idempotool: ${printable(what)}; see ${command} --help\n`;
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
  const secrets = secretsIn(argv.slice(2));
  const program = buildProgram({
    io,
    secrets,
    setExitCode: (code) => {
      exitCode = Math.max(exitCode, code) as ExitCode;
    },
  });
  let running = "idempotool";
  program.hook("preAction", (_program, command) => {
    running = commandPath(command);
  });
  try {
    await program.parseAsync([...argv]);
  } catch (error) {
    // Parsing may fail before commander has read --debug, so look for it in argv itself. A driver's
    // message or a stack may hold what the arguments held, so secrets are scrubbed from it all.
    const write = (text: string) => io.stderr.write(scrub(text, secrets));
    return reportError(error, argv.includes("--debug"), write, running);
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
