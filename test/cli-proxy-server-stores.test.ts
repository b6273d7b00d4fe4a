/**
 * Several `idempotool proxy` processes in front of one filesystem (each starts its own
 * @modelcontextprotocol/server-filesystem on the same folder) share records through the real
 * PostgreSQL and Redis servers: a call retried through another proxy is a replay.
 */
import { randomUUID } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { MetaKey } from "../src/mcp/index.js";
import { type Connection, connectProxy, filesystemServer } from "./fixtures/proxy-harness.js";

const pool = new pg.Pool({ connectionString: "postgres://postgres@127.0.0.1:5432/test", max: 1 });
const redis = new Redis({ host: "127.0.0.1", port: 6379, maxRetriesPerRequest: 1 });
const table = `idempotool_proxy_${randomUUID().replaceAll("-", "").slice(0, 12)}`;
const prefix = `idempotool-proxy-${randomUUID().slice(0, 8)}:`;

afterAll(async () => {
  await pool.query(`DROP TABLE IF EXISTS ${table}`);
  await pool.end();
  const keys = await redis.keys(`${prefix}*`);
  if (keys.length > 0) await redis.del(...keys);
  redis.disconnect();
});

describe.each([
  { name: "PostgreSQL", url: `postgres://postgres@127.0.0.1:5432/test?table=${table}` },
  { name: "Redis", url: `redis://127.0.0.1:6379?prefix=${encodeURIComponent(prefix)}` },
])("two proxies on one $name store", ({ url }) => {
  it("replays through the second proxy a call made through the first, and the file is edited once", async () => {
    const dir = mkdtempSync(join(tmpdir(), "idempotool-proxy-shared-"));
    const files = join(dir, "files");
    mkdirSync(files);
    const notes = join(files, "notes.txt");
    writeFileSync(notes, "count: a\n");
    const connections: Connection[] = [];
    try {
      for (let i = 0; i < 2; i++)
        connections.push(await connectProxy(["--store", url], [filesystemServer, files]));
      const [first, second] = connections as [Connection, Connection];
      const edit = {
        name: "edit_file",
        arguments: {
          path: notes,
          edits: [{ oldText: "a", newText: "aa" }],
          idempotency_key: `shared-${randomUUID()}`,
        },
      };
      const original = await first.client.callTool(edit);
      const retried = await second.client.callTool(edit);
      expect(readFileSync(notes, "utf8")).toBe("count: aa\n");
      expect(original._meta?.[MetaKey.envelope]).toMatchObject({ was_replay: false });
      expect(retried._meta?.[MetaKey.envelope]).toMatchObject({ was_replay: true });
    } finally {
      await Promise.all(connections.map((connection) => connection.client.close()));
      rmSync(dir, { recursive: true, force: true });
    }
  }, 90_000);
});
