/**
 * `auditTools()`: the seed's activation rules (names, annotations, descriptions), precise idempotency
 * key detection, and Steps 1–2 (which operation model, and why), on every tool format it reads.
 */
import { describe, expect, it } from "vitest";
import { classifyTool } from "../src/audit/classify.js";
import { findIdempotencyKey } from "../src/audit/idempotency-key.js";
import { auditTools, type ToolAudit } from "../src/audit/index.js";
import { type JsonSchema, readToolDefinitions, type ToolAnnotations } from "../src/audit/tool-definition.js";
import { isIdempotencyError, maxArgumentDepth } from "../src/index.js";

const mcpTool = (
  name: string,
  description = "",
  annotations?: ToolAnnotations,
  inputSchema?: JsonSchema,
) => ({
  name,
  description,
  inputSchema: inputSchema ?? { type: "object", properties: {} },
  ...(annotations ? { annotations } : {}),
});

const classOf = (name: string, description = "", annotations?: ToolAnnotations) =>
  classifyTool(readToolDefinitions([mcpTool(name, description, annotations)])[0]!).class;

function audit(tool: unknown, options: Parameters<typeof auditTools>[1] = {}): ToolAudit {
  return auditTools([tool], options).tools[0]!;
}

describe("classifying a tool by its name", () => {
  it.each([
    "send_email",
    "create_ticket",
    "charge_card",
    "post_message",
    "write_file",
    "publish_release",
    "transfer_funds",
    "delete_user",
    "update_profile",
    "notify_oncall",
  ])("treats the seed's prefix in %s as side-effectful", (name) => {
    expect(classOf(name)).toBe("side-effectful");
  });

  it.each(["sendEmail", "createTicket", "chargeCard", "postMessage", "deleteUser", "notifyOncall"])(
    "reads the camelCase form %s the same way",
    (name) => {
      expect(classOf(name)).toBe("side-effectful");
    },
  );

  it.each([
    "remove_member",
    "insert_row",
    "pay_invoice",
    "refund_order",
    "book_flight",
    "cancel_subscription",
  ])("knows other side-effect verbs: %s", (name) => {
    expect(classOf(name)).toBe("side-effectful");
  });

  it.each(["get_weather", "list_orders", "searchDocuments", "read_file", "fetch_page", "describe_table"])(
    "treats a read verb as read-only: %s",
    (name) => {
      expect(classOf(name)).toBe("read-only");
    },
  );

  it("finds the verb behind a namespace: github_create_issue, slack.post_message, email_send", () => {
    expect(classOf("github_create_issue")).toBe("side-effectful");
    expect(classOf("slack.post_message")).toBe("side-effectful");
    expect(classOf("email_send")).toBe("side-effectful");
  });

  it("reads a verb that is also a noun as the noun when a read verb follows: email_lookup", () => {
    expect(classOf("email_lookup")).toBe("read-only");
    expect(classOf("order_status_get")).toBe("read-only");
  });

  it("calls a name whose only verb may be a noun unclear, unless the description decides", () => {
    expect(classOf("order_status")).toBe("unclear");
    expect(classOf("order_status", "Returns the status of an order.")).toBe("read-only");
    expect(classOf("email_customer", "Sends an email to the customer.")).toBe("side-effectful");
  });

  it("sees the write in get_or_create", () => {
    expect(classOf("get_or_create_user")).toBe("side-effectful");
  });

  it("reads a two-word verb as one: check_out buys, look_up only reads", () => {
    expect(classOf("check_out")).toBe("side-effectful");
    expect(classOf("cart_check_out")).toBe("side-effectful");
    expect(classOf("look_up_customer")).toBe("read-only");
    expect(classOf("check_availability")).toBe("read-only");
    expect(classOf("HassTurnOff")).toBe("side-effectful");
    expect(classOf("turn_history")).toBe("unclear");
    expect(classOf("turn_entity_on", "Turn on a light or a switch.")).toBe("side-effectful");
  });

  it("sees the write after and or then: fetch_and_archive, search_then_replace", () => {
    expect(classOf("fetch_and_archive")).toBe("side-effectful");
    expect(classOf("searchThenReplace")).toBe("side-effectful");
    expect(classOf("get_name_and_email")).toBe("read-only");
  });

  it("reads a verb done again as the verb: redeploy, resend (but review is no view)", () => {
    expect(classOf("redeploy")).toBe("side-effectful");
    expect(classOf("resend_invite")).toBe("side-effectful");
    expect(classOf("review_summary")).toBe("unclear");
  });

  it.each([
    "unlock_door",
    "toggle_switch",
    "activate_scene",
    "HassTurnOn",
    "fork_repository",
    "finalize_invoice",
  ])("knows the verbs of devices and services: %s", (name) => {
    expect(classOf(name)).toBe("side-effectful");
  });

  it("calls a tool with no verb, description or annotations unclear", () => {
    expect(classOf("frobnicate")).toBe("unclear");
  });
});

