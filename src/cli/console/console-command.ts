/**
 * `idempotool console --store <url>`: the review queue, each record's story and the resolve actions as a
 * local web page, for an operator who would rather click than type. It serves 127.0.0.1 (or another
 * loopback name) only, on a free port, and prints a link with a one-time token; see console-server.ts for
 * how requests are guarded.
 */
import { type Command, InvalidArgumentError } from "commander";
import { UsageError } from "../errors.js";
import { flaggedStoreUrl, openFlaggedStore, type StoreFlags, storeOptions } from "../inspect-command.js";
import type { CommandContext } from "../main.js";
import { loadHooks } from "../reconcile-command.js";
import { redactUrl } from "../redact.js";
import { resolutionTelemetry } from "../resolution-telemetry.js";
import { type ConsoleServer, loopbackHosts, startConsoleServer } from "./console-server.js";

interface ConsoleFlags extends StoreFlags {
  readonly host: string;
  readonly port?: number;
  readonly hooks?: string;
}

const examples = `
Examples:
  $ idempotool console --store sqlite://./idempotool.db
  $ idempotool console --store postgres://agent@db/agents --table tool_calls --port 8765

It prints a link such as http://127.0.0.1:53211/?token=…; open it in a browser on this machine. The token
works once: the page trades it for a session cookie. Ctrl-C stops the console and closes the store.`;

function port(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value) || n > 65_535) throw new InvalidArgumentError("must be a port number, 0 to 65535");
  return n;
}

/** Register `console` on its command. */
export function consoleCommand(command: Command, context: CommandContext): void {
  storeOptions(command)
    .description("Serve the review queue and its resolve actions as a local web page")
    .option(
      "--host <host>",
      `where to listen: a loopback name (${loopbackHosts.join(", ")}); other addresses are refused`,
      "127.0.0.1",
    )
    .option("--port <port>", "the port (default: a free one)", port)
    .option(
      "--hooks <module>",
      "the tools' storage options (`encryption` …), as for reconcile: sealed notes open, resolutions are sealed",
    )
    .addHelpText("after", examples)
    .action(async (flags: ConsoleFlags) => {
      if (!(loopbackHosts as readonly string[]).includes(flags.host)) {
        throw new UsageError(
          `--host must be a loopback name (${loopbackHosts.join(", ")}), not ${JSON.stringify(flags.host)}: ` +
            "the console resolves records, and answers only this machine",
        );
      }
      const tools = flags.hooks !== undefined ? await loadHooks(flags.hooks) : undefined;
      const onResolution = await resolutionTelemetry();
      const url = flaggedStoreUrl(flags);
      const store = await openFlaggedStore(url);
      let server: ConsoleServer;
      try {
        server = await startConsoleServer({
          store,
          storeLabel: redactUrl(flags.store),
          host: flags.host,
          port: flags.port ?? 0,
          secrets: context.secrets,
          ...(tools !== undefined ? { tools } : {}),
          onResolution,
        });
      } catch (error) {
        await store.close().catch(() => undefined);
        throw new UsageError(
          `cannot listen on ${flags.host}:${flags.port ?? 0}: ${error instanceof Error ? error.message : String(error)}`,
          { cause: error },
        );
      }
      const out = context.io.stdout;
      out.write(`idempotool console for ${redactUrl(flags.store)}\n`);
      out.write(`Open this link in a browser on this machine (it works once):\n\n  ${server.url}\n\n`);
      out.write("Ctrl-C stops the console.\n");
      const signal = await new Promise<NodeJS.Signals>((resolve) => {
        process.once("SIGINT", resolve);
        process.once("SIGTERM", resolve);
      });
      await server.close();
      await store.close().catch(() => undefined);
      out.write(`stopped: ${signal}\n`);
    });
}
