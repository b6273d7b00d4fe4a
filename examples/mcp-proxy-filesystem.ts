/**
 * `idempotool proxy` in front of an MCP server you did not write: @modelcontextprotocol/server-filesystem,
 * whose `edit_file` takes no idempotency key. An agent host re-sends the same `tools/call` (its first
 * answer was slow, say). Straight to the server, the edit lands twice; through the proxy, once, and the
 * re-send gets the first answer back, marked as a replay.
 *
 * Run: node --import tsx examples/mcp-proxy-filesystem.ts   (checks itself; exits non-zero on failure)
 */
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { type IdempotencyInfo, MetaKey } from "idempotool/mcp";

const here = import.meta.dirname;
const dir = mkdtempSync(join(tmpdir(), "idempotool-proxy-example-"));
const notes = join(dir, "notes", "todo.md");
mkdirSync(join(dir, "notes"));

// In a project, the server is `npx -y @modelcontextprotocol/server-filesystem <folder>` and the proxy
// is `npx idempotool proxy --store … -- <that command>`. Here: the installed server, and this checkout's CLI.
const server = [join(here, "..", "node_modules", ".bin", "mcp-server-filesystem"), join(dir, "notes")];
const source = join(here, "..", "src", "cli", "main.ts");
const idempotool = existsSync(source)
  ? ["--import", "tsx", source]
  : [join(here, "..", "dist", "cli", "main.js")];
const proxy = [...idempotool, "proxy", "--store", `sqlite://${join(dir, "records.db")}`, "--", ...server];

/** Ticks the first box of the list: applied twice, it ticks the second one too. */
const tickFirstBox = { path: notes, edits: [{ oldText: "- [ ]", newText: "- [x]" }] };

async function connect(command: string, args: string[]): Promise<Client> {
  const client = new Client({ name: "agent-host", version: "1.0.0" });
  await client.connect(new StdioClientTransport({ command, args, stderr: "ignore" }));
  return client;
}

try {
  // Straight to the server: the re-send is a second edit.
  writeFileSync(notes, "- [ ] ship the proxy\n- [ ] write the docs\n");
  const direct = await connect(server[0]!, server.slice(1));
  await direct.callTool({ name: "edit_file", arguments: tickFirstBox });
  await direct.callTool({ name: "edit_file", arguments: tickFirstBox });
  await direct.close();
  const twice = readFileSync(notes, "utf8");
  console.log(`without the proxy, after a re-send:\n${twice}`);
  assert.equal(twice, "- [x] ship the proxy\n- [x] write the docs\n");

  // Through the proxy: edit_file now requires an idempotency_key, and the re-send carries the same one.
  writeFileSync(notes, "- [ ] ship the proxy\n- [ ] write the docs\n");
  const client = await connect(process.execPath, proxy);
  const { tools } = await client.listTools();
  const editFile = tools.find((tool) => tool.name === "edit_file");
  assert.ok(editFile?.inputSchema.required?.includes("idempotency_key"));
  const call = { name: "edit_file", arguments: { ...tickFirstBox, idempotency_key: "turn-4-tick-ship" } };
  const first = (await client.callTool(call)) as CallToolResult;
  const resent = (await client.callTool(call)) as CallToolResult;
  await client.close();
  const once = readFileSync(notes, "utf8");
  console.log(`through the proxy, after a re-send:\n${once}`);
  assert.equal(once, "- [x] ship the proxy\n- [ ] write the docs\n");

  const info = (result: CallToolResult) => result._meta?.[MetaKey.envelope] as IdempotencyInfo;
  assert.equal(info(first).was_replay, false);
  assert.equal(info(resent).was_replay, true);
  const note = resent.content.at(-1);
  assert.ok(note?.type === "text" && note.text.startsWith("This is a replay"));
  console.log(`the re-send's answer ends: ${note.text}`);
  console.log("OK: one edit per intent through the proxy.");
} finally {
  rmSync(dir, { recursive: true, force: true });
}