describe("classifying a tool by its MCP annotations", () => {
  it("trusts readOnlyHint: true over a side-effect name, and keeps the name as evidence", () => {
    const c = classifyTool(
      readToolDefinitions([mcpTool("send_digest_preview", "", { readOnlyHint: true })])[0]!,
    );
    expect(c.class).toBe("read-only");
    expect(c.signals[0]?.from).toBe("annotations");
    expect(c.signals.some((s) => s.from === "name" && s.says === "side-effectful")).toBe(true);
  });

  it("takes readOnlyHint: false or destructiveHint: true as side-effectful, over a read verb", () => {
    expect(classOf("search_and_tag", "", { readOnlyHint: false })).toBe("side-effectful");
    expect(classOf("frobnicate", "", { destructiveHint: true })).toBe("side-effectful");
  });

  it("records idempotentHint as a claim: a warning, not a pass, when there is no key", () => {
    const tool = audit(mcpTool("delete_entities", "", { readOnlyHint: false, idempotentHint: true }));
    expect(tool.declaredIdempotent).toBe(true);
    expect(tool.verdict).toBe("warn");
    expect(auditTools([mcpTool("delete_entities", "", { idempotentHint: true })], { strict: true }).ok).toBe(
      false,
    );
  });
});

describe("classifying a tool by its description", () => {
  it.each([
    ["Charges the card through Stripe.", "Stripe"],
    ["Delivers the message with SendGrid.", "SendGrid"],
    ["Texts the driver using Twilio.", "Twilio"],
    ["Relays it to a Slack channel.", "Slack"],
    ["Puts the object into S3.", "S3"],
    ["Calls the partner webhook.", "a webhook"],
    ["Handles the payment for an order.", "payments"],
    ["Delivers an SMS to the number.", "SMS"],
  ])("treats a tool that wraps an outside API as side-effectful: %s", (description, label) => {
    const c = classifyTool(readToolDefinitions([mcpTool("frobnicate", description)])[0]!);
    expect(c.class).toBe("side-effectful");
    expect(c.mentions.map((m) => m.label)).toContain(label);
  });

  it("reads the description's opening verb, past filler", () => {
    expect(classOf("frobnicate", "Use this tool to send a reminder.")).toBe("side-effectful");
    expect(classOf("frobnicate", "Retrieves the current exchange rate.")).toBe("read-only");
    expect(classOf("frobnicate", "Publishes the draft.")).toBe("side-effectful");
  });

  it("reads an opening verb that may be a noun as the verb when an article follows it", () => {
    expect(classOf("order_pizza", "Orders a pizza for delivery.")).toBe("side-effectful");
    expect(classOf("set_thermostat", "Set the target temperature of a room.")).toBe("side-effectful");
    expect(classOf("place_order", "Place an order for the basket.")).toBe("side-effectful");
    expect(classOf("git_checkout", "Switches the working tree to a branch.")).toBe("side-effectful");
    expect(classOf("order_status", "Order status of a shipment.")).toBe("unclear");
    expect(classOf("open_nodes", "Open specific nodes by name.")).toBe("unclear");
  });

  it("reads a two-word opening verb as one: Checks out the cart", () => {
    expect(classOf("cart", "Checks out the cart and charges the card on file.")).toBe("side-effectful");
  });

  it("does not take a service that reads and writes alike, named in the description, as a side effect", () => {
    expect(classOf("repository_overview", "Overview of a GitHub repository.")).toBe("unclear");
  });

  it("believes a description that says it is read-only", () => {
    expect(classOf("frobnicate", "Read-only: shows the Stripe balance.")).toBe("read-only");
  });

  it("lets the name outweigh the description: get_stripe_balance only reads Stripe", () => {
    expect(classOf("get_stripe_balance", "Reads the balance from Stripe.")).toBe("read-only");
  });
});

