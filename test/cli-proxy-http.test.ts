/**
 * `idempotool proxy --http`: the proxy served over Streamable HTTP on 127.0.0.1, in front of
 * @modelcontextprotocol/server-filesystem, driven by the MCP SDK's Client over StreamableHTTPClientTransport.
 * Each session gets its own copy of the server; records are shared through the one store.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { MetaKey } from "../src/mcp/index.js";
import { filesystemServer, fixture, progressOnTheWire, root } from "./fixtures/proxy-harness.js";

const cli = join(root, "src", "cli", "main.ts");

interface Running {
  readonly child: ChildProcess;
  readonly url: string;
  stderr(): string;
  readonly exited: Promise<number | null>;
}

/** Start the proxy over HTTP on a free port, and wait until it says where it listens. */
async function serve(
  options: readonly string[],
  server: readonly string[],
  stdin: "ignore" | "pipe" = "ignore",
): Promise<Running> {
  const child = spawn(
    process.execPath,
    ["--import", "tsx", cli, "proxy", "--http", "0", ...options, "--", ...server],
    {
      cwd: root,
      stdio: [stdin, "pipe", "pipe"],
    },
  );
  let stderr = "";
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const url = await new Promise<string>((resolve, reject) => {
    child.stderr!.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
      const found = /serving MCP over Streamable HTTP at (\S+),/.exec(stderr);
      if (found) resolve(found[1]!);
    });
    void exited.then(() => reject(new Error(`the proxy exited before listening: ${stderr}`)));
  });
  return { child, url, stderr: () => stderr, exited };
}

let dir: string;
const running: Running[] = [];
const clients: Client[] = [];
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "idempotool-proxy-http-"));
});
afterEach(async () => {
  await Promise.all(clients.splice(0).map((client) => client.close()));
  for (const { child } of running.splice(0)) child.kill("SIGKILL");
  rmSync(dir, { recursive: true, force: true });
});

