/**
 * `idempotool audit`: classify tool definitions read from a JSON file or an MCP server over stdio,
 * print a table (or JSON), and exit 1 when a side-effectful tool takes no idempotency key.
 */
import { readFileSync } from "node:fs";
import { type Command, Option } from "commander";
import { type AuditReport, auditTools, type ToolAudit, Verdict } from "../audit/audit-tools.js";
import { ToolClass } from "../audit/classify.js";
import { listMcpTools } from "../audit/list-mcp-tools.js";
import { Mechanism, ToolLayer } from "../audit/mechanism.js";
import { commaList, milliseconds } from "./arguments.js";
import { ExitCode, UsageError } from "./errors.js";
import type { CommandContext } from "./main.js";
import { loadOptional } from "./optional-packages.js";
import { printableLine, type Styles, styles, table } from "./output.js";
import { parseShellCommand, shellQuote } from "./shell-words.js";

interface AuditFlags {
  readonly mcp?: string;
  readonly json?: boolean;
  readonly strict?: boolean;
  readonly verbose?: boolean;
  readonly ignore: string[];
  readonly layer?: ToolLayer;
  readonly timeout: number;
}

const examples = `
Reads OpenAI (Chat Completions and Responses), Anthropic and MCP tool definitions, mixed freely: an array,
{ "tools": [...] } (an MCP tools/list result or a request body), or { "result": { "tools": [...] } }.

Examples:
  $ idempotool audit tools.json
  $ idempotool audit --mcp "npx -y @modelcontextprotocol/server-memory"
  $ idempotool audit --mcp "MEMORY_FILE_PATH=/tmp/memory.jsonl node ./server.js" --json
  $ cat tools.json | idempotool audit -
  $ idempotool audit tools.json --strict --ignore delete_draft,archive_thread

Exit codes: 0 every side-effectful tool takes an idempotency key; 1 one does not (or, with --strict, a
tool warned); 2 the tools could not be read.`;

/** Register `audit` on its command. */
export function auditCommand(command: Command, context: CommandContext): void {
  command
    .description(
      "Find side-effectful tools that take no idempotency key, and the mechanism (OP-1…OP-8) each should use",
    )
    .argument("[file]", 'a JSON file of tool definitions ("-" reads standard input)')
    .option("--mcp <command>", "start this MCP server over stdio and audit the tools it lists")
    .option("--json", "print the report as JSON")
    .option("--strict", "fail on warnings too: optional keys, idempotentHint alone, unclear tools")
    .option(
      "--ignore <names>",
      "report these tools but never fail on them (comma-separated, repeatable)",
      commaList,
      [],
    )
    .addOption(
      new Option(
        "--layer <layer>",
        "how the tools reach the model (default: mcp for MCP tools, else function-calling)",
      ).choices(Object.values(ToolLayer)),
    )
    .option("--verbose", "explain every tool, not only those that warn or fail")
    .option("--timeout <ms>", "how long the MCP server may take to answer", milliseconds, 30_000)
    .addHelpText("after", examples)
    .action(async (file: string | undefined, flags: AuditFlags) => {
      const { tools, source } = await readTools(file, flags, () => context.io.stdin ?? process.stdin);
      const report = auditTools(tools, {
        ...(flags.layer ? { layer: flags.layer } : {}),
        ignore: flags.ignore,
        strict: flags.strict === true,
      });
      const out = context.io.stdout;
      if (flags.json) out.write(`${JSON.stringify({ source, ...report }, null, 2)}\n`);
      // Tool names and descriptions come from the server: escaped, so none can drive the terminal.
      else
        for (const line of render(report, source, flags, styles(out))) out.write(`${printableLine(line)}\n`);
      context.setExitCode(report.ok ? ExitCode.ok : ExitCode.findings);
    });
}

async function readTools(
  file: string | undefined,
  flags: AuditFlags,
  stdin: () => NodeJS.ReadableStream,
): Promise<{ tools: unknown; source: string }> {
  if (flags.mcp !== undefined && file !== undefined) {
    throw new UsageError("give either a file or --mcp <command>, not both");
  }
  if (flags.mcp !== undefined) {
    const { command, args, env } = parseShellCommand(flags.mcp);
    await loadOptional(
      "idempotool audit --mcp",
      ["@modelcontextprotocol/sdk"],
      () => import("@modelcontextprotocol/sdk/client/stdio.js"),
    );
    let listed: Awaited<ReturnType<typeof listMcpTools>>;
    try {
      listed = await listMcpTools({ command, args, env }, { timeoutMs: flags.timeout });
    } catch (error) {
      throw new UsageError(error instanceof Error ? error.message : String(error), { cause: error });
    }
    const name = listed.server ? `${listed.server.name} ${listed.server.version}` : "an MCP server";
    return { tools: { tools: listed.tools }, source: `${name} over stdio (${flags.mcp})` };
  }
  if (file === undefined) throw new UsageError("give a JSON file of tool definitions, or --mcp <command>");
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(file)) {
    throw new UsageError(
      `audit reads a local file or standard input, not a URL (${file}): try curl -s '${file}' | idempotool audit -`,
    );
  }
  const name = file === "-" ? "standard input" : file;
  let text: string;
  try {
    text = file === "-" ? await readAll(stdin()) : readFileSync(file, "utf8");
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new UsageError(`cannot read ${name}: ${code === "ENOENT" ? "no such file" : String(error)}`, {
      cause: error,
    });
  }
  try {
    return { tools: JSON.parse(text) as unknown, source: name };
  } catch (error) {
    throw new UsageError(`${name} is not JSON: ${(error as Error).message}`, { cause: error });
  }
}