describe("finding the idempotency key", () => {
  const schema = (properties: Record<string, JsonSchema>, required: string[] = []): JsonSchema => ({
    type: "object",
    properties,
    required,
  });

  it("refuses a schema whose allOf or $ref chain is 6,000 levels deep as invalid_arguments, not a stack overflow", () => {
    let allOf: JsonSchema = schema({ idempotency_key: {} }, ["idempotency_key"]);
    for (let i = 0; i < 6_000; i++) allOf = { allOf: [allOf] };
    const $defs: Record<string, JsonSchema> = { d6000: schema({ idempotency_key: {} }) };
    for (let i = 0; i < 6_000; i++) $defs[`d${i}`] = { $ref: `#/$defs/d${i + 1}` };
    for (const inputSchema of [allOf, { $defs, $ref: "#/$defs/d0" }]) {
      let thrown: unknown;
      try {
        auditTools([{ name: "send_email", description: "Sends an email", inputSchema }]);
      } catch (error) {
        thrown = error;
      }
      expect(isIdempotencyError(thrown, "invalid_arguments"), String(thrown)).toBe(true);
      expect((thrown as Error).message).toContain(`more than ${maxArgumentDepth} levels`);
    }
  });

  it("still reads a key through an allOf chain as deep as the limit allows", () => {
    let allOf: JsonSchema = schema({ idempotency_key: {} }, ["idempotency_key"]);
    for (let i = 0; i < maxArgumentDepth - 1; i++) allOf = { allOf: [allOf] };
    expect(findIdempotencyKey(schema({ options: allOf }, ["options"])).key?.field).toBe(
      "options.idempotency_key",
    );
  });

  it("finds idempotency_key, idempotencyKey and *_idempotency_key, and whether each is required", () => {
    expect(findIdempotencyKey(schema({ idempotency_key: {} }, ["idempotency_key"])).key).toEqual({
      field: "idempotency_key",
      required: true,
    });
    expect(findIdempotencyKey(schema({ idempotencyKey: {} })).key).toEqual({
      field: "idempotencyKey",
      required: false,
    });
    expect(
      findIdempotencyKey(schema({ charge_idempotency_key: {} }, ["charge_idempotency_key"])).key?.field,
    ).toBe("charge_idempotency_key");
  });

  it("knows the dedup tokens of AWS and SQS", () => {
    expect(findIdempotencyKey(schema({ ClientToken: {} })).key?.field).toBe("ClientToken");
    expect(findIdempotencyKey(schema({ MessageDeduplicationId: {} })).key?.field).toBe(
      "MessageDeduplicationId",
    );
  });

  it("counts request_id only when its description says the server dedupes on it", () => {
    const plain = findIdempotencyKey(schema({ request_id: { type: "string" } }));
    expect(plain.key).toBeUndefined();
    expect(plain.lookalikes).toEqual(["request_id"]);
    const described = findIdempotencyKey(
      schema({ requestId: { type: "string", description: "Retries with the same id are deduplicated." } }),
    );
    expect(described.key?.field).toBe("requestId");
  });

  it("does not count Slack's client_msg_id, which Slack does not enforce", () => {
    expect(findIdempotencyKey(schema({ client_msg_id: { type: "string" } })).key).toBeUndefined();
  });

  it("finds a nested key, required only if every level is", () => {
    const nested = schema({ options: schema({ idempotencyKey: {} }, ["idempotencyKey"]) });
    expect(findIdempotencyKey(nested).key).toEqual({ field: "options.idempotencyKey", required: false });
    const required = schema({ options: schema({ idempotencyKey: {} }, ["idempotencyKey"]) }, ["options"]);
    expect(findIdempotencyKey(required).key).toEqual({ field: "options.idempotencyKey", required: true });
  });

  it("follows allOf and local $refs", () => {
    const found = findIdempotencyKey({
      type: "object",
      $defs: { Key: { type: "string" } },
      allOf: [{ properties: { idempotency_key: { $ref: "#/$defs/Key" } }, required: ["idempotency_key"] }],
    });
    expect(found.key).toEqual({ field: "idempotency_key", required: true });
  });

  it("has nothing to find in a tool with no schema", () => {
    expect(findIdempotencyKey(undefined)).toEqual({ key: undefined, lookalikes: [] });
  });
});