async function connect(url: string, headers: Record<string, string> = {}): Promise<Client> {
  const client = new Client({ name: "http-test", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
  clients.push(client);
  return client;
}

const wasReplay = (result: { _meta?: Record<string, unknown> | undefined }) =>
  (result._meta?.[MetaKey.envelope] as { was_replay?: boolean } | undefined)?.was_replay;

describe("idempotool proxy --http", () => {
  it("serves guarded tools over Streamable HTTP, and a repeat through another session is a replay", async () => {
    const files = join(dir, "files");
    mkdirSync(files);
    const notes = join(files, "notes.txt");
    writeFileSync(notes, "count: a\n");
    const proxy = await serve(["--store", `sqlite://${join(dir, "records.db")}`], [filesystemServer, files]);
    running.push(proxy);
    expect(proxy.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
    const first = await connect(proxy.url);
    const second = await connect(proxy.url);
    const tools = (await first.listTools()).tools;
    expect(tools.find((tool) => tool.name === "edit_file")?.inputSchema.required).toContain(
      "idempotency_key",
    );
    const edit = {
      name: "edit_file",
      arguments: { path: notes, edits: [{ oldText: "a", newText: "aa" }], idempotency_key: "http-1" },
    };
    expect(wasReplay(await first.callTool(edit))).toBe(false);
    expect(wasReplay(await second.callTool(edit))).toBe(true);
    expect(readFileSync(notes, "utf8")).toBe("count: aa\n");

    proxy.child.kill("SIGTERM");
    expect(await proxy.exited).toBe(0);
    expect(proxy.stderr()).toContain("idempotool proxy: stopped: SIGTERM");
  }, 90_000);

  it("keeps each credential's keys apart under --scope client, and relays progress on the call's stream", async () => {
    const effects = join(dir, "effects.jsonl");
    const proxy = await serve(
      ["--store", `sqlite://${join(dir, "records.db")}`, "--scope", "client"],
      fixture(effects, "answer"),
    );
    running.push(proxy);
    const alice = await connect(proxy.url, { authorization: "Bearer alice-token" });
    const bob = await connect(proxy.url, { authorization: "Bearer bob-token" });
    const aliceAgain = await connect(proxy.url, { authorization: "Bearer alice-token" });
    const send = { name: "send_message", arguments: { to: "carol", text: "hi", idempotency_key: "k-1" } };
    const progress = progressOnTheWire(alice);
    // onprogress makes the SDK send a progress token; what it hears is read off the wire.
    await alice.callTool(send, undefined, { onprogress: () => undefined });
    expect(progress).toEqual([{ params: { progress: 1, total: 1, message: "sent" }, beforeTheAnswer: true }]);
    expect(wasReplay(await bob.callTool(send))).toBe(false);
    expect(wasReplay(await aliceAgain.callTool(send))).toBe(true);
    expect(readFileSync(effects, "utf8").trim().split("\n")).toHaveLength(2);
  }, 90_000);

  it("under --scope client, refuses a session that presents no credential instead of pooling such clients", async () => {
    const effects = join(dir, "effects.jsonl");
    const proxy = await serve(
      ["--store", `sqlite://${join(dir, "records.db")}`, "--scope", "client"],
      fixture(effects, "answer"),
    );
    running.push(proxy);
    await expect(connect(proxy.url)).rejects.toThrow(/Authorization/);
    const alice = await connect(proxy.url, { authorization: "Bearer alice-token" });
    const send = { name: "send_message", arguments: { to: "carol", text: "hi", idempotency_key: "k-1" } };
    expect(wasReplay(await alice.callTool(send))).toBe(false);
  }, 90_000);

  it("also serves the client that started it over stdio, in the same namespace; the end of stdin ends only that session", async () => {
    const effects = join(dir, "effects.jsonl");
    const proxy = await serve(
      ["--store", `sqlite://${join(dir, "records.db")}`],
      fixture(effects, "answer"),
      "pipe",
    );
    running.push(proxy);
    // A client on the proxy's stdin and stdout, speaking JSON-RPC lines as an MCP client does over stdio.
    const answers = new Map<number, (message: Record<string, unknown>) => void>();
    let buffered = "";
    proxy.child.stdout!.on("data", (chunk: Buffer) => {
      buffered += chunk.toString();
      let end = buffered.indexOf("\n");
      while (end >= 0) {
        const message = JSON.parse(buffered.slice(0, end)) as Record<string, unknown>;
        buffered = buffered.slice(end + 1);
        if (typeof message.id === "number") answers.get(message.id)?.(message);
        end = buffered.indexOf("\n");
      }
    });
    let nextId = 1;
    const request = (method: string, params: unknown) =>
      new Promise<Record<string, unknown>>((resolve) => {
        const id = nextId++;
        answers.set(id, resolve);
        proxy.child.stdin!.write(`${JSON.stringify({ jsonrpc: "2.0", id, method, params })}\n`);
      });
    await request("initialize", {
      protocolVersion: "2025-06-18",
      capabilities: {},
      clientInfo: { name: "stdio-test", version: "1.0.0" },
    });
    proxy.child.stdin!.write(`${JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" })}\n`);
    const send = { name: "send_message", arguments: { to: "carol", text: "hi", idempotency_key: "k-1" } };
    const overStdio = (await request("tools/call", send)).result as { _meta?: Record<string, unknown> };
    expect(wasReplay(overStdio)).toBe(false);

    const overHttp = await connect(proxy.url);
    expect(wasReplay(await overHttp.callTool(send))).toBe(true);
    expect(readFileSync(effects, "utf8").trim().split("\n")).toHaveLength(1);

    proxy.child.stdin!.end();
    await expect.poll(() => proxy.stderr()).toContain("the session over stdio ended");
    const later = await connect(proxy.url);
    expect(wasReplay(await later.callTool(send))).toBe(true);
    expect(proxy.child.exitCode).toBeNull();
  }, 90_000);
});
