/**
 * `auditTools()`: the rules of docs/cli.md ("audit") over a list of tool definitions. Each tool
 * is classified, checked for an idempotency key, and given the mechanism to use; a side-effectful tool
 * with no key fails the audit, so it can guard CI.
 */
import { invalidOption } from "../core/option-checks.js";
import type { Effect } from "../core/options.js";
import { type Classification, classifyTool, type Signal, ToolClass } from "./classify.js";
import { findIdempotencyKey, type KeyField } from "./idempotency-key.js";
import { type Recommendation, recommendMechanism, ToolLayer } from "./mechanism.js";
import { readToolDefinitions, type ToolDefinition, ToolFormat } from "./tool-definition.js";

const owner = "auditTools()";

/** How one tool fared. */
export const Verdict = {
  ok: "ok",
  /** Passes by default; fails under `strict`. */
  warn: "warn",
  fail: "fail",
  /** Named in `ignore`: reported, never failed. */
  ignored: "ignored",
} as const;
export type Verdict = (typeof Verdict)[keyof typeof Verdict];

export interface AuditOptions {
  /**
   * How the tools reach the model, which picks the mechanism that carries the key: `"mcp"` (OP-7),
   * `"langgraph"` (OP-6) or `"function-calling"` (OP-8 when nothing downstream dedupes).
   * Default: `"mcp"` for tools in MCP's format, `"function-calling"` for the others.
   */
  readonly layer?: ToolLayer | undefined;
  /** Tool names to report but never fail on (their repeats are handled elsewhere). */
  readonly ignore?: readonly string[] | undefined;
  /** Fail on warnings too: optional keys, keys only claimed by `idempotentHint`, unclear tools. */
  readonly strict?: boolean | undefined;
}

/** The audit of one tool. */
export interface ToolAudit {
  readonly name: string;
  readonly format: ToolFormat;
  readonly class: ToolClass;
  /** The evidence, the deciding signal first. */
  readonly signals: readonly Signal[];
  /** Third parties and stores its description names, and third parties its name names. */
  readonly mentions: readonly string[];
  /** The idempotency key its input schema exposes, or null. */
  readonly key: KeyField | null;
  /** Fields that look like a key but are not described as one. */
  readonly lookalikeKeys: readonly string[];
  /** MCP `idempotentHint: true`. */
  readonly declaredIdempotent: boolean;
  /** For side-effectful and unclear tools: the mechanisms to use, the one that closes the gap first. */
  readonly recommendations: readonly Recommendation[];
  /** The effect class to give `idempotent()`, for side-effectful and unclear tools; else null. */
  readonly effect: Effect | null;
  readonly verdict: Verdict;
  /** One line on the verdict. */
  readonly finding: string;
}

export interface AuditReport {
  readonly tools: readonly ToolAudit[];
  readonly counts: {
    readonly tools: number;
    readonly readOnly: number;
    readonly sideEffectful: number;
    readonly unclear: number;
    readonly withoutKey: number;
    readonly ok: number;
    readonly warn: number;
    readonly fail: number;
    readonly ignored: number;
  };
  /** False when a tool failed, or (under `strict`) warned. */
  readonly ok: boolean;
}

/**
 * Audit tool definitions in any format `idempotool audit` reads: OpenAI (Chat Completions and Responses),
 * Anthropic, MCP (a tool, a list, or a `tools/list` result), mixed freely.
 * @example
 * import { auditTools } from "idempotool/audit";
 *
 * const report = auditTools([
 *   { type: "function", function: { name: "send_email", parameters: { type: "object", properties: { to: { type: "string" } } } } },
 *   { type: "function", function: { name: "get_weather", parameters: { type: "object", properties: {} } } },
 * ]);
 * report.ok; // false: send_email is side-effectful and takes no idempotency key
 * report.tools[0]?.recommendations[0]?.mechanism; // "OP-8"
 */
