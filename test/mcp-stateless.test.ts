/**
 * The duplicate MCP's 2026-07-28 revision makes by design: with sessions gone, a client whose response
 * stream broke re-issues the call under a new request id, and a load balancer sends it to another
 * instance. Two server processes (SDK 2.x `createMcpHandler`) behind a round-robin front share one store;
 * the front cuts the reply of the first call while the email is being sent, and the client's retry (same
 * key, new id) reaches the other instance. The email goes once, and the retry gets the original result.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import {
  createServer,
  request as httpRequest,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { afterEach, describe, expect, it } from "vitest";
import { type IdempotencyInfo, MetaKey } from "../src/mcp/index.js";
import { idempotentClient } from "../src/mcp-client/index.js";
import { freshTable, pgUrl } from "./fixtures/pg-helpers.js";
import { redisUrl } from "./fixtures/redis-helpers.js";
import { jsonLines, startWorker, type WorkerProcess } from "./fixtures/worker-process.js";

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

interface Front {
  readonly url: URL;
  /** The instance (0 or 1) each tools/call was sent to, in order. */
  readonly toolCalls: number[];
}

/**
 * A round-robin HTTP front over the instances' ports. The first tools/call's reply is cut (the client's
 * connection reset) once `cutWhen` resolves; the upstream request is left to finish, as a real server's is
 * when the network between it and the client fails. `onToolCall(n)` runs as the n-th tools/call is sent on.
 */
async function roundRobinFront(
  ports: number[],
  cutWhen: () => Promise<void>,
  onToolCall: (n: number) => void,
): Promise<Front> {
  const toolCalls: number[] = [];
  let next = 0;
  const front: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      const instance = next++ % ports.length;
      const isToolCall = body.includes('"tools/call"');
      if (isToolCall) toolCalls.push(instance);
      const upstream = httpRequest(
        { host: "127.0.0.1", port: ports[instance], path: req.url, method: req.method, headers: req.headers },
        (answer) => {
          if (isToolCall && toolCalls.length === 1) {
            answer.resume(); // the server finishes; its reply goes nowhere
            return;
          }
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        },
      );
      upstream.on("error", () => res.destroy());
      upstream.end(body);
      if (isToolCall) {
        onToolCall(toolCalls.length);
        if (toolCalls.length === 1) void cutWhen().then(() => req.socket.destroy());
      }
    });
  });
  await new Promise<void>((resolve) => front.listen(0, "127.0.0.1", resolve));
  cleanups.push(() => new Promise((resolve) => front.close(resolve)));
  return { url: new URL(`http://127.0.0.1:${(front.address() as AddressInfo).port}/mcp`), toolCalls };
}

async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setTimeout(resolve, 10));
}

const stores = [
  { name: "PostgreSQL", url: () => `${pgUrl}?table=${freshTable()}` },
  { name: "Redis", url: () => `${redisUrl}?prefix=${freshTable()}:` },
];

describe.each(stores)("two stateless instances sharing $name", ({ url }) => {
  it("run a call whose reply was cut, re-issued under a new id to the other instance, once", async () => {
    const dir = mkdtempSync(join(tmpdir(), "idempotool-stateless-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const effects = join(dir, "effects.jsonl");
    const storeUrl = url();
    const instances: WorkerProcess[] = ["a", "b"].map((name) =>
      startWorker("mcp-stateless-instance.ts", [storeUrl, dir, name]),
    );
    for (const instance of instances) {
      cleanups.push(async () => {
        instance.child.kill("SIGTERM");
        await instance.exited;
      });
    }
    await Promise.all(instances.map((instance) => instance.waitFor("listening")));
    const ports = ["a", "b"].map((name) => Number(readFileSync(join(dir, `${name}.port`), "utf8")));
    const front = await roundRobinFront(
      ports,
      // Cut the first reply once the email is on its way.
      () => until(() => jsonLines(effects).length === 1),
      // Let the first call finish only once its re-issue has reached the other instance.
      (n) => {
        if (n === 2) writeFileSync(join(dir, "release"), "");
      },
    );
    const client = new Client(
      { name: "agent", version: "1.0.0" },
      { versionNegotiation: { mode: { pin: "2026-07-28" } } },
    );
    await client.connect(new StreamableHTTPClientTransport(front.url));
    cleanups.push(() => client.close());
    const mail = idempotentClient(client, {
      retry: { maxAttempts: 3, timeoutMs: 30_000, initialDelayMs: 1 },
    });

    const result = await mail.callTool({ name: "send_email", arguments: { to: "ann@example.com" } });

    const sent = jsonLines<{ key: string; instance: string }>(effects);
    expect(sent).toHaveLength(1);
    expect(front.toolCalls).toHaveLength(2);
    expect(new Set(front.toolCalls).size).toBe(2);
    expect(result.isError).toBeFalsy();
    const text = result.content.map((block) => (block as { text?: string }).text).join("\n");
    expect(text).toContain(`sent to ann@example.com by ${sent[0]?.instance}`);
    const envelope = result._meta?.[MetaKey.envelope] as IdempotencyInfo | undefined;
    expect(envelope?.was_replay).toBe(true);
    expect(envelope?.idempotency_key).toBe(sent[0]?.key);
  });
});
