/**
 * A whole AI SDK tools object made safe to call twice, with shared options and per-tool overrides.
 */
import type { InferToolInput, InferToolOutput, Tool, ToolSet } from "ai";
import { IdempotencyError } from "../core/errors.js";
import type { RecordOptions } from "../core/options.js";
import type { ModelOutput, OutputMode } from "../tool-calls/model-output.js";
import { type IdempotentToolOptions, idempotentTool } from "./idempotent-tool.js";

/** The input type of a tool of a tool set. */
type InputOf<T> = InferToolInput<Extract<T, Tool>>;
/** The output type of a tool of a tool set. */
type OutputOf<T> = InferToolOutput<Extract<T, Tool>>;

/** What one tool may set for itself in {@link idempotentTools}: everything but its name and the output mode. */
export type PerToolOptions<INPUT, OUTPUT> = {
  readonly [K in keyof Omit<IdempotentToolOptions<INPUT, OUTPUT>, "name" | "output">]?:
    | IdempotentToolOptions<INPUT, OUTPUT>[K]
    | undefined;
};

/** Options of {@link idempotentTools}: shared by every wrapped tool, with per-tool overrides. */
export interface IdempotentToolsOptions<
  TOOLS extends ToolSet,
  MODE extends OutputMode = "envelope",
  NAMES extends keyof TOOLS & string = keyof TOOLS & string,
> extends Omit<RecordOptions<unknown, unknown>, "significant" | "verify" | "reconcile"> {
  /**
   * The tools to wrap; the others are passed through untouched. Default: every tool with an `execute`.
   * Name the side-effectful ones: read-only tools gain nothing from a record per call.
   */
  readonly only?: readonly NAMES[] | undefined;
  /** Options for single tools, over the shared ones: `intentFields`, `significant`, `verify`, `effect`, … */
  readonly perTool?:
    | {
        readonly [K in NAMES]?: PerToolOptions<InputOf<TOOLS[K]>, OutputOf<TOOLS[K]>> | undefined;
      }
    | undefined;
  /** See {@link IdempotentToolOptions.turnId}. */
  readonly turnId?: IdempotentToolOptions<unknown, unknown>["turnId"] | undefined;
  /** See {@link IdempotentToolOptions.scope}. */
  readonly scope?: IdempotentToolOptions<unknown, unknown>["scope"] | undefined;
  /** What every wrapped `execute` returns to the model: `"envelope"` (default) or `"merge"`. */
  readonly output?: MODE | undefined;
}

/** The tools object {@link idempotentTools} returns: the named tools wrapped, the others as they were. */
export type IdempotentToolSet<
  TOOLS extends ToolSet,
  MODE extends OutputMode = "envelope",
  NAMES extends keyof TOOLS & string = keyof TOOLS & string,
> = {
  [K in keyof TOOLS]: K extends NAMES
    ? Tool<InputOf<TOOLS[K]>, ModelOutput<OutputOf<TOOLS[K]>, MODE>>
    : TOOLS[K];
};

/**
 * Wrap every side-effectful tool of an AI SDK tools object with {@link idempotentTool}: each keeps its
 * property name as its tool name, and shares the store and options given here.
 * @example
 * import { tool } from "ai";
 * import { z } from "zod";
 * import { memoryStore } from "idempotool";
 * import { idempotentTools } from "idempotool/ai-sdk";
 *
 * const tools = idempotentTools(
 *   {
 *     send_email: tool({
 *       inputSchema: z.object({ to: z.string(), subject: z.string(), body: z.string() }),
 *       execute: async ({ to }) => ({ messageId: `m-${to}` }),
 *     }),
 *     get_weather: tool({
 *       inputSchema: z.object({ city: z.string() }),
 *       execute: async ({ city }) => ({ city, celsius: 21 }),
 *     }),
 *   },
 *   { store: memoryStore(), only: ["send_email"], perTool: { send_email: { intentFields: ["to", "subject"] } } },
 * );
 */
export function idempotentTools<
  TOOLS extends ToolSet,
  MODE extends OutputMode = "envelope",
  NAMES extends keyof TOOLS & string = keyof TOOLS & string,
>(tools: TOOLS, options: IdempotentToolsOptions<TOOLS, MODE, NAMES>): IdempotentToolSet<TOOLS, MODE, NAMES> {
  if (typeof tools !== "object" || tools === null) {
    throw new IdempotencyError(
      "invalid_options",
      "idempotentTools(): the first argument must be a tools object.",
    );
  }
  if (typeof options !== "object" || options === null) {
    throw new IdempotencyError("invalid_options", "idempotentTools(): options must be an object.");
  }
  const { only, perTool = {}, ...shared } = options;
  const names = new Set(Object.keys(tools));
  for (const name of [...(only ?? []), ...Object.keys(perTool)]) {
    if (!names.has(name)) {
      throw new IdempotencyError(
        "invalid_options",
        `idempotentTools(): there is no tool named "${name}" (tools: ${[...names].join(", ")}).`,
      );
    }
  }
  const chosen = (name: string, tool: { execute?: unknown }): boolean =>
    only ? (only as readonly string[]).includes(name) : typeof tool.execute === "function";

  const result: Record<string, unknown> = {};
  for (const [name, tool] of Object.entries(tools)) {
    if (!chosen(name, tool as { execute?: unknown })) {
      result[name] = tool;
      continue;
    }
    const own = (perTool as Record<string, PerToolOptions<unknown, unknown> | undefined>)[name] ?? {};
    result[name] = idempotentTool(
      tool as Tool<unknown, unknown>,
      { ...shared, ...definedOnly(own), name } as IdempotentToolOptions<unknown, unknown, MODE>,
    );
  }
  return result as IdempotentToolSet<TOOLS, MODE, NAMES>;
}

/** The fields that are set: a per-tool option given as `undefined` leaves the shared one in force. */
function definedOnly<T extends object>(options: T): Partial<T> {
  return Object.fromEntries(Object.entries(options).filter(([, value]) => value !== undefined)) as Partial<T>;
}
