/**
 * Type tests: `significant`, `similar.fields` and `intentFields` name the tool's own arguments, so a
 * misspelt field does not compile, on every API that takes one. Each `@ts-expect-error` line is a
 * misspelling `tsc --noEmit` must reject; the lines around it are the call shapes that must still
 * compile and infer as before. vitest runs the runtime half: making these tools is valid at run time.
 */
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { tool } from "ai";
import { describe, expect, expectTypeOf, it } from "vitest";
import { z } from "zod";
import { z as z3 } from "zod/v3";
import { idempotentTool, idempotentTools } from "../src/ai-sdk/index.js";
import {
  type ArgumentField,
  type FieldList,
  type IdempotentOptions,
  idempotent,
  memoryStore,
} from "../src/index.js";
import { nodeTool } from "../src/langgraph/index.js";
import { intentKey, loopTool } from "../src/loops/index.js";
import { registerIdempotentTool } from "../src/mcp/index.js";
import { saga } from "../src/saga/index.js";

interface Email {
  readonly to: string;
  readonly subject: string;
  readonly body: string;
  readonly cc?: string;
}

const store = memoryStore();
const send = async (email: Email) => ({ id: `m-${email.to}` });

describe("the field list types", () => {
  it("name the top-level arguments, or any string when the arguments are not a known object", () => {
    expectTypeOf<ArgumentField<Email>>().toEqualTypeOf<"to" | "subject" | "body" | "cc">();
    expectTypeOf<ArgumentField<{ to: string } | { channel: string }>>().toEqualTypeOf<"to" | "channel">();
    expectTypeOf<ArgumentField<Record<string, unknown>>>().toEqualTypeOf<string>();
    expectTypeOf<ArgumentField<{ to: string; [field: string]: unknown }>>().toEqualTypeOf<string>();
    expectTypeOf<ArgumentField<unknown>>().toEqualTypeOf<string>();
    // biome-ignore lint/suspicious/noExplicitAny: the point is that `any` arguments take any name
    expectTypeOf<ArgumentField<any>>().toEqualTypeOf<string>();
    expectTypeOf<ArgumentField<never>>().toEqualTypeOf<string>();
    expectTypeOf<ArgumentField<string>>().toEqualTypeOf<string>();
    expectTypeOf<FieldList<Email>>().toEqualTypeOf<readonly ("to" | "subject" | "body" | "cc")[]>();
  });
});

describe("idempotent()", () => {
  it("takes the fields of the function's arguments, and rejects a misspelt one", () => {
    const tool = idempotent(send, { name: "send_email", store, significant: ["to", "cc"] });
    expectTypeOf(tool).parameter(0).toEqualTypeOf<Email>();
    idempotent(send, {
      name: "send_email",
      store,
      // @ts-expect-error "too" is not an argument of send_email
      significant: ["too"],
    });
    idempotent(send, {
      name: "send_email",
      store,
      // @ts-expect-error "too" is not an argument of send_email
      similar: { fields: ["too"] },
    });
    idempotent(send, { name: "send_email", store, similar: { fields: ["to"], windowMs: 60_000 } });
    const options: IdempotentOptions<Email, { id: string }> = {
      name: "send_email",
      store,
      significant: ["to"],
    };
    idempotent(send, options);
  });

  it("leaves untyped arguments as they were: the list does not decide them", () => {
    const untyped = idempotent(async (args) => args, { name: "echo", store, significant: ["to"] });
    expectTypeOf(untyped).parameter(0).toEqualTypeOf<unknown>();
    const none = idempotent(async () => 1, { name: "ping", store, significant: ["to"] });
    expectTypeOf(none).parameter(0).toEqualTypeOf<unknown>();
    // biome-ignore lint/suspicious/noExplicitAny: a user's loosely typed tool
    const loose = idempotent(async (args: any) => args, { name: "loose", store, significant: ["anything"] });
    expectTypeOf(loose).parameter(0).toBeAny();
    const record = idempotent(async (args: Record<string, unknown>) => args, {
      name: "record",
      store,
      significant: ["anything"],
      similar: { fields: ["else"] },
    });
    expectTypeOf(record).parameter(0).toEqualTypeOf<Record<string, unknown>>();
  });

  it("takes a field of any member of a union of arguments", () => {
    type Message =
      | { readonly to: string; readonly text: string }
      | { readonly channel: string; readonly text: string };
    idempotent(async (_message: Message) => 1, { name: "post", store, significant: ["to", "channel"] });
    idempotent(async (_message: Message) => 1, {
      name: "post",
      store,
      // @ts-expect-error "chanel" is in no member of the union
      significant: ["chanel"],
    });
  });
});

describe("saga()", () => {
  it("takes the fields of run's arguments", () => {
    const run = async (args: { orderId: string; cents: number }) => ({ externalId: `re_${args.orderId}` });
    saga({ name: "refund", store, run, significant: ["orderId"] });
    // @ts-expect-error "order" is not an argument of run
    saga({ name: "refund", store, run, significant: ["order"] });
  });
});

