/**
 * registerIdempotentTool's `requestState` option on the MCP SDK 2.x (2026-07-28 revision): a question the
 * tool asks is sealed to the call that asked it, and answers carried to another call (another key, other
 * arguments), answers without the question's state, and a state that does not open are refused before
 * anything runs. A raw client speaks the wire here, as a hostile one would; the genuine exchange runs
 * through the SDK's own client.
 */
import {
  type CallToolResult,
  Client,
  type InMemoryTransport as ClientInMemoryTransport,
} from "@modelcontextprotocol/client";
import {
  createRequestStateCodec,
  InMemoryTransport,
  inputRequired,
  McpServer,
} from "@modelcontextprotocol/server";
import { serveStdio } from "@modelcontextprotocol/server/stdio";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { memoryStore } from "../src/index.js";
import { type IdempotencyErrorInfo, MetaKey, registerIdempotentTool } from "../src/mcp/index.js";
import { fakeClock } from "../src/testing/fake-clock.js";
import { confirmed, confirmPurchase } from "./fixtures/mcp-v2.js";

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const codec = createRequestStateCodec({ key: "a test key of at least thirty-two bytes, for HMAC" });

/**
 * A shop whose `buy` asks the client to confirm before it buys, behind registerIdempotentTool with the
 * codec; `verifyInServer` also gives the server the codec's verify, as the docs advise.
 */
function shop(bought: string[], verifyInServer: boolean) {
  const store = memoryStore();
  return () => {
    const server = new McpServer(
      { name: "shop", version: "1.0.0" },
      {
        supportedProtocolVersions: ["2026-07-28", "2025-11-25"],
        ...(verifyInServer ? { requestState: { verify: codec.verify } } : {}),
      },
    );
    registerIdempotentTool(
      server,
      "buy",
      { description: "Buy an item.", inputSchema: z.object({ item: z.string() }) },
      async ({ item }, ctx) => {
        if (!confirmed(ctx.mcpReq.inputResponses)) return confirmPurchase(item, `asked about ${item}`);
        // The tool's own state comes back as it gave it.
        bought.push(`${item} (${String(ctx.mcpReq.requestState())})`);
        return { content: [{ type: "text", text: `bought ${item}` }] };
      },
      { store, requestState: codec },
    );
    return server;
  };
}

type Answer = { result?: Record<string, unknown>; error?: { code: number; message: string } };

/** A client that writes JSON-RPC by hand on the 2026-07-28 revision. */
async function rawClient(factory: () => McpServer) {
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  const served = serveStdio(factory, { transport: serverSide });
  cleanups.push(() => served.close());
  const waiting = new Map<unknown, (answer: Answer) => void>();
  clientSide.onmessage = (message) => {
    const { id } = message as { id?: unknown };
    waiting.get(id)?.(message as Answer);
  };
  await clientSide.start();
  let nextId = 0;
  return (params: Record<string, unknown>) => {
    const id = ++nextId;
    const answered = new Promise<Answer>((resolve) => waiting.set(id, resolve));
    const _meta = {
      "io.modelcontextprotocol/protocolVersion": "2026-07-28",
      "io.modelcontextprotocol/clientCapabilities": { elicitation: { form: {} } },
    };
    void clientSide.send({ jsonrpc: "2.0", id, method: "tools/call", params: { ...params, _meta } });
    return answered;
  };
}

const buy = (item: string, key: string) => ({ name: "buy", arguments: { item, idempotency_key: key } });
const yes = { confirm: { action: "accept", content: { confirm: true } } };
const refusal = (answer: Answer) =>
  answer.error?.code ?? (answer.result?._meta as Record<string, unknown> | undefined)?.[MetaKey.error];

describe.each([
  { verifyInServer: true, where: "the server verifies it too" },
  { verifyInServer: false, where: "only the tool verifies it" },
])("a sealed question ($where)", ({ verifyInServer }) => {
  it("refuses its answers carried to another call, another key or other arguments, and runs nothing", async () => {
    const bought: string[] = [];
    const call = await rawClient(shop(bought, verifyInServer));
    const question = await call(buy("lamp", "order-1"));
    expect(question.result?.resultType).toBe("input_required");
    const requestState = question.result?.requestState;
    expect(requestState).toEqual(expect.any(String));
    expect(requestState).not.toContain("lamp");

    const otherKey = await call({ ...buy("lamp", "order-2"), inputResponses: yes, requestState });
    const otherItem = await call({ ...buy("sofa", "order-1"), inputResponses: yes, requestState });
    expect((refusal(otherKey) as IdempotencyErrorInfo).code).toBe("invalid_arguments");
    expect((refusal(otherItem) as IdempotencyErrorInfo).code).toBe("invalid_arguments");
    expect(bought).toEqual([]);

    // The question's own call goes on: nothing above claimed its key.
    const genuine = await call({ ...buy("lamp", "order-1"), inputResponses: yes, requestState });
    expect(genuine.result?.content).toEqual([{ type: "text", text: "bought lamp" }]);
    expect(bought).toEqual(["lamp (asked about lamp)"]);
  });

  it("refuses answers that come without the question's requestState, or with one that does not open", async () => {
    const bought: string[] = [];
    const call = await rawClient(shop(bought, verifyInServer));
    const without = await call({ ...buy("lamp", "order-1"), inputResponses: yes });
    const forged = await call({ ...buy("lamp", "order-1"), inputResponses: yes, requestState: "forged" });
    expect((refusal(without) as IdempotencyErrorInfo).code).toBe("invalid_arguments");
    // A server that verifies answers a bad state itself, with the protocol's own error.
    if (verifyInServer) expect(refusal(forged)).toBe(-32602);
    else expect((refusal(forged) as IdempotencyErrorInfo).code).toBe("invalid_arguments");
    expect(bought).toEqual([]);
  });
});

