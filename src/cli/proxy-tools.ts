/**
 * Which tools `idempotool proxy` guards, and how a guarded tool looks in `tools/list`: audit's
 * classification decides unless the user said otherwise for that tool (`--tool name=effect`,
 * `--read-only name`, or the config file).
 */
import { readFileSync } from "node:fs";
import { InvalidArgumentError } from "commander";
import { classifyTool, ToolClass } from "../audit/classify.js";
import { readToolDefinitions } from "../audit/tool-definition.js";
import { Effect } from "../core/options.js";
import { keyDescription } from "../mcp/key-description.js";
import { isObject } from "../mcp/mcp-types.js";
import { structuredField } from "../mcp/tool-results.js";
import { UsageError } from "./errors.js";

/** What the user may say about a tool: its effect class, or that it only reads. */
export const readOnlyRule = "read-only";
export type ToolRule = Effect | typeof readOnlyRule;

/** The user's word on named tools; every other tool is classified. */
export type ToolRules = ReadonlyMap<string, ToolRule>;

/** How the proxy treats one tool. */
export type Guard =
  | { readonly guarded: true; readonly effect: Effect; readonly why: string }
  | { readonly guarded: false; readonly why: string };

/** A tool as `tools/list` returns it: JSON, passed on as it came except for what a guard adds. */
export type ListedTool = Record<string, unknown> & { readonly name: string };

/** The argument a guarded tool gains (the same name `registerIdempotentTool` adds). */
export const keyArgument = "idempotency_key";
const maxKeyLength = 255;
const effects = Object.values(Effect) as readonly string[];

/**
 * Decide whether a tool is guarded. A rule the user gave wins; otherwise audit's classification:
 * read-only tools pass through, side-effectful and unclear ones are guarded (a repeat of an unclear
 * tool may be a duplicate, so the safe side is the guard), under the `irreversible` class. A tool named
 * in `guardedBefore` stays guarded when it is only its classification that now says it reads: clients
 * were told it takes a key, and a downgrade would pass their keyed repeats through to run again.
 * @example
 * guardOf({ name: "send_email" }, new Map()); // { guarded: true, effect: "irreversible", why: … }
 */
export function guardOf(
  tool: ListedTool,
  rules: ToolRules,
  guardedBefore: ReadonlySet<string> = new Set(),
): Guard {
  const properties = (tool.inputSchema as { properties?: unknown } | undefined)?.properties;
  if (typeof properties === "object" && properties !== null && Object.hasOwn(properties, keyArgument)) {
    return { guarded: false, why: `it takes its own ${keyArgument}` };
  }
  const rule = rules.get(tool.name);
  if (rule === readOnlyRule) return { guarded: false, why: "named read-only" };
  if (rule !== undefined) return { guarded: true, effect: rule, why: `named ${rule}` };
  let definition: ReturnType<typeof readToolDefinitions>[number] | undefined;
  try {
    [definition] = readToolDefinitions([{ inputSchema: {}, ...tool }]);
  } catch {
    // A definition audit cannot read tells nothing: guard it.
  }
  const classification = definition ? classifyTool(definition) : undefined;
  if (classification?.class === ToolClass.readOnly && !guardedBefore.has(tool.name)) {
    return { guarded: false, why: classification.signals[0]?.detail ?? "read-only" };
  }
  const why =
    classification?.class === ToolClass.readOnly
      ? "guarded earlier in this session, though it now says it only reads"
      : classification?.class === ToolClass.sideEffectful
        ? (classification.signals[0]?.detail ?? "side-effectful")
        : "nothing says it only reads";
  return { guarded: true, effect: Effect.irreversible, why };
}

/**
 * The tool as the client sees it behind the proxy: a required `idempotency_key` argument described with
 * the dedup window, `idempotentHint: true`, and `_idempotency` in the output schema when there is one.
 */
