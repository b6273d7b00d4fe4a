/**
 * `idempotool proxy`: put idempotency in front of an MCP server you did not write. The server is started
 * over stdio and served to the client over stdio (or Streamable HTTP, with `--http`), with every
 * side-effectful tool taking a required `idempotency_key` and deduped on the store (docs/proxy.md).
 */
import { randomUUID } from "node:crypto";
import { mkdirSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import { type Command, InvalidArgumentError, Option } from "commander";
import { commaList, keylessWindow, milliseconds, positiveInteger } from "./arguments.js";
import { ExitCode, OptionError, UsageError } from "./errors.js";
import type { CommandContext } from "./main.js";
import { startMcpProxy } from "./mcp-proxy.js";
import { loadOptional } from "./optional-packages.js";
import { printable } from "./output.js";
import { defaultMaxSessions, serveHttpProxy } from "./proxy-http.js";
import { readOnlyRule, readToolRules, type ToolRule, toolRuleFlag } from "./proxy-tools.js";
import { redactUrl } from "./redact.js";
import { openStore } from "./store-url.js";

/** How keys are namespaced: one scope for every client, or one per client session. */
export const ProxyScope = {
  /** Every client of every proxy on the store shares one namespace: a retry through another proxy is caught. */
  shared: "shared",
  /** Each client session has its own namespace (a fresh one each time the proxy starts). */
  session: "session",
  /**
   * Over HTTP: one namespace per credential, the request's Authorization header (by its SHA-256), so
   * a client reaches only the records made with its own token.
   */
  client: "client",
} as const;
export type ProxyScope = (typeof ProxyScope)[keyof typeof ProxyScope];

interface ProxyFlags {
  readonly store?: string;
  readonly tool: Map<string, ToolRule>;
  readonly readOnly: string[];
  readonly config?: string;
  readonly scope: ProxyScope;
  readonly namespace?: string;
  readonly ttl?: number;
  readonly lease?: number;
  readonly wait?: number;
  readonly inProgress: "wait" | "reject";
  readonly similar?: number;
  readonly withoutKey?: number;
  readonly http?: number;
  readonly host: string;
  readonly maxSessions: number;
}

const examples = `
In an MCP client's config, put it before the server's own command:
  "command": "npx", "args": ["-y", "-p", "idempotool", "-p", "@modelcontextprotocol/sdk", "idempotool",
  "proxy", "--", "npx", "-y", "@modelcontextprotocol/server-filesystem", "/home/me/notes"]
See docs/proxy.md.

Examples:
  $ idempotool proxy -- npx -y @modelcontextprotocol/server-memory
  $ idempotool proxy --store postgres://app@db/agents -- npx -y @modelcontextprotocol/server-filesystem ./notes
  $ idempotool proxy --tool send_message=irreversible --read-only preview_message -- node ./server.js
  $ idempotool proxy --http 8080 --scope client -- npx -y @modelcontextprotocol/server-github

Over stdio, stops when the client or the server goes away, and says why on stderr. Exit codes: 0 the
client closed; 2 it could not start, the server exited, or a rule names a tool the server does not have.
With --http, also serves Streamable HTTP and runs until SIGINT or SIGTERM; the end of stdin then ends only
the stdio session.`;

/** Register `proxy` on its command. */
export function proxyCommand(command: Command, context: CommandContext): void {
  command
    .description(
      "Serve an MCP server over stdio with idempotency on its side-effectful tools (a required idempotency_key)",
    )
    .argument("<command>", "the command that starts the MCP server over stdio (after --)")
    .argument("[args...]", "its arguments")
    .option("--store <url>", "where records are kept (default: a SQLite file, named on stderr)")
    .addOption(
      new Option(
        "--tool <name=effect>",
        "guard this tool under this effect class (irreversible, compensatable, owned-store, native-key), or " +
          "name=read-only; repeatable",
      )
        .argParser(toolRuleFlag)
        .default(new Map<string, ToolRule>(), "none"),
    )
    .addOption(
      new Option("--read-only <names>", "pass these tools through unguarded (comma-separated, repeatable)")
        .argParser(commaList)
        .default([], "none"),
    )
    .option("--config <file>", 'a JSON file of tool rules: { "tools": { "send_email": "irreversible" } }')
    .addOption(
      new Option(
        "--scope <scope>",
        "one namespace for every client (shared), one per session, or (over HTTP) one per Authorization credential (client)",
      )
        .choices(Object.values(ProxyScope))
        .default(ProxyScope.shared),
    )
    .option(
      "--namespace <name>",
      "what the keys belong to: give each proxy its own when several servers of one kind (two accounts, two folders) share a store",
      namespaceName,
    )
    .option("--ttl <ms>", "how long a repeat is absorbed (default 24 h)", milliseconds)
    .option(
      "--lease <ms>",
      "how long a call's claim holds before it counts as stale (default 60 s)",
      milliseconds,
    )
    .option(
      "--similar <ms>",
      "tell the model when a call under a new key repeats the arguments of one that completed within <ms>",
      milliseconds,
    )
    .option(
      "--without-key <ms>",
      "key a call that comes without a key by its tool and arguments: an identical call within <ms> (at most 60000) is its duplicate",
      keylessWindow,
    )
    .option(
      "--http <port>",
      "also serve over Streamable HTTP at http://<host>:<port>/mcp (0: any free port)",
      portNumber,
    )
    .option("--host <host>", "the address --http listens on", "127.0.0.1")
    .option(
      "--max-sessions <n>",
      "the most --http sessions at once, each with its own copy of the server",
      positiveInteger,
      defaultMaxSessions,
    )
    .option("--wait <ms>", "how long a repeat waits for a call in flight (default 10 s)", milliseconds)
    .addOption(
      new Option(
        "--in-progress <mode>",
        "what a repeat gets while the first call runs: wait for its outcome, or reject at once with when to retry",
      )
        .choices(["wait", "reject"])
        .default("wait"),
    )
    .addHelpText("after", examples)
    .action(async (upstream: string, args: string[], flags: ProxyFlags) => {
      const rules = new Map<string, ToolRule>(flags.config === undefined ? [] : readToolRules(flags.config));
      for (const [name, rule] of flags.tool) rules.set(name, rule);
      for (const name of flags.readOnly) rules.set(name, readOnlyRule);
      const log = (line: string) => context.io.stderr.write(`idempotool proxy: ${printable(line)}\n`);

      if (flags.inProgress === "reject" && flags.wait !== undefined) {
        throw new OptionError("--wait has no effect with --in-progress reject, which answers at once");
      }
      if (flags.scope === ProxyScope.client && flags.http === undefined) {
        throw new OptionError("--scope client needs --http: over stdio the proxy has one client");
      }
      // Everything that can be missing is looked for before anything is made: a proxy that cannot run
      // leaves no store file or folder behind.
      const { StdioClientTransport, StdioServerTransport, StreamableHTTPServerTransport } = await loadSdk();
      const { url, shown } = storeUrl(flags.store);
      const store = await openStore(url, { create: true });
      log(`records in ${shown}`);
      // Records are keyed by scope and key, and two servers of one kind (two accounts, two folders) share
      // their tools' names: each proxy of such a pair names its own namespace, or a call sent to both with
      // one key replays the first's answer. The default stays the same however the server is started, so a
      // proxy restarted with another command line (a new version, another flag) still knows its calls.
      const within = (scope: string) =>
        flags.namespace === undefined ? scope : `${flags.namespace}/${scope}`;
      if (flags.namespace !== undefined) log(`keys belong to the namespace ${flags.namespace}`);
      const startServer = () =>
        new StdioClientTransport({ command: upstream, args, env: inheritedEnv(), stderr: "inherit" });
      const tuning = {
        store,
        rules,
        ttlMs: flags.ttl,
        leaseMs: flags.lease,
        waitMs: flags.inProgress === "reject" ? 0 : flags.wait,
        similarWindowMs: flags.similar,
        withoutKeyWindowMs: flags.withoutKey,
        log,
      };
      if (flags.http !== undefined) {
        let http: Awaited<ReturnType<typeof serveHttpProxy>>;
        try {
          http = await serveHttpProxy({
            ...tuning,
            port: flags.http,
            host: flags.host,
            scope: flags.scope,
            within,
            startServer,
            Transport: StreamableHTTPServerTransport,
            maxSessions: flags.maxSessions,
          });
        } catch (error) {
          await store.close();
          throw new UsageError(`cannot listen on ${flags.host}:${flags.http}: ${String(error)}`, {
            cause: error,
          });
        }
        log(`serving MCP over Streamable HTTP at ${http.url}, one copy of the server per session`);
        // The client that started the proxy (if it speaks on stdin) gets a session too, with its own copy
        // of the server; the end of stdin ends that session only. A terminal's stdin is a person, not a client.
        const stdioClient = process.stdin.isTTY
          ? undefined
          : new StdioServerTransport(process.stdin, process.stdout);
        // The SDK's stdio transport does not notice the client going away; the end of stdin says it.
        const stdinEnded = () => void stdioClient?.close();
        process.stdin.once("end", stdinEnded);
        const stdio =
          stdioClient &&
          (await startMcpProxy({
            client: stdioClient,
            server: startServer(),
            ...tuning,
            scope: within(
              flags.scope === ProxyScope.session
                ? `session:${randomUUID()}`
                : flags.scope === ProxyScope.client
                  ? "client:stdio"
                  : "default",
            ),
          }).catch((error: unknown) => {
            log(`no session over stdio: could not start the MCP server: ${String(error)}`);
            return undefined;
          }));
        void stdio?.ended.then((end) => {
          process.stdin.off("end", stdinEnded);
          process.stdin.pause();
          log(`the session over stdio ended (${end.reason}); HTTP goes on`);
        });
        const signal = await new Promise<NodeJS.Signals>((resolve) => {
          process.once("SIGINT", resolve);
          process.once("SIGTERM", resolve);
        });
        await stdio?.close();
        await http.close();
        await store.close().catch(() => undefined);
        log(`stopped: ${signal}`);
        return;
      }
      const server = startServer();
      const client = new StdioServerTransport(process.stdin, process.stdout);
      // The SDK's stdio transport does not notice the client going away; the end of stdin says it.
      const clientGone = () => void client.close();
      process.stdin.once("end", clientGone);
      let proxy: Awaited<ReturnType<typeof startMcpProxy>>;
      try {
        proxy = await startMcpProxy({
          client,
          server,
          ...tuning,
          scope: within(flags.scope === ProxyScope.session ? `session:${randomUUID()}` : "default"),
        });
      } catch (error) {
        await store.close();
        process.stdin.off("end", clientGone);
        throw new UsageError(
          `cannot start the MCP server \`${[upstream, ...args].join(" ")}\`: ${String(error)}`,
          {
            cause: error,
          },
        );
      }
      const end = await proxy.ended;
      process.stdin.off("end", clientGone);
      process.stdin.pause();
      await store.close().catch(() => undefined);
      log(`stopped: ${end.reason}`);
      context.setExitCode(end.by === "client" ? ExitCode.ok : ExitCode.failure);
    });
}

/** `--namespace name`: 1–100 printable characters, no "/" (it separates the namespace from the scope). */
function namespaceName(value: string): string {
  if (!/^[\x21-\x2e\x30-\x7e]{1,100}$/.test(value)) {
    throw new InvalidArgumentError("expected 1–100 printable ASCII characters without spaces or '/'");
  }
  return value;
}

/** `--http 8080`: a TCP port, 0 for any free one. */
function portNumber(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65_535)
    throw new InvalidArgumentError("must be a port from 0 to 65535");
  return n;
}