describe("recommending the mechanism (Steps 1–2)", () => {
  const fn = (name: string, description: string) => ({
    type: "function",
    function: { name, description, parameters: { type: "object", properties: {} } },
  });
  const mechanisms = (tool: ToolAudit) => tool.recommendations.map((r) => r.mechanism);

  it("passes the key downstream to an API that takes one: Stripe is OP-1, effect native-key", () => {
    const tool = audit(fn("charge_card", "Charge the card with Stripe."));
    expect(mechanisms(tool)).toEqual(["OP-1"]);
    expect(tool.effect).toBe("native-key");
    expect(tool.recommendations[0]?.reason).toContain("Stripe");
  });

  it("names a file, blob or artifact write by its content: OP-3", () => {
    expect(mechanisms(audit(fn("upload_artifact", "Upload the build artifact.")))).toEqual(["OP-3"]);
  });

  it("never calls moving, renaming, copying, editing or removing a file a content-addressed write: move_file", () => {
    // The filesystem server's move_file: a repeat finds the source gone, not a write to name by content.
    const moveFile = "Move or rename a file or directory; fails if the destination exists.";
    const annotated = { readOnlyHint: false, destructiveHint: false };
    expect(mechanisms(audit(mcpTool("move_file", moveFile, annotated)))).toEqual(["OP-7"]);
    expect(mechanisms(audit(fn("move_file", moveFile)))).toEqual(["OP-8"]);
    expect(audit(fn("move_file", moveFile)).effect).toBe("irreversible");
    // Annotated as the owner's closed world, a move is a change of several things there: OP-2.
    const closed = audit(mcpTool("move_file", moveFile, { ...annotated, openWorldHint: false }));
    expect(mechanisms(closed)).toEqual(["OP-7", "OP-2"]);
    for (const [name, description] of [
      ["rename_document", "Rename a document."],
      ["copy_file", "Copy a file to a new path."],
      ["edit_file", "Make line-based edits to a text file."],
      ["append_to_file", "Append text to a file."],
      ["delete_file", "Delete a file."],
    ]) {
      expect(mechanisms(audit(fn(name!, description!))), name).not.toContain("OP-3");
    }
    // Writing new content still is one.
    expect(mechanisms(audit(fn("write_file", "Create a file with the given content.")))).toEqual(["OP-3"]);
  });

  it("dedupes a single-row insert in the database itself: OP-4", () => {
    const tool = audit(fn("create_invoice", "Create an invoice row in our Postgres database."));
    expect(mechanisms(tool)).toEqual(["OP-4"]);
    expect(tool.effect).toBe("owned-store");
  });

  it("keeps a multi-row write and its dedup record in one transaction: OP-2", () => {
    expect(mechanisms(audit(fn("update_inventory", "Update stock levels in the database.")))).toEqual([
      "OP-2",
    ]);
    expect(
      mechanisms(audit(fn("create_entities", "Create multiple entities in the knowledge graph."))),
    ).toEqual(["OP-2"]);
  });

  it("uses a saga for what can be undone: refunds, money with no known key (OP-5)", () => {
    const wire = audit(fn("transfer_funds", "Move money between accounts by bank transfer."));
    expect(mechanisms(wire)).toEqual(["OP-5"]);
    expect(wire.effect).toBe("compensatable");
  });

  it("never asks a third party's store to hold the dedup row or the constraint: merge_pull_request", () => {
    for (const description of ["Merge a pull request in a GitHub repository.", "Merge a pull request."]) {
      const tool = audit(fn("merge_pull_request", description));
      expect(mechanisms(tool), description).toEqual(["OP-8"]);
      expect(tool.effect).toBe("irreversible");
      expect(mechanisms(audit(mcpTool("merge_pull_request", description))), description).toEqual(["OP-7"]);
    }
  });

  it("takes a third party named in the tool's name as whose store it is: spotify_add_to_queue", () => {
    const tool = audit(fn("spotify_add_to_queue", "Queue a track to play next."));
    expect(mechanisms(tool)).toEqual(["OP-8"]);
    expect(tool.mentions).toContain("Spotify");
  });

  it("reads openWorldHint: true as someone else's store, even when a database is named", () => {
    const open = audit(
      mcpTool("add_row", "Insert a row into the partner's database.", {
        readOnlyHint: false,
        openWorldHint: true,
      }),
    );
    expect(mechanisms(open)).toEqual(["OP-7"]);
    expect(open.effect).toBe("irreversible");
  });

  it("reads openWorldHint: false as the owner's store, where a write may share a transaction", () => {
    const closed = audit(
      mcpTool("update_settings", "Change the settings.", { readOnlyHint: false, openWorldHint: false }),
    );
    expect(mechanisms(closed)).toEqual(["OP-7", "OP-2"]);
    expect(closed.effect).toBe("owned-store");
  });

  it("names no content write by its content unless the store is named as the owner's: upload_video", () => {
    expect(mechanisms(audit(fn("upload_video", "Upload a video to the channel.")))).toEqual(["OP-8"]);
    expect(mechanisms(audit(fn("upload_video", "Upload a video file to our bucket.")))).toEqual(["OP-3"]);
  });

  it("does not take a table at a restaurant for a database table", () => {
    expect(mechanisms(audit(fn("book_table", "Book a table at a restaurant for four.")))).toEqual(["OP-8"]);
  });

  it("falls back to a pre-call checkpoint when nothing downstream dedupes: OP-8, irreversible", () => {
    const tool = audit(fn("send_email", "Send an email through SendGrid."));
    expect(mechanisms(tool)).toEqual(["OP-8"]);
    expect(tool.effect).toBe("irreversible");
  });

  it("asks an MCP tool for a required idempotency_key first (OP-7), then the downstream mechanism", () => {
    const tool = audit(mcpTool("charge_card", "Charge the card with Stripe."));
    expect(mechanisms(tool)).toEqual(["OP-7", "OP-1"]);
    expect(mechanisms(audit(mcpTool("send_sms", "Send an SMS with Twilio.")))).toEqual(["OP-7"]);
  });

  it("draws the key from checkpointed state in LangGraph (OP-6)", () => {
    const tool = audit(fn("send_email", "Send an email."), { layer: "langgraph" });
    expect(mechanisms(tool)).toEqual(["OP-6", "OP-8"]);
  });

  it("recommends nothing for a read-only tool", () => {
    const tool = audit(fn("get_weather", "Returns the weather."));
    expect(tool.recommendations).toEqual([]);
    expect(tool.effect).toBeNull();
  });
});