describe("the requestState option", () => {
  it("is refused before the tool is registered when it is not a codec", () => {
    const server = new McpServer({ name: "shop", version: "1.0.0" });
    const register = () =>
      registerIdempotentTool(
        server,
        "buy",
        { inputSchema: z.object({ item: z.string() }) },
        async () => ({ content: [] }),
        {
          store: memoryStore(),
          requestState: { mint: async () => "" } as never,
        },
      );
    expect(register).toThrow(/option `requestState` must be a codec with mint and verify/);
  });
});

describe("a sealed question, through the SDK's own client", () => {
  it("is asked once, the purchase runs once, and a repeat replays it", async () => {
    const bought: string[] = [];
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    const served = serveStdio(shop(bought, true), { transport: serverSide });
    let asked = 0;
    const client = new Client(
      { name: "agent", version: "1.0.0" },
      { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: { pin: "2026-07-28" } } },
    );
    client.setRequestHandler("elicitation/create", async () => {
      asked++;
      return { action: "accept", content: { confirm: true } };
    });
    await client.connect(clientSide as unknown as ClientInMemoryTransport);
    cleanups.push(
      () => served.close(),
      () => client.close(),
    );
    const first = (await client.callTool(buy("lamp", "order-1"))) as CallToolResult;
    const repeat = (await client.callTool(buy("lamp", "order-1"))) as CallToolResult;
    expect(first.content).toEqual([{ type: "text", text: "bought lamp" }]);
    expect(repeat._meta?.[MetaKey.envelope]).toMatchObject({ was_replay: true });
    expect(bought).toEqual(["lamp (asked about lamp)"]);
    expect(asked).toBe(1);
  });
});

describe("a sealed question, carried elsewhere", () => {
  const ask = (message: string, state: string) =>
    inputRequired({
      inputRequests: {
        confirm: inputRequired.elicit({
          message,
          requestedSchema: {
            type: "object",
            properties: { confirm: { type: "boolean" } },
            required: ["confirm"],
          },
        }),
      },
      requestState: state,
    });
  const server = (name: string) =>
    new McpServer(
      { name, version: "1.0.0" },
      { supportedProtocolVersions: ["2026-07-28", "2025-11-25"], requestState: { verify: codec.verify } },
    );

  it("does not open for another tool called with the same key and arguments", async () => {
    const ran: string[] = [];
    const store = memoryStore();
    const call = await rawClient(() => {
      const bank = server("bank");
      const schema = z.object({ to: z.string(), amount: z.number() });
      registerIdempotentTool(
        bank,
        "preview_transfer",
        { inputSchema: schema },
        async ({ to, amount }, ctx) =>
          ctx.mcpReq.inputResponses === undefined
            ? ask(`Show the fees for ${amount} to ${to}?`, "preview")
            : { content: [{ type: "text", text: "fee: 0" }] },
        { store, requestState: codec },
      );
      registerIdempotentTool(
        bank,
        "transfer",
        { inputSchema: schema },
        async ({ to, amount }, ctx) => {
          if (ctx.mcpReq.inputResponses === undefined) return ask(`Send ${amount} to ${to}?`, "transfer");
          ran.push(`${amount} to ${to}`);
          return { content: [{ type: "text", text: "sent" }] };
        },
        { store, requestState: codec },
      );
      return bank;
    });
    const args = { to: "mallory", amount: 1000, idempotency_key: "k-1" };
    const question = await call({ name: "preview_transfer", arguments: args });
    const requestState = question.result?.requestState;
    const carried = await call({ name: "transfer", arguments: args, inputResponses: yes, requestState });
    expect((refusal(carried) as IdempotencyErrorInfo).code).toBe("invalid_arguments");
    expect(ran).toEqual([]);
  });

  it("does not open for a keyless call with the same arguments once its window has passed", async () => {
    const bought: string[] = [];
    const clock = fakeClock();
    const store = memoryStore();
    const call = await rawClient(() => {
      const shop = server("shop");
      registerIdempotentTool(
        shop,
        "buy",
        { inputSchema: z.object({ item: z.string() }) },
        async ({ item }, ctx) => {
          if (ctx.mcpReq.inputResponses === undefined) return ask(`Buy ${item}?`, "asked");
          bought.push(item);
          return { content: [{ type: "text", text: `bought ${item}` }] };
        },
        {
          store,
          clock,
          requestState: codec,
          keyFrom: { argument: "optional" },
          withoutKey: { windowMs: 5_000 },
        },
      );
      return shop;
    });
    const question = await call({ name: "buy", arguments: { item: "lamp" } });
    const requestState = question.result?.requestState;
    await call({ name: "buy", arguments: { item: "lamp" }, inputResponses: yes, requestState });
    expect(bought).toEqual(["lamp"]);
    await clock.advance(60_000);
    const again = await call({ name: "buy", arguments: { item: "lamp" }, inputResponses: yes, requestState });
    expect((refusal(again) as IdempotencyErrorInfo).code).toBe("invalid_arguments");
    expect(bought).toEqual(["lamp"]);
  });
});
