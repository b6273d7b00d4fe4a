/**
 * `idempotool proxy` in front of real MCP servers from npm (@modelcontextprotocol/server-filesystem and
 * @modelcontextprotocol/server-memory), started by the proxy as an MCP client's config would, and driven
 * by the MCP SDK's Client over stdio. Effects are read where they land: the file the filesystem server
 * edits, the memory server's graph.
 */
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client as ModernClient } from "@modelcontextprotocol/client";
import { StdioClientTransport as ModernStdio } from "@modelcontextprotocol/client/stdio";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { IdempotencyErrorInfo, IdempotencyInfo } from "../src/mcp/index.js";
import { MetaKey } from "../src/mcp/index.js";
import {
  type Connection,
  connect,
  connectProxy,
  env,
  filesystemServer,
  fixture,
  memoryServer,
  progressOnTheWire,
  proxyCommand,
  root,
  textOf,
} from "./fixtures/proxy-harness.js";

// Each proxy is a Node process running TypeScript through tsx, which starts another Node process.
const spawnTimeoutMs = 90_000;

let dir: string;
const open: Connection[] = [];
const modernClients: ModernClient[] = [];
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "idempotool-proxy-"));
});
afterEach(async () => {
  await Promise.all(open.splice(0).map((connection) => connection.client.close()));
  await Promise.all(modernClients.splice(0).map((client) => client.close()));
  rmSync(dir, { recursive: true, force: true });
});

const store = () => `sqlite://${join(dir, "records.db")}`;

async function proxy(server: readonly string[], options: readonly string[] = []): Promise<Connection> {
  const connection = await connectProxy(["--store", store(), ...options], server);
  open.push(connection);
  return connection;
}

async function direct(command: string, args: readonly string[], env: Record<string, string> = {}) {
  const connection = await connect(command, args, env);
  open.push(connection);
  return connection;
}

function envelopeOf(result: unknown): IdempotencyInfo | undefined {
  return (result as { _meta?: Record<string, unknown> })._meta?.[MetaKey.envelope] as
    | IdempotencyInfo
    | undefined;
}

function errorOf(result: unknown): IdempotencyErrorInfo | undefined {
  return (result as { _meta?: Record<string, unknown> })._meta?.[MetaKey.error] as
    | IdempotencyErrorInfo
    | undefined;
}