describe("the audit's verdicts", () => {
  const withKey = (required: boolean) =>
    mcpTool("send_email", "", undefined, {
      type: "object",
      properties: { idempotency_key: { type: "string" } },
      required: required ? ["idempotency_key"] : [],
    });

  it("fails a side-effectful tool with no key, and the report with it", () => {
    const report = auditTools([mcpTool("send_email"), mcpTool("list_emails")]);
    expect(report.tools.map((t) => t.verdict)).toEqual(["fail", "ok"]);
    expect(report.ok).toBe(false);
    expect(report.counts).toMatchObject({ tools: 2, sideEffectful: 1, readOnly: 1, withoutKey: 1, fail: 1 });
  });

  it("passes a required key, warns on an optional one, and fails the warning under strict", () => {
    expect(audit(withKey(true)).verdict).toBe("ok");
    expect(audit(withKey(false)).verdict).toBe("warn");
    expect(auditTools([withKey(false)]).ok).toBe(true);
    expect(auditTools([withKey(false)], { strict: true }).ok).toBe(false);
  });

  it("reports an ignored tool without failing on it", () => {
    const report = auditTools([mcpTool("send_email")], { ignore: ["send_email"] });
    expect(report.tools[0]?.verdict).toBe("ignored");
    expect(report.ok).toBe(true);
  });

  it("names a lookalike key in the finding", () => {
    const tool = audit(
      mcpTool("post_message", "", undefined, {
        type: "object",
        properties: { client_msg_id: { type: "string" } },
      }),
    );
    expect(tool.verdict).toBe("fail");
    expect(tool.finding).toContain("client_msg_id");
  });
});

