/**
 * registerIdempotentTool across a process boundary: a real MCP Client spawns the fixture server
 * (`node --import tsx test/fixtures/mcp-server.ts`) and talks to it over stdio. The server keeps its
 * records in SQLite and writes every real send to a file, so sends are counted outside the server.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { RecordStatus } from "../src/index.js";
import type { IdempotencyInfo } from "../src/mcp/index.js";
import { sqliteStore } from "../src/sqlite/index.js";
import { callTool, textOf } from "./fixtures/mcp-harness.js";

const root = join(import.meta.dirname, "..");
const fixture = join(root, "test/fixtures/mcp-server.ts");

/** A temporary directory with the server's SQLite file and its effects file. */
class Workspace {
  readonly dir = mkdtempSync(join(tmpdir(), "idempotool-mcp-"));
  readonly db = join(this.dir, "records.db");
  readonly effects = join(this.dir, "effects.jsonl");
  private readonly clients: Client[] = [];

  /** Spawn the fixture server on this workspace and connect a client to it. */
  async startServer(delayMs = 0): Promise<Client> {
    const env = Object.fromEntries(
      Object.entries(process.env).filter((entry): entry is [string, string] => entry[1] !== undefined),
    );
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: ["--import", "tsx", fixture, this.db, this.effects, String(delayMs)],
      cwd: root,
      env,
      stderr: "inherit",
    });
    const client = new Client({ name: "stdio-test", version: "1.0.0" });
    await client.connect(transport);
    this.clients.push(client);
    return client;
  }

  /** The sends the server really made, optionally under one key. */
  sends(key?: string): { channel: string; text: string; key: string }[] {
    if (!existsSync(this.effects)) return [];
    return readFileSync(this.effects, "utf8")
      .split("\n")
      .filter((line) => line !== "")
      .map((line) => JSON.parse(line) as { channel: string; text: string; key: string })
      .filter((send) => key === undefined || send.key === key);
  }

  async dispose(): Promise<void> {
    await Promise.all(this.clients.splice(0).map((client) => client.close()));
    rmSync(this.dir, { recursive: true, force: true });
  }
}

function infoOf(result: Awaited<ReturnType<typeof callTool>>): IdempotencyInfo {
  return result.structuredContent?._idempotency as IdempotencyInfo;
}

// Each server is a fresh Node process running TypeScript through tsx: give spawning room on a busy machine.
const spawnTimeoutMs = 90_000;

const message = { channel: "#ops", text: "Rollback done", idempotency_key: "incident-9-rollback" };

describe("registerIdempotentTool over stdio, records in SQLite", () => {
  let ws: Workspace;
  beforeEach(() => {
    ws = new Workspace();
  });
  afterEach(async () => {
    await ws.dispose();
  });

  it(
    "sends once for a repeat, and for a re-sent call after a client-side timeout the server outlived",
    async () => {
      const client = await ws.startServer(400);
      await client.listTools(); // caches the output schema, so the client validates structuredContent

      const timedOut = await callTool(client, "send_slack_message", message, { timeout: 100 }).catch(
        (error: unknown) => error,
      );
      expect(timedOut).toBeInstanceOf(McpError);
      expect((timedOut as McpError).code).toBe(-32001); // RequestTimeout

      // The server finished the send after the client gave up: wait until its record is completed.
      const store = sqliteStore({ path: ws.db });
      try {
        const deadline = Date.now() + 10_000;
        for (;;) {
          const record = await store.get({ scope: "default", key: message.idempotency_key }, Date.now());
          if (record?.status === RecordStatus.completed) break;
          if (Date.now() > deadline) throw new Error("the server never completed the first call");
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
      } finally {
        await store.close();
      }

      const retried = await callTool(client, "send_slack_message", message);
      const again = await callTool(client, "send_slack_message", message);

      expect(ws.sends()).toHaveLength(1);
      expect(retried.isError).toBeFalsy();
      expect(infoOf(retried).was_replay).toBe(true);
      expect(infoOf(again).was_replay).toBe(true);
      expect(retried.structuredContent).toMatchObject({ channel: "#ops", ts: "1700000000.000001" });
      expect(textOf(retried)).toContain("This is a replay");
    },
    spawnTimeoutMs,
  );

  it(
    "still replays after the server process restarts on the same SQLite file",
    async () => {
      const first = await ws.startServer();
      const original = await callTool(first, "send_slack_message", message);
      await first.close();

      const second = await ws.startServer();
      const replayed = await callTool(second, "send_slack_message", message);

      expect(ws.sends()).toHaveLength(1);
      expect(infoOf(original).was_replay).toBe(false);
      expect(infoOf(replayed).was_replay).toBe(true);
      expect(infoOf(replayed).original_called_at).toBe(infoOf(original).original_called_at);
    },
    spawnTimeoutMs,
  );
});

describe("registerIdempotentTool over stdio: checks sharing one server process", () => {
  let ws: Workspace;
  let client: Client;
  beforeAll(async () => {
    ws = new Workspace();
    client = await ws.startServer();
  }, spawnTimeoutMs);
  afterAll(async () => {
    await ws.dispose();
  });

  it("answers a call without a key with a validation error result, and sends nothing", async () => {
    const { idempotency_key: _, ...noKey } = message;
    const before = ws.sends().length;

    const result = await callTool(client, "send_slack_message", noKey);

    expect(result.isError).toBe(true);
    expect(textOf(result)).toContain("Input validation error");
    expect(textOf(result)).toContain("idempotency_key is required");
    expect(ws.sends()).toHaveLength(before);
  });

  it("answers the same key with different arguments with a conflict result, and sends nothing more", async () => {
    const key = "incident-9-conflict";
    await callTool(client, "send_slack_message", { ...message, idempotency_key: key });
    const conflict = await callTool(client, "send_slack_message", {
      ...message,
      channel: "#general",
      idempotency_key: key,
    });

    expect(ws.sends(key)).toHaveLength(1);
    expect(conflict.isError).toBe(true);
    expect(textOf(conflict)).toContain("Do not retry with new arguments under this key");
  });

  it("lists idempotency_key as required with the dedup window, and the annotations", async () => {
    const { tools } = await client.listTools();

    expect(tools).toHaveLength(1);
    const [tool] = tools;
    expect(tool?.inputSchema.required).toEqual(["channel", "text", "idempotency_key"]);
    expect(tool?.inputSchema.properties?.idempotency_key).toMatchObject({
      type: "string",
      description: expect.stringContaining("The server dedupes within 24 hours"),
    });
    expect(tool?.annotations).toEqual({ destructiveHint: false, openWorldHint: true, idempotentHint: true });
    expect(tool?.outputSchema?.required).toEqual(["channel", "ts", "_idempotency"]);
  });
});
