/**
 * The integrations that build on web standards, under the running runtime: `idempotool/http` (the
 * middleware on a web Request/Response, and idempotentFetch calling it without a socket) and
 * `idempotool/mcp` (an idempotent tool on a real McpServer, called by a real Client over the SDK's
 * in-memory transport).
 */
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { type Clock, type IdempotencyStore, memoryStore } from "idempotool";
import {
  type FetchFunction,
  idempotencyMiddleware,
  idempotentFetch,
  isIdempotentFetchError,
} from "idempotool/http";
import { type IdempotencyInfo, MetaKey, registerIdempotentTool } from "idempotool/mcp";
import { sqliteStore } from "idempotool/sqlite";
import { z } from "zod";
import { type RuntimeCase, tempFile } from "./harness.js";

/** The client's backoff between retries passes at once: what is tested is which requests are sent. */
const noWait: Clock = { now: () => Date.now(), sleep: async () => {} };

/** A payments API behind the middleware, and a fetch that hands each request to it in process. */
function paymentsApi(store: IdempotencyStore) {
  const charges: { id: string; amount: number }[] = [];
  const guard = idempotencyMiddleware({ store, routes: ["/charges"], scope: () => "customer-1" });
  const handle = (request: Request) =>
    guard(request, async () => {
      const { amount } = (await request.json()) as { amount: number };
      const charge = { id: `ch_${charges.length + 1}`, amount };
      charges.push(charge); // the side effect that must happen once
      return Response.json(charge, { status: 201, headers: { Location: `/charges/${charge.id}` } });
    });
  const fetchIt: FetchFunction = async (input, init) => handle(new Request(input, init));
  return { charges, handle, fetch: fetchIt };
}

const charge = (fetch: FetchFunction, key: string, amount: number) =>
  idempotentFetch("http://payments.test/charges", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ amount }),
    idempotencyKey: key,
    retry: { maxAttempts: 3, timeoutMs: 0 },
    clock: noWait,
    fetch,
  });

function httpCases(label: string, create: () => IdempotencyStore): RuntimeCase[] {
  const withApi = (
    name: string,
    body: (api: ReturnType<typeof paymentsApi>) => Promise<void>,
  ): RuntimeCase => ({
    name: `idempotool/http on ${label}: ${name}`,
    run: async () => {
      const store = create();
      try {
        await body(paymentsApi(store));
      } finally {
        await store.close?.();
      }
    },
  });
  return [
    withApi("the middleware replays a repeated request with its original response", async (api) => {
      const request = () =>
        new Request("http://payments.test/charges", {
          method: "POST",
          headers: { "content-type": "application/json", "idempotency-key": "charge-1" },
          body: JSON.stringify({ amount: 1200 }),
        });
      const first = await api.handle(request());
      const again = await api.handle(request());
      assert.equal(first.status, 201);
      assert.equal(again.status, 201);
      assert.equal(again.headers.get("idempotent-replayed"), "true");
      assert.equal(again.headers.get("location"), "/charges/ch_1");
      assert.deepEqual(await again.json(), await first.json());
      assert.equal(api.charges.length, 1);
    }),

    withApi("idempotentFetch retries a lost response with the same key and charges once", async (api) => {
      let lost = false;
      const flaky: FetchFunction = async (input, init) => {
        const response = await api.fetch(input, init);
        if (lost) return response;
        lost = true;
        await response.arrayBuffer(); // the server answered and recorded...
        throw new TypeError("fetch failed", { cause: new Error("connection reset") }); // ...the answer is lost
      };
      const { response, attempts, replayed } = await charge(flaky, "charge-2", 1200);
      assert.equal(attempts, 2);
      assert.equal(replayed, true);
      assert.deepEqual(await response.json(), { id: "ch_1", amount: 1200 });
      assert.equal(api.charges.length, 1);
    }),

    withApi("the same key for another amount is refused with idempotency_key_conflict", async (api) => {
      await charge(api.fetch, "charge-3", 1200);
      await assert.rejects(charge(api.fetch, "charge-3", 9900), (error: unknown) => {
        assert.ok(isIdempotentFetchError(error, "idempotency_key_conflict"), String(error));
        return true;
      });
      assert.equal(api.charges.length, 1);
    }),
  ];
}

/** What the envelope in the result's `_meta` says: whether the call was a replay. */
const wasReplay = (result: CallToolResult) =>
  (result._meta?.[MetaKey.envelope] as IdempotencyInfo | undefined)?.was_replay;

function mcpCase(label: string, create: () => IdempotencyStore): RuntimeCase {
  return {
    name: `idempotool/mcp on ${label}: a tool called twice with one key over a real McpServer posts once`,
    run: async () => {
      const store = create();
      const posts: string[] = [];
      const server = new McpServer({ name: "slack", version: "1.0.0" });
      registerIdempotentTool(
        server,
        "send_slack_message",
        {
          description: "Post a message to a Slack channel.",
          inputSchema: { channel: z.string(), text: z.string() },
        },
        async ({ channel, text }) => {
          posts.push(text);
          return { content: [{ type: "text", text: `Posted to ${channel}.` }] };
        },
        { store, effect: "irreversible" },
      );
      const [clientTransport, serverTransport] = InMemoryTransport.createLinkedPair();
      const client = new Client({ name: "agent-host", version: "1.0.0" });
      try {
        await server.connect(serverTransport);
        await client.connect(clientTransport);
        const { tools } = await client.listTools();
        assert.ok(
          tools
            .find((t) => t.name === "send_slack_message")
            ?.inputSchema.required?.includes("idempotency_key"),
        );

        const args = { channel: "#deploys", text: "v2.3.1 is live", idempotency_key: "turn-3-announce" };
        const call = async () =>
          (await client.callTool({ name: "send_slack_message", arguments: args })) as CallToolResult;
        const first = await call();
        const again = await call();
        assert.equal(first.isError, undefined);
        assert.equal(wasReplay(first), false);
        assert.equal(wasReplay(again), true);
        // The original content, and a line telling the model it was not repeated.
        assert.deepEqual(again.content[0], first.content[0]);
        const note = again.content[1];
        assert.ok(note?.type === "text" && note.text.startsWith("This is a replay: this action already ran"));
        assert.deepEqual(posts, ["v2.3.1 is live"]);
      } finally {
        await client.close();
        await server.close();
        await store.close?.();
      }
    },
  };
}

/** The http and mcp cases, on memory and on the runtime's SQLite. */
export function integrationCases(): RuntimeCase[] {
  const stores: [string, () => IdempotencyStore][] = [
    ["memoryStore", () => memoryStore()],
    ["sqliteStore", () => sqliteStore({ path: tempFile() })],
  ];
  return [
    ...stores.flatMap(([label, create]) => httpCases(label, create)),
    ...stores.map(([label, create]) => mcpCase(label, create)),
  ];
}
