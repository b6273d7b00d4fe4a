/**
 * Read the tool definitions of an MCP server started over stdio: spawn it, initialize, page through
 * `tools/list`, close. The MCP SDK is loaded only here, so only `audit --mcp` needs it installed.
 */
import { durationOption } from "../core/option-checks.js";

/** How to start the server: a command and its arguments, as a shell would split them. */
export interface McpServerCommand {
  readonly command: string;
  readonly args?: readonly string[];
  /** Added to this process's environment for the server. */
  readonly env?: Readonly<Record<string, string>>;
  readonly cwd?: string;
}

export interface ListMcpToolsOptions {
  /**
   * How long the server may take to start and answer each request, in whole ms from 1 to 2^31 − 1.
   * Default 30 s (an `npx` download is slow).
   */
  readonly timeoutMs?: number | undefined;
}

/** What the server said about itself, and its tools as `tools/list` returned them. */
export interface McpToolList {
  readonly server: { readonly name: string; readonly version: string } | undefined;
  readonly tools: readonly unknown[];
}

const defaultTimeoutMs = 30_000;
const maxPages = 100;
const keptStderrChars = 2_000;

/**
 * Start an MCP server over stdio and list its tools.
 * @example
 * const { tools } = await listMcpTools({ command: "npx", args: ["-y", "@modelcontextprotocol/server-memory"] });
 */
export async function listMcpTools(
  server: McpServerCommand,
  options: ListMcpToolsOptions = {},
): Promise<McpToolList> {
  const timeoutMs = durationOption("listMcpTools()", "timeoutMs", options.timeoutMs, defaultTimeoutMs);
  const { Client, StdioClientTransport } = await loadSdk();
  const transport = new StdioClientTransport({
    command: server.command,
    args: [...(server.args ?? [])],
    env: { ...inheritedEnv(), ...server.env },
    stderr: "pipe",
    ...(server.cwd ? { cwd: server.cwd } : {}),
  });
  let stderr = "";
  transport.stderr?.on("data", (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-keptStderrChars);
  });
  const client = new Client({ name: "idempotool-audit", version: "1" });
  const shown = [server.command, ...(server.args ?? [])].join(" ");
  try {
    await client.connect(transport, { timeout: timeoutMs });
    const tools: unknown[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < maxPages; page++) {
      const result = await client.listTools(cursor === undefined ? {} : { cursor }, { timeout: timeoutMs });
      tools.push(...result.tools);
      cursor = result.nextCursor;
      if (cursor === undefined) break;
    }
    const version = client.getServerVersion();
    return { server: version ? { name: version.name, version: version.version } : undefined, tools };
  } catch (error) {
    const said = lastLine(stderr);
    throw new Error(
      `The MCP server \`${shown}\` could not be listed: ${describe(error)}${said ? ` (its stderr: ${said})` : ""}`,
      { cause: error },
    );
  } finally {
    await client.close().catch(() => undefined);
  }
}

async function loadSdk() {
  try {
    const [{ Client }, { StdioClientTransport }] = await Promise.all([
      import("@modelcontextprotocol/sdk/client/index.js"),
      import("@modelcontextprotocol/sdk/client/stdio.js"),
    ]);
    return { Client, StdioClientTransport };
  } catch (error) {
    throw new Error(
      "Reading tools from an MCP server needs @modelcontextprotocol/sdk; install @modelcontextprotocol/sdk beside idempotool: npm install @modelcontextprotocol/sdk",
      { cause: error },
    );
  }
}

function inheritedEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(process.env)) if (value !== undefined) env[name] = value;
  return env;
}

function describe(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  if (/ENOENT/.test(message)) return "the command was not found";
  if (/timed out|timeout/i.test(message)) return `it did not answer in time (${message})`;
  if (/connection closed/i.test(message)) return "it exited before answering";
  return message;
}

function lastLine(text: string): string {
  const lines = text
    .split("\n")
    .map((line) => line.trim())
    .filter(Boolean);
  return lines.at(-1) ?? "";
}