export function auditTools(tools: unknown, options: AuditOptions = {}): AuditReport {
  const { layer, ignore, strict } = resolveAuditOptions(options);
  const audits = readToolDefinitions(tools).map((tool) => auditTool(tool, layer, ignore.has(tool.name)));
  const count = (test: (t: ToolAudit) => boolean) => audits.filter(test).length;
  const counts = {
    tools: audits.length,
    readOnly: count((t) => t.class === ToolClass.readOnly),
    sideEffectful: count((t) => t.class === ToolClass.sideEffectful),
    unclear: count((t) => t.class === ToolClass.unclear),
    withoutKey: count((t) => t.class === ToolClass.sideEffectful && !t.key),
    ok: count((t) => t.verdict === Verdict.ok),
    warn: count((t) => t.verdict === Verdict.warn),
    fail: count((t) => t.verdict === Verdict.fail),
    ignored: count((t) => t.verdict === Verdict.ignored),
  };
  return { tools: audits, counts, ok: counts.fail === 0 && (!strict || counts.warn === 0) };
}

function resolveAuditOptions(options: AuditOptions) {
  if (typeof options !== "object" || options === null) invalidOption(owner, "options", "must be an object");
  const layers = Object.values(ToolLayer) as string[];
  if (options.layer !== undefined && !layers.includes(options.layer)) {
    invalidOption(owner, "layer", `must be one of ${layers.map((l) => `"${l}"`).join(", ")}`);
  }
  if (
    options.ignore !== undefined &&
    (!Array.isArray(options.ignore) || options.ignore.some((n) => typeof n !== "string"))
  ) {
    invalidOption(owner, "ignore", "must be an array of tool names");
  }
  return { layer: options.layer, ignore: new Set(options.ignore ?? []), strict: options.strict === true };
}

function auditTool(tool: ToolDefinition, layer: ToolLayer | undefined, ignored: boolean): ToolAudit {
  const classification = classifyTool(tool);
  const { key, lookalikes } = findIdempotencyKey(tool.inputSchema);
  const needsMechanism = classification.class !== ToolClass.readOnly;
  const plan = needsMechanism
    ? recommendMechanism({
        classification,
        description: tool.description,
        key,
        layer: layer ?? (tool.format === ToolFormat.mcp ? ToolLayer.mcp : ToolLayer.functionCalling),
      })
    : undefined;
  const { verdict, finding } = judge(classification, key, lookalikes);
  return {
    name: tool.name,
    format: tool.format,
    class: classification.class,
    signals: classification.signals,
    mentions: classification.mentions.map((m) => m.label),
    key: key ?? null,
    lookalikeKeys: lookalikes,
    declaredIdempotent: classification.declaredIdempotent,
    recommendations: plan?.recommendations ?? [],
    effect: plan?.effect ?? null,
    verdict: ignored && verdict !== Verdict.ok ? Verdict.ignored : verdict,
    finding: ignored && verdict !== Verdict.ok ? `ignored as asked: ${finding}` : finding,
  };
}

function judge(
  c: Classification,
  key: KeyField | undefined,
  lookalikes: readonly string[],
): { verdict: Verdict; finding: string } {
  if (c.class === ToolClass.readOnly)
    return { verdict: Verdict.ok, finding: "read-only: a repeat changes nothing" };
  if (c.class === ToolClass.unclear) {
    return {
      verdict: Verdict.warn,
      finding:
        "could not tell whether it has side effects: name it with its verb (send_, get_ …) or give it MCP " +
        "annotations (readOnlyHint)",
    };
  }
  if (key?.required)
    return { verdict: Verdict.ok, finding: `takes a required idempotency key (\`${key.field}\`)` };
  if (key) {
    return {
      verdict: Verdict.warn,
      finding: `its idempotency key \`${key.field}\` is optional: a model may leave it out`,
    };
  }
  const lookalike =
    lookalikes.length > 0
      ? ` (\`${lookalikes.join("`, `")}\` could be one, but its description does not say the server dedupes on it)`
      : "";
  if (c.declaredIdempotent) {
    return {
      verdict: Verdict.warn,
      finding: `no idempotency key${lookalike}; it relies on idempotentHint: true, a claim nothing checks`,
    };
  }
  return { verdict: Verdict.fail, finding: `side-effectful with no idempotency key${lookalike}` };
}