describe("idempotool proxy in front of @modelcontextprotocol/server-filesystem", () => {
  const files = () => join(dir, "files");
  const notes = () => join(files(), "notes.txt");
  beforeEach(() => {
    rmSync(files(), { recursive: true, force: true });
    mkdirSync(files());
    writeFileSync(notes(), "count: a\n");
  });
  // `a` → `aa`: applied twice, the file says `aaa`.
  const edit = (key: string, newText = "aa") => ({
    name: "edit_file",
    arguments: { path: notes(), edits: [{ oldText: "a", newText }], idempotency_key: key },
  });

  it(
    "gives write tools a required idempotency_key and idempotentHint, and lists read tools exactly as the server does",
    async () => {
      const behind = await proxy([filesystemServer, files()]);
      const plain = await direct(filesystemServer, [files()]);
      const proxied = (await behind.client.listTools()).tools;
      const original = (await plain.client.listTools()).tools;
      expect(proxied.map((tool) => tool.name)).toEqual(original.map((tool) => tool.name));
      const writes = ["write_file", "edit_file", "create_directory", "move_file"];
      for (const tool of proxied) {
        const before = original.find((t) => t.name === tool.name)!;
        if (writes.includes(tool.name)) {
          expect(tool.inputSchema.required, tool.name).toContain("idempotency_key");
          expect(tool.inputSchema.properties?.idempotency_key, tool.name).toMatchObject({
            type: "string",
            description: expect.stringContaining("within 24 hours"),
          });
          expect(tool.annotations?.idempotentHint, tool.name).toBe(true);
          expect(tool.description).toBe(before.description);
        } else {
          expect(tool, tool.name).toEqual(before);
        }
      }
    },
    spawnTimeoutMs,
  );

  it(
    "edits the file once when edit_file is repeated with one key, and answers the repeat with a replay",
    async () => {
      const { client } = await proxy([filesystemServer, files()]);
      const first = await client.callTool(edit("edit-1"));
      const again = await client.callTool(edit("edit-1"));
      expect(readFileSync(notes(), "utf8")).toBe("count: aa\n");
      expect(first.isError).toBeFalsy();
      expect(envelopeOf(first)?.was_replay).toBe(false);
      expect(envelopeOf(again)?.was_replay).toBe(true);
      expect(textOf(again)).toBe(
        `${textOf(first)}\nThis is a replay: this action already ran at ${envelopeOf(first)?.original_called_at} ` +
          'under idempotency_key "edit-1" and was not repeated. The content above is the original result.',
      );
      // A new key is a new intent: it runs.
      await client.callTool(edit("edit-2"));
      expect(readFileSync(notes(), "utf8")).toBe("count: aaa\n");
    },
    spawnTimeoutMs,
  );

  it(
    "refuses the same key with other arguments as a conflict, and nothing reaches the server",
    async () => {
      const { client } = await proxy([filesystemServer, files()]);
      await client.callTool(edit("edit-1"));
      const conflict = await client.callTool(edit("edit-1", "ab"));
      expect(conflict.isError).toBe(true);
      expect(errorOf(conflict)?.code).toBe("idempotency_key_conflict");
      expect(textOf(conflict)).toContain("Conflict: idempotency_key");
      expect(readFileSync(notes(), "utf8")).toBe("count: aa\n");
    },
    spawnTimeoutMs,
  );

  it(
    "runs 10 concurrent identical calls once upstream",
    async () => {
      const { client } = await proxy([filesystemServer, files()]);
      const results = await Promise.all(Array.from({ length: 10 }, () => client.callTool(edit("burst"))));
      expect(readFileSync(notes(), "utf8")).toBe("count: aa\n");
      expect(results.map((result) => envelopeOf(result)?.was_replay).sort()).toEqual([
        false,
        ...Array<boolean>(9).fill(true),
      ]);
    },
    spawnTimeoutMs,
  );

  it(
    "answers read tools exactly as the server does",
    async () => {
      const behind = await proxy([filesystemServer, files()]);
      const plain = await direct(filesystemServer, [files()]);
      for (const call of [
        { name: "read_text_file", arguments: { path: notes() } },
        { name: "list_directory", arguments: { path: files() } },
        { name: "read_text_file", arguments: { path: join(files(), "missing.txt") } },
      ]) {
        expect(await behind.client.callTool(call)).toEqual(await plain.client.callTool(call));
      }
    },
    spawnTimeoutMs,
  );
});