/** The store URL, and how to name it on stderr (the file, or the URL without its password). */
function storeUrl(given: string | undefined): { url: string; shown: string } {
  if (given !== undefined) return { url: given, shown: redactUrl(given) };
  const state = process.env.XDG_STATE_HOME || join(homedir(), ".local", "state");
  const path = join(state, "idempotool", "proxy.db");
  try {
    mkdirSync(dirname(path), { recursive: true });
  } catch (error) {
    throw new UsageError(
      `cannot create ${dirname(path)} for the default store: ${String(error)}; give --store`,
      {
        cause: error,
      },
    );
  }
  return { url: `sqlite://${path}`, shown: `the SQLite file ${path} (--store to change)` };
}

async function loadSdk() {
  const [{ StdioClientTransport }, { StdioServerTransport }, { StreamableHTTPServerTransport }] =
    await loadOptional("idempotool proxy", ["@modelcontextprotocol/sdk"], () =>
      Promise.all([
        import("@modelcontextprotocol/sdk/client/stdio.js"),
        import("@modelcontextprotocol/sdk/server/stdio.js"),
        import("@modelcontextprotocol/sdk/server/streamableHttp.js"),
      ]),
    );
  return { StdioClientTransport, StdioServerTransport, StreamableHTTPServerTransport };
}

/** The server gets this process's whole environment, as the MCP client's config set it. */
function inheritedEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(process.env)) if (value !== undefined) env[name] = value;
  return env;
}