export function guardedTool(tool: ListedTool, ttlMs: number, keyRequired = true): ListedTool {
  const input = isObject(tool.inputSchema) ? tool.inputSchema : { type: "object" };
  const properties = isObject(input.properties) ? input.properties : {};
  const required = Array.isArray(input.required) ? (input.required as unknown[]) : [];
  const annotations = isObject(tool.annotations) ? tool.annotations : {};
  const guarded: ListedTool = {
    ...tool,
    inputSchema: {
      ...input,
      properties: {
        ...properties,
        [keyArgument]: {
          type: "string",
          minLength: 1,
          maxLength: maxKeyLength,
          description: keyDescription(ttlMs),
        },
      },
      required: [...required.filter((name) => name !== keyArgument), ...(keyRequired ? [keyArgument] : [])],
    },
    annotations: { ...annotations, idempotentHint: true },
  };
  const output = tool.outputSchema;
  if (isObject(output)) {
    const outputProperties = isObject(output.properties) ? output.properties : {};
    guarded.outputSchema = {
      ...output,
      properties: { ...outputProperties, [structuredField]: infoJsonSchema },
    };
  }
  return guarded;
}

/** `structuredContent._idempotency`, as JSON Schema (the fields of `IdempotencyInfo`). */
const infoJsonSchema = {
  type: "object",
  properties: {
    was_replay: { type: "boolean" },
    original_called_at: { type: "string", description: "When the original call was made (ISO-8601)." },
    idempotency_key: { type: "string", description: "The key this result is recorded under." },
    expires_at: {
      type: "string",
      description: "Until when a repeat with this key is still deduped (ISO-8601).",
    },
    recent_similar_call: {
      type: "object",
      description: "Present when a call with similar arguments completed recently under another key.",
      properties: { called_at: { type: "string" }, idempotency_key: { type: "string" } },
    },
  },
  required: ["was_replay", "original_called_at", "idempotency_key", "expires_at"],
} as const;

/**
 * `--tool name=effect`, repeatable: collected into the rules; a bad one is a usage error saying what was expected.
 * @example
 * toolRuleFlag("send_email=native-key", new Map()); // Map { "send_email" => "native-key" }
 */
export function toolRuleFlag(
  value: string,
  previous: Map<string, ToolRule> = new Map(),
): Map<string, ToolRule> {
  const match = /^([^=]+)=(.*)$/.exec(value);
  const name = match?.[1]?.trim();
  const rule = match?.[2]?.trim();
  if (!name || rule === undefined || !isRule(rule)) {
    throw new InvalidArgumentError(
      `must be name=effect, the effect one of ${[...effects, readOnlyRule].join(", ")}`,
    );
  }
  return new Map(previous).set(name, rule);
}

/**
 * The config file: `{ "tools": { "send_email": "irreversible", "lookup": "read-only" } }`.
 * Flags given beside it win over it.
 */
export function readToolRules(path: string): Map<string, ToolRule> {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new UsageError(`cannot read ${path}: ${code === "ENOENT" ? "no such file" : String(error)}`, {
      cause: error,
    });
  }
  let config: unknown;
  try {
    config = JSON.parse(text);
  } catch (error) {
    throw new UsageError(`${path} is not JSON: ${(error as Error).message}`, { cause: error });
  }
  const shape = `${path} must be { "tools": { "<tool name>": "<effect or read-only>" } }`;
  if (!isObject(config) || !isObject(config.tools)) throw new UsageError(shape);
  const unknownFields = Object.keys(config).filter((field) => field !== "tools");
  if (unknownFields.length > 0) {
    throw new UsageError(`${shape}; it also has ${unknownFields.map((f) => JSON.stringify(f)).join(", ")}`);
  }
  const rules = new Map<string, ToolRule>();
  for (const [name, rule] of Object.entries(config.tools)) {
    if (typeof rule !== "string" || !isRule(rule)) {
      throw new UsageError(
        `${path}: tools.${name} must be one of ${[...effects, readOnlyRule].join(", ")} (not ${JSON.stringify(rule)})`,
      );
    }
    rules.set(name, rule);
  }
  return rules;
}

/** The tools the rules name that the server does not list. */
export function unknownToolsIn(rules: ToolRules, tools: readonly ListedTool[]): string[] {
  const listed = new Set(tools.map((tool) => tool.name));
  return [...rules.keys()].filter((name) => !listed.has(name));
}

function isRule(value: string): value is ToolRule {
  return value === readOnlyRule || effects.includes(value);
}