describe("idempotool/loops", () => {
  it("types intentFields, significant and similar.fields by the tool's arguments", () => {
    loopTool(send, {
      name: "send_email",
      store,
      parse: (input) => input as Email,
      intentFields: ["to", "subject"],
      significant: ["to", "subject"],
      similar: { fields: ["to"] },
    });
    loopTool(send, {
      name: "send_email",
      store,
      // @ts-expect-error "subjet" is not an argument of send_email
      intentFields: ["to", "subjet"],
    });
    loopTool(send, {
      name: "send_email",
      store,
      // @ts-expect-error "too" is not an argument of send_email
      significant: ["too"],
    });
  });

  it("types intentKey's fields by the arguments it is given", () => {
    const email: Email = { to: "alice@example.com", subject: "Hi", body: "…" };
    intentKey("turn-7", "send_email", email, ["to", "subject"]);
    // At run time, a list none of whose fields the arguments have is rejected too.
    // @ts-expect-error "subjet" is not a field of the arguments
    expect(() => intentKey("turn-7", "send_email", email, ["subjet"])).toThrow(/subjet/);
    const parsed: unknown = JSON.parse('{"to":"bob"}');
    intentKey("turn-7", "send_email", parsed, ["to"]);
  });
});

describe("idempotool/mcp", () => {
  it("types significant by the zod input shape, and still infers the handler's arguments", () => {
    const server = new McpServer({ name: "s", version: "1.0.0" });
    registerIdempotentTool(
      server,
      "send",
      { inputSchema: { to: z.string(), trace: z.string().optional() } },
      (args) => {
        expectTypeOf(args.to).toEqualTypeOf<string>();
        return { content: [] };
      },
      { store, significant: ["to"], similar: { fields: ["to"] } },
    );
    registerIdempotentTool(
      server,
      "send_v3",
      { inputSchema: { to: z3.string() } },
      (args) => {
        expectTypeOf(args.to).toEqualTypeOf<string>();
        return { content: [] };
      },
      { store, significant: ["to"] },
    );
    registerIdempotentTool(
      server,
      "send_typo",
      { inputSchema: { to: z.string() } },
      () => ({ content: [] }),
      // @ts-expect-error "too" is not in the input schema
      { store, significant: ["too"] },
    );
    registerIdempotentTool(
      server,
      "send_key",
      { inputSchema: { to: z.string() } },
      () => ({ content: [] }),
      // @ts-expect-error the key is never a field of the tool's own arguments
      { store, significant: ["idempotency_key"] },
    );
  });
});

describe("idempotool/langgraph", () => {
  it("types the fields of the tool a node calls", () => {
    const emailSchema = z.object({ to: z.string(), subject: z.string(), body: z.string() });
    const sendFromNode = nodeTool(
      idempotent(async (args: z.infer<typeof emailSchema>) => ({ id: `m-${args.to}` }), {
        name: "send_email",
        store,
        significant: ["to", "subject"],
      }),
      { key: "state" },
    );
    expectTypeOf(sendFromNode).parameter(0).toEqualTypeOf<z.infer<typeof emailSchema>>();
    idempotent(async (args: z.infer<typeof emailSchema>) => ({ id: `m-${args.to}` }), {
      name: "send_email",
      store,
      // @ts-expect-error "bodi" is not a field of the schema
      significant: ["bodi"],
    });
  });
});

describe("idempotool/ai-sdk", () => {
  const sendTool = tool({
    inputSchema: z.object({ to: z.string(), subject: z.string(), body: z.string() }),
    execute: async ({ to }) => ({ messageId: `m-${to}` }),
  });

  it("types intentFields, significant and similar.fields of one tool by its input schema", () => {
    idempotentTool(sendTool, {
      name: "send_email",
      store,
      intentFields: ["to", "subject"],
      significant: ["to", "subject"],
      similar: { fields: ["to"] },
    });
    idempotentTool(sendTool, {
      name: "send_email",
      store,
      // @ts-expect-error "subjet" is not in the input schema
      intentFields: ["subjet"],
    });
    idempotentTool(sendTool, {
      name: "send_email",
      store,
      // @ts-expect-error "too" is not in the input schema
      significant: ["too"],
    });
  });

  it("types the per-tool fields of a tool set by each tool's schema", () => {
    const weather = tool({
      inputSchema: z.object({ city: z.string() }),
      execute: async ({ city }) => ({ city, celsius: 21 }),
    });
    idempotentTools(
      { send_email: sendTool, get_weather: weather },
      { store, perTool: { send_email: { intentFields: ["to"] }, get_weather: { significant: ["city"] } } },
    );
    idempotentTools(
      { send_email: sendTool, get_weather: weather },
      // @ts-expect-error "city" is an argument of get_weather, not of send_email
      { store, perTool: { send_email: { intentFields: ["city"] } } },
    );
  });
});