describe("reading tool definitions", () => {
  const schema = { type: "object", properties: {} };

  it("recognises each format, also mixed in one list", () => {
    const tools = readToolDefinitions([
      { type: "function", function: { name: "a", parameters: schema } },
      { type: "function", name: "b", parameters: schema },
      { name: "c", input_schema: schema },
      { name: "d", inputSchema: schema, annotations: { readOnlyHint: true } },
      { name: "e", parameters: schema },
    ]);
    expect(tools.map((t) => t.format)).toEqual([
      "openai-chat",
      "openai-responses",
      "anthropic",
      "mcp",
      "openai-function",
    ]);
    expect(tools[3]?.annotations).toEqual({ readOnlyHint: true });
  });

  it("reads a tools/list result, a request body, a JSON-RPC response and one tool alone", () => {
    const tool = { name: "send_email", inputSchema: schema };
    expect(readToolDefinitions({ tools: [tool] })).toHaveLength(1);
    expect(readToolDefinitions({ model: "m", tools: [tool, tool] })).toHaveLength(2);
    expect(readToolDefinitions({ jsonrpc: "2.0", id: 1, result: { tools: [tool] } })).toHaveLength(1);
    expect(readToolDefinitions(tool)).toHaveLength(1);
    expect(readToolDefinitions({ functions: [{ name: "f", parameters: schema }] })[0]?.format).toBe(
      "openai-function",
    );
  });

  it("names the entry it cannot read", () => {
    const read = (input: unknown) => () => readToolDefinitions(input);
    expect(read({ tools: [{ name: "a", inputSchema: schema }, { title: "x" }] })).toThrow(/tools\[1\]/);
    expect(read({ tools: [{ inputSchema: schema }] })).toThrow(/has no name/);
    expect(read("nope")).toThrow(/not a tool list/);
    try {
      readToolDefinitions(42);
    } catch (error) {
      expect(isIdempotencyError(error, "invalid_arguments")).toBe(true);
    }
  });

  it("refuses bad options by name", () => {
    expect(() => auditTools([], { layer: "grpc" as never })).toThrow(/`layer`/);
    expect(() => auditTools([], { ignore: "send_email" as never })).toThrow(/`ignore`/);
  });
});