/** A stream's whole text: standard input, read to its end. */
async function readAll(stream: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(typeof chunk === "string" ? Buffer.from(chunk) : chunk);
  return Buffer.concat(chunks).toString("utf8");
}

function render(report: AuditReport, source: string, flags: AuditFlags, s: Styles): string[] {
  const { counts } = report;
  const lines = [
    s.bold(`idempotool audit: ${counts.tools} tool${counts.tools === 1 ? "" : "s"} from ${source}`),
    "",
  ];
  if (report.tools.length === 0) return [...lines, "No tools to audit."];
  lines.push(
    ...table(
      ["tool", "class", "idempotency key", "verdict", "mechanism"],
      report.tools.map((t) => [
        t.name,
        t.class === ToolClass.sideEffectful ? "side-effect" : t.class,
        t.class === ToolClass.readOnly && !t.key
          ? "-"
          : t.key
            ? `${t.key.required ? "required" : "optional"} ${t.key.field}`
            : "none",
        verdictCell(t, s),
        t.recommendations.map((r) => r.mechanism).join(" + ") || "-",
      ]),
    ),
  );
  const explained = report.tools.filter((t) => flags.verbose || t.verdict !== Verdict.ok);
  for (const t of explained) lines.push("", ...explain(t, s));
  lines.push("", summary(report, flags, s));
  const proxy = proxyAdvice(report, flags);
  if (proxy) lines.push("", ...proxy);
  return lines;
}

/**
 * For MCP tools that take no key: the advice above is for the server's author. Someone who did not write
 * the server can run it behind `idempotool proxy`, which adds the required key and dedupes on it, as it is.
 */
function proxyAdvice(report: AuditReport, flags: AuditFlags): string[] | undefined {
  const unkeyed = report.tools.filter(
    (t) =>
      t.class !== ToolClass.readOnly &&
      t.key === null &&
      (t.verdict === Verdict.fail || t.verdict === Verdict.warn) &&
      t.recommendations.some((r) => r.mechanism === Mechanism.mcpKey),
  );
  if (unkeyed.length === 0) return undefined;
  // The server's own command, environment first (the proxy passes its environment on to the server).
  let command = "<the command that starts the server>";
  let env = "";
  if (flags.mcp !== undefined) {
    const parsed = parseShellCommand(flags.mcp);
    command = [parsed.command, ...parsed.args].map(shellQuote).join(" ");
    env = Object.entries(parsed.env)
      .map(([name, value]) => `${name}=${shellQuote(value)} `)
      .join("");
  }
  const these = unkeyed.length === 1 ? "the tool without a key" : `the ${unkeyed.length} tools without a key`;
  return [
    `Did not write this server? Run it behind the proxy: it gives ${these} a required idempotency_key ` +
      "and dedupes on it, with no change to the server (docs/proxy.md):",
    `  $ ${env}idempotool proxy -- ${command}`,
  ];
}

function verdictCell(t: ToolAudit, s: Styles): string {
  switch (t.verdict) {
    case Verdict.fail:
      return s.red("FAIL");
    case Verdict.warn:
      return s.yellow("warn");
    case Verdict.ignored:
      return s.dim("ignored");
    default:
      return s.green("ok");
  }
}

function explain(t: ToolAudit, s: Styles): string[] {
  const lines = [`${s.bold(t.name)}: ${t.finding}`];
  if (t.signals.length > 0) lines.push(`  why: ${t.signals.map((signal) => signal.detail).join("; ")}`);
  else lines.push("  why: no annotations, and neither its name nor its description names what it does");
  for (const r of t.recommendations) lines.push(`  ${r.mechanism} ${r.title}: ${r.reason}`);
  if (t.effect) lines.push(`  wrap it: idempotent(fn, { name: "${t.name}", effect: "${t.effect}", store })`);
  return lines;
}

function summary(report: AuditReport, flags: AuditFlags, s: Styles): string {
  const failing = report.tools.filter((t) => t.verdict === Verdict.fail).map((t) => t.name);
  const warning = report.tools.filter((t) => t.verdict === Verdict.warn).map((t) => t.name);
  if (failing.length > 0) {
    return s.red(
      `${failing.length} side-effectful tool${failing.length === 1 ? " takes" : "s take"} no idempotency key: ${failing.join(", ")}.`,
    );
  }
  if (warning.length > 0 && flags.strict) {
    return s.red(
      `${warning.length} tool${warning.length === 1 ? "" : "s"} warned under --strict: ${warning.join(", ")}.`,
    );
  }
  const warned = warning.length > 0 ? ` (${warning.length} warning${warning.length === 1 ? "" : "s"})` : "";
  return s.green(`Every side-effectful tool takes an idempotency key${warned}.`);
}
