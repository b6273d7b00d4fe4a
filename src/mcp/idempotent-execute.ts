/**
 * `idempotentExecute`: idempotency for MCP servers whose tools are a function given to the framework
 * (fastmcp's `addTool({ execute })`), where `registerIdempotentTool` has no McpServer to register on.
 */
import { ErrorCode, IdempotencyError } from "../core/errors.js";
import { idempotent, type ToolContext } from "../core/idempotent.js";
import { invalidOption } from "../core/option-checks.js";
import type { IdempotentOptions } from "../core/options.js";
import { callKey } from "./call-key.js";
import { defaultScope } from "./default-scope.js";
import { keyRequiredMessage } from "./key-description.js";
import type { ToolResult } from "./mcp-types.js";
import { envelopeResult, errorResult, type ThrownKind, thrownKind } from "./tool-results.js";

/** What a tool's `execute` may answer: a result, or text (one text block). */
export type ExecuteAnswer = ToolResult | string;

/** Options of {@link idempotentExecute}: those of `idempotent()` (the tool's `name` included), and the scope. */
export interface IdempotentExecuteOptions<A, Context> extends Omit<IdempotentOptions<A, ToolResult>, "key"> {
  /**
   * The namespace a key lives in, from the framework's context (e.g. the authenticated session). Default
   * `"default"` for calls without authentication, and `client:<id>` for a context with the MCP SDK's
   * `authInfo` naming a client id; an authenticated call with nobody in particular (a fastmcp `session`,
   * which is what its `authenticate` returned, or `authInfo` without a client id) is refused without this
   * option, as it would share the anonymous namespace.
   */
  readonly scope?: ((context: Context) => string) | undefined;
}

/**
 * Make a tool's `execute` idempotent: the key comes from the call's `idempotency_key` argument (add it to
 * the tool's parameters, required, with {@link keyDescription} as its description), every repeat of a key
 * with the same arguments answers the original result with a replay note, and conflicts, calls in
 * flight and unknown outcomes answer `isError` results that tell the model what to do: what
 * `registerIdempotentTool` answers. `execute` gets the arguments without the key, the framework's
 * context, and idempotool's (`key`, `attempt`, `signal`).
 * @example
 * import { FastMCP } from "fastmcp";
 * import { z } from "zod";
 * import { idempotentExecute, keyDescription } from "idempotool/mcp";
 * import { sqliteStore } from "idempotool/sqlite";
 *
 * const server = new FastMCP({ name: "mail", version: "1.0.0" });
 * server.addTool({
 *   name: "send_email",
 *   parameters: z.object({ to: z.string(), idempotency_key: z.string().describe(keyDescription(86_400_000)) }),
 *   execute: idempotentExecute(async ({ to }) => `Sent to ${to}.`, {
 *     name: "send_email",
 *     store: sqliteStore({ path: "idempotency.db" }),
 *   }),
 * });
 */
export function idempotentExecute<Args extends object, Context = unknown>(
  execute: (
    args: Omit<Args, "idempotency_key">,
    context: Context,
    idempotency: ToolContext,
  ) => ExecuteAnswer | Promise<ExecuteAnswer>,
  options: IdempotentExecuteOptions<Omit<Args, "idempotency_key">, Context>,
): (args: Args, context: Context) => Promise<ToolResult> {
  const owner = "idempotentExecute()";
  if (typeof execute !== "function") invalidOption(owner, "execute", "must be the tool's function");
  if (typeof options !== "object" || options === null) invalidOption(owner, "options", "must be an object");
  const { scope: scopeOption, ...given } = options;
  if (scopeOption !== undefined && typeof scopeOption !== "function") {
    invalidOption(owner, "scope", "must be a function");
  }
  type Rest = Omit<Args, "idempotency_key">;
  // idempotent() hands the tool the very arguments object it was called with: its call is found here.
  const calls = new WeakMap<object, { context: Context; thrown?: ThrownKind }>();
  const tool = idempotent<Rest, ToolResult>(async (args, idempotency) => {
    const call = calls.get(args as object);
    if (!call) throw new Error("idempotentExecute: a call reached the tool without its context");
    try {
      const answer = await execute(args, call.context, idempotency);
      return typeof answer === "string" ? { content: [{ type: "text", text: answer }] } : answer;
    } catch (error) {
      call.thrown = thrownKind(error);
      throw error;
    }
  }, given);

  return async (input, context) => {
    let parsed: ReturnType<typeof callKey>;
    try {
      parsed = callKey(input, undefined);
      if (parsed.key === undefined) throw new IdempotencyError(ErrorCode.keyMissing, keyRequiredMessage);
    } catch (error) {
      return errorResult(error, "", undefined, tool.effect);
    }
    const args = parsed.args as Rest;
    const call: { context: Context; thrown?: ThrownKind } = { context };
    calls.set(args as object, call);
    try {
      const scope = scopeOption === undefined ? defaultScope(owner, context) : scopeOption(context);
      const envelope = await tool(args, { key: parsed.key, scope });
      return envelopeResult(envelope);
    } catch (error) {
      return errorResult(error, parsed.key, call.thrown, tool.effect);
    }
  };
}