describe("idempotool proxy in front of @modelcontextprotocol/server-memory", () => {
  const memory = () => ({ MEMORY_FILE_PATH: join(dir, "memory.jsonl") });
  const alice = { name: "Alice", entityType: "person", observations: ["likes tea"] };
  const create = (key: string, entities: object[] = [alice]) => ({
    name: "create_entities",
    arguments: { entities, idempotency_key: key },
  });
  async function memoryProxy(options: readonly string[] = []): Promise<Connection> {
    const connection = await connectProxy(["--store", store(), ...options], [memoryServer], memory());
    open.push(connection);
    return connection;
  }

  it(
    'returns the original answer to a repeated create_entities, marked as a replay, not the server\'s "nothing new"',
    async () => {
      const { client } = await memoryProxy();
      const first = await client.callTool(create("alice-1"));
      const again = await client.callTool(create("alice-1"));
      expect(textOf(first)).toContain('"name": "Alice"');
      expect(envelopeOf(again)?.was_replay).toBe(true);
      expect(textOf(again).startsWith(textOf(first))).toBe(true);
      expect(textOf(again)).toContain("This is a replay");

      // Without the proxy, the server's own answer to the repeat is another one: nothing was created.
      const plain = await direct(memoryServer, [], { MEMORY_FILE_PATH: join(dir, "plain.jsonl") });
      const plainFirst = await plain.client.callTool({
        name: "create_entities",
        arguments: { entities: [alice] },
      });
      const plainAgain = await plain.client.callTool({
        name: "create_entities",
        arguments: { entities: [alice] },
      });
      expect(textOf(plainFirst)).toBe(textOf(first));
      expect(textOf(plainAgain)).not.toContain("Alice");
    },
    spawnTimeoutMs,
  );

  it(
    "serves a client pinned to the 2026-07-28 revision (SDK 2.x) in front of this 2025 server: one entity, replayed",
    async () => {
      const client = new ModernClient(
        { name: "agent", version: "1.0.0" },
        { versionNegotiation: { mode: { pin: "2026-07-28" } } },
      );
      const { command, args } = proxyCommand(["--store", store()], [memoryServer]);
      await client.connect(new ModernStdio({ command, args, env: env(memory()), cwd: root, stderr: "pipe" }));
      modernClients.push(client);
      expect(client.getProtocolEra()).toBe("modern");

      const first = await client.callTool(create("alice-2026"));
      const again = await client.callTool(create("alice-2026"));
      expect(textOf(first)).toContain('"name": "Alice"');
      expect(envelopeOf(again)?.was_replay).toBe(true);
      const graph = await client.callTool({ name: "read_graph", arguments: {} });
      expect(textOf(graph).match(/"name": "Alice"/g)).toHaveLength(1);
    },
    spawnTimeoutMs,
  );

  it(
    "refuses a key reused with other entities, and the graph keeps only the first",
    async () => {
      const { client } = await memoryProxy();
      await client.callTool(create("people"));
      const conflict = await client.callTool(create("people", [{ ...alice, name: "Bob" }]));
      expect(errorOf(conflict)?.code).toBe("idempotency_key_conflict");
      const graph = await client.callTool({ name: "read_graph", arguments: {} });
      expect(textOf(graph)).toContain("Alice");
      expect(textOf(graph)).not.toContain("Bob");
    },
    spawnTimeoutMs,
  );

  it(
    "passes the server's capabilities, read tools, resources and prompts through as they are",
    async () => {
      const behind = await memoryProxy();
      const plain = await direct(memoryServer, [], memory());
      expect(behind.client.getServerCapabilities()).toEqual(plain.client.getServerCapabilities());
      expect(behind.client.getServerVersion()).toEqual(plain.client.getServerVersion());
      const proxied = (await behind.client.listTools()).tools;
      const original = (await plain.client.listTools()).tools;
      const writes = ["create_entities", "create_relations", "add_observations"];
      const deletes = ["delete_entities", "delete_observations", "delete_relations"];
      for (const tool of proxied) {
        const guarded = [...writes, ...deletes].includes(tool.name);
        expect(Object.hasOwn(tool.inputSchema.properties ?? {}, "idempotency_key"), tool.name).toBe(guarded);
        if (!guarded) expect(tool).toEqual(original.find((t) => t.name === tool.name));
      }
      await behind.client.callTool(create("alice-1"));
      for (const call of [
        { name: "read_graph", arguments: {} },
        { name: "search_nodes", arguments: { query: "tea" } },
        { name: "open_nodes", arguments: { names: ["Alice"] } },
      ]) {
        expect(await behind.client.callTool(call)).toEqual(await plain.client.callTool(call));
      }
      // Whatever the server says to resources and prompts (here: it has none), the proxy says too.
      const outcome = (promise: Promise<unknown>) =>
        promise.then(
          (value) => ({ value }),
          (error: Error) => ({ error: error.message }),
        );
      for (const ask of [
        (c: Connection) => c.client.listResources(),
        (c: Connection) => c.client.listPrompts(),
        (c: Connection) => c.client.listResourceTemplates(),
      ]) {
        expect(await outcome(ask(behind))).toEqual(await outcome(ask(plain)));
      }
    },
    spawnTimeoutMs,
  );
});

describe("idempotool proxy: keys, failures and endings (a fixture server that misbehaves on cue)", () => {
  const effects = () => join(dir, "effects.jsonl");
  const sent = () => {
    try {
      return readFileSync(effects(), "utf8").split("\n").filter(Boolean).length;
    } catch {
      return 0;
    }
  };
  const send = (args: Record<string, unknown> = {}, meta?: Record<string, unknown>) => ({
    name: "send_message",
    arguments: { to: "alice", text: "hi", ...args },
    ...(meta ? { _meta: meta } : {}),
  });

  it(
    "takes the key from _meta (idempotency_key or idempotencyKey) and strips it before the call goes upstream",
    async () => {
      const { client } = await proxy(fixture(effects(), "answer"));
      const first = await client.callTool(send({}, { idempotencyKey: "m-1" }));
      const again = await client.callTool(send({ idempotency_key: "m-1" }, { idempotency_key: "m-1" }));
      expect(textOf(first)).toBe("sent to alice");
      expect(envelopeOf(again)?.was_replay).toBe(true);
      expect(readFileSync(effects(), "utf8")).toBe('{"to":"alice","text":"hi"}\n');
    },
    spawnTimeoutMs,
  );

  it(
    "keeps the records of proxies with different --namespace apart on one store, and joins those with one",
    async () => {
      // Two servers of one kind (two accounts): the same key and arguments sent to each must reach each.
      const lines = (file: string) =>
        existsSync(file) ? readFileSync(file, "utf8").split("\n").filter(Boolean) : [];
      const [a, b, c] = [join(dir, "a.jsonl"), join(dir, "b.jsonl"), join(dir, "c.jsonl")];
      const call = send({ idempotency_key: "send-alice-1" });
      const work = await proxy(fixture(a, "answer"), ["--namespace", "work-account"]);
      const home = await proxy(fixture(b, "answer"), ["--namespace", "home-account"]);
      const workAgain = await proxy(fixture(c, "answer"), ["--namespace", "work-account"]);
      expect(envelopeOf(await work.client.callTool(call))?.was_replay).toBe(false);
      expect(envelopeOf(await home.client.callTool(call))?.was_replay).toBe(false);
      expect(envelopeOf(await workAgain.client.callTool(call))?.was_replay).toBe(true);
      expect([lines(a).length, lines(b).length, lines(c).length]).toEqual([1, 1, 0]);
    },
    spawnTimeoutMs * 2,
  );

  it(
    "runs nothing when the call has no key, or two keys that differ",
    async () => {
      const { client } = await proxy(fixture(effects(), "answer"));
      const missing = await client.callTool(send());
      expect(missing.isError).toBe(true);
      expect(textOf(missing)).toContain("idempotency_key is required");
      const twoKeys = await client.callTool(send({ idempotency_key: "a" }, { idempotencyKey: "b" }));
      expect(twoKeys.isError).toBe(true);
      expect(textOf(twoKeys)).toContain(
        'the idempotency key was given twice with different values (the idempotency_key argument is "a", ' +
          '_meta.idempotencyKey is "b")',
      );
      // The same checks as an idempotool/mcp server: a hostile _meta key is refused before anything runs.
      for (const bad of [7, "k".repeat(256), "k\u001b]0;x\u0007"]) {
        const refused = await client.callTool(send({}, { idempotencyKey: bad }));
        expect(refused.isError).toBe(true);
        expect(errorOf(refused)?.code).toBe("idempotency_key_invalid");
      }
      expect(sent()).toBe(0);
    },
    spawnTimeoutMs,
  );

  it(
    "relays the server's progress notifications on a guarded call",
    async () => {
      const { client } = await proxy(fixture(effects(), "answer"));
      const progress = progressOnTheWire(client);
      // onprogress makes the SDK send a progress token; what it hears is read off the wire.
      await client.callTool(send({ idempotency_key: "p-1" }), undefined, { onprogress: () => undefined });
      expect(progress).toEqual([
        { params: { progress: 1, total: 1, message: "sent" }, beforeTheAnswer: true },
      ]);
    },
    spawnTimeoutMs,
  );

  it(
    "follows --read-only and --tool over the classification",
    async () => {
      const { client } = await proxy(fixture(effects(), "answer"), [
        "--read-only",
        "send_message",
        "--tool",
        "preview_message=native-key",
      ]);
      const tools = (await client.listTools()).tools;
      const keyed = tools.filter((tool) => tool.inputSchema.required?.includes("idempotency_key"));
      expect(keyed.map((tool) => tool.name)).toEqual(["preview_message"]);
      await client.callTool(send());
      await client.callTool(send());
      expect(sent()).toBe(2);
    },
    spawnTimeoutMs,
  );

  it(
    "stops with exit code 2 when a rule names a tool the server does not have",
    async () => {
      const connection = await proxy(fixture(effects(), "answer"), ["--tool", "send_mail=irreversible"]);
      expect(await connection.exited).toBe(2);
      expect(connection.stderr()).toContain(
        "idempotool proxy: stopped: the tool rules name send_mail, which the server does not have " +
          "(its tools: send_message, preview_message)",
      );
    },
    spawnTimeoutMs,
  );

  it(
    "answers a call whose server died mid-call with an unknown outcome, then exits 2 and says why",
    async () => {
      const connection = await proxy(fixture(effects(), "exit"));
      const result = await connection.client.callTool(send({ idempotency_key: "die-1" }));
      expect(result.isError).toBe(true);
      expect(errorOf(result)?.code).toBe("outcome_unknown");
      expect(textOf(result)).toContain('Outcome unknown: the call with idempotency_key "die-1"');
      expect(await connection.exited).toBe(2);
      expect(connection.stderr()).toContain("idempotool proxy: stopped: the MCP server exited");
    },
    spawnTimeoutMs,
  );

  it(
    "exits 0 when the client goes away, and says so",
    async () => {
      const connection = await proxy(fixture(effects(), "answer"));
      await connection.client.close();
      expect(await connection.exited).toBe(0);
      expect(connection.stderr()).toContain("idempotool proxy: stopped: the client closed the connection");
    },
    spawnTimeoutMs,
  );

  it(
    "--in-progress reject answers a repeat of a call still running at once, and forwards nothing",
    async () => {
      const busy = await proxy(fixture(effects(), "hang"), ["--in-progress", "reject"]);
      const running = busy.client
        .callTool(send({ idempotency_key: "busy-1" }))
        .catch((error: Error) => error);
      for (let waited = 0; sent() === 0; waited += 20) {
        if (waited > 30_000) throw new Error("the call never reached the server");
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      // Waiting (the default, up to 10 s) for a call that never ends would outlast this request's timeout.
      const repeat = await busy.client.callTool(send({ idempotency_key: "busy-1" }), undefined, {
        timeout: 5_000,
      });
      expect(errorOf(repeat)?.code).toBe("idempotency_key_in_use");
      expect(sent()).toBe(1);
      process.kill(busy.transport.pid!, "SIGKILL");
      expect(await running).toBeInstanceOf(Error);
    },
    spawnTimeoutMs,
  );

  it(
    "does not forward the retry again after the proxy is killed mid-call and restarted on the same store",
    async () => {
      const killed = await proxy(fixture(effects(), "hang"), ["--lease", "500"]);
      const lost = killed.client
        .callTool(send({ idempotency_key: "crash-1" }))
        .catch((error: Error) => error);
      // The call is forwarded: the server has sent the message and hangs before answering.
      for (let waited = 0; sent() === 0; waited += 20) {
        if (waited > 30_000) throw new Error("the call never reached the server");
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      process.kill(killed.transport.pid!, "SIGKILL");
      expect(await lost).toBeInstanceOf(Error);

      const restarted = await proxy(fixture(effects(), "answer"), ["--lease", "500"]);
      const retry = await restarted.client.callTool(send({ idempotency_key: "crash-1" }));
      expect(retry.isError).toBe(true);
      expect(errorOf(retry)?.code).toBe("outcome_unknown");
      expect(sent()).toBe(1);
    },
    spawnTimeoutMs,
  );

  it(
    "exits 2 and says so when the server's command cannot be started",
    async () => {
      const child = spawn(
        process.execPath,
        [
          "--import",
          "tsx",
          join(root, "src", "cli", "main.ts"),
          "proxy",
          "--store",
          store(),
          "--",
          join(dir, "no-such-server"),
        ],
        { cwd: root, stdio: ["pipe", "pipe", "pipe"] },
      );
      let stderr = "";
      child.stderr.on("data", (chunk: Buffer) => {
        stderr += chunk.toString();
      });
      const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
      expect(code).toBe(2);
      expect(stderr).toContain(`idempotool: cannot start the MCP server \`${join(dir, "no-such-server")}\``);
    },
    spawnTimeoutMs,
  );

  it(
    "reads tool rules from --config, with --tool and --read-only winning over the file",
    async () => {
      const config = join(dir, "rules.json");
      writeFileSync(
        config,
        JSON.stringify({ tools: { send_message: "read-only", preview_message: "irreversible" } }),
      );
      const { client } = await proxy(fixture(effects(), "answer"), [
        "--config",
        config,
        "--tool",
        "send_message=irreversible",
      ]);
      const keyed = (await client.listTools()).tools.filter((tool) =>
        tool.inputSchema.required?.includes("idempotency_key"),
      );
      expect(keyed.map((tool) => tool.name).sort()).toEqual(["preview_message", "send_message"]);
    },
    spawnTimeoutMs,
  );

  it(
    "keeps records in a SQLite file under $XDG_STATE_HOME when no --store is given, and names it on stderr",
    async () => {
      const state = join(dir, "state");
      const connection = await connectProxy([], fixture(effects(), "answer"), { XDG_STATE_HOME: state });
      open.push(connection);
      await connection.client.callTool(send({ idempotency_key: "default-store" }));
      const path = join(state, "idempotool", "proxy.db");
      expect(connection.stderr()).toContain(
        `idempotool proxy: records in the SQLite file ${path} (--store to change)`,
      );
      expect(existsSync(path)).toBe(true);
    },
    spawnTimeoutMs,
  );
});
