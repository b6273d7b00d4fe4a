/**
 * The audit's recommendation (docs/cli.md, "Mechanisms"): classify the side effect (does the downstream take
 * a key? do you own the store? can it be undone?), then pick the operation model, OP-1 … OP-8, with the
 * reason.
 */
import { Effect } from "../core/options.js";
import { type Classification, list } from "./classify.js";
import type { KeyField } from "./idempotency-key.js";
import { EffectKind, MentionKind } from "./vocabulary.js";

/** The eight operation models of docs/operation-models.md. */
export const Mechanism = {
  nativeKey: "OP-1",
  dedupTable: "OP-2",
  contentAddressed: "OP-3",
  insertOnConflict: "OP-4",
  saga: "OP-5",
  langgraphState: "OP-6",
  mcpKey: "OP-7",
  preCallCheckpoint: "OP-8",
} as const;
export type Mechanism = (typeof Mechanism)[keyof typeof Mechanism];

/** One line per operation model, as docs/operation-models.md names them. */
export const mechanismTitles: Readonly<Record<Mechanism, string>> = {
  "OP-1": "idempotency key passed downstream (the Stripe pattern)",
  "OP-2": "dedup record and the write in one transaction",
  "OP-3": "content-addressed write",
  "OP-4": "INSERT … ON CONFLICT DO NOTHING",
  "OP-5": "saga: record intent, call, compensate a duplicate",
  "OP-6": "LangGraph: key from checkpointed state before interrupt()",
  "OP-7": "MCP: a required idempotency_key input, deduped by the server",
  "OP-8": "pre-call checkpoint in a durable store",
};

/** How the tools reach the model: it picks the mechanism that carries the key. */
export const ToolLayer = {
  mcp: "mcp",
  langgraph: "langgraph",
  functionCalling: "function-calling",
} as const;
export type ToolLayer = (typeof ToolLayer)[keyof typeof ToolLayer];

export interface Recommendation {
  readonly mechanism: Mechanism;
  readonly title: string;
  readonly reason: string;
}

export interface Plan {
  /** The mechanisms to use, the one that closes the gap first. */
  readonly recommendations: readonly Recommendation[];
  /** The effect class to give `idempotent()` (docs/concepts.md, "Effect classes"). */
  readonly effect: Effect;
}

const recommendation = (mechanism: Mechanism, reason: string): Recommendation => ({
  mechanism,
  title: mechanismTitles[mechanism],
  reason,
});

/** What a recommendation is drawn from. */
export interface MechanismInput {
  readonly classification: Classification;
  readonly description: string;
  readonly key: KeyField | undefined;
  readonly layer: ToolLayer;
}

/**
 * Recommend how to make a side-effectful tool idempotent.
 * @example
 * // A Stripe charge exposed over MCP with no key: OP-7 to carry the key, OP-1 to pass it to Stripe.
 * recommendMechanism({ classification, description, key: undefined, layer: "mcp" })
 *   .recommendations.map((r) => r.mechanism); // ["OP-7", "OP-1"]
 */
export function recommendMechanism({ classification, description, key, layer }: MechanismInput): Plan {
  const downstream = downstreamMechanism(classification, description);
  const recommendations: Recommendation[] = [];
  if (layer === ToolLayer.mcp) recommendations.push(mcpKey(key));
  if (layer === ToolLayer.langgraph) {
    recommendations.push(
      recommendation(
        Mechanism.langgraphState,
        "a LangGraph node body re-runs from the top on resume: draw the key from checkpointed state before " +
          "interrupt() (keys.fromState), never mint it inside the node",
      ),
    );
  }
  if (downstream) recommendations.push(downstream.recommendation);
  if (!downstream && layer !== ToolLayer.mcp) {
    recommendations.push(
      recommendation(
        Mechanism.preCallCheckpoint,
        "nothing downstream dedupes it, so block the second call: record (key, args hash, in_progress) in a " +
          "durable store before the call and fail closed after a crash; idempotent() with sqliteStore does this" +
          (layer === ToolLayer.functionCalling && !key
            ? ". The model passes no key: derive one per intent in the agent loop (keys.intent(turnId, …))"
            : ""),
      ),
    );
  }
  return { recommendations, effect: downstream?.effect ?? Effect.irreversible };
}

function mcpKey(key: KeyField | undefined): Recommendation {
  const reason = !key
    ? "served over MCP, where a transport may retry: add a required `idempotency_key` input whose description " +
      "states the dedup window, and dedupe on it in the server"
    : key.required
      ? `served over MCP with a required \`${key.field}\` input: make sure the server dedupes on it within the ` +
        "window its description states"
      : `served over MCP, but \`${key.field}\` is optional and a model may leave it out: make it required`;
  return recommendation(Mechanism.mcpKey, reason);
}

/**
 * Verbs in a tool's name that act on content already there, at a path or name the caller gives: no
 * content-addressed name can stand for what they do.
 */
const changesExistingContent: ReadonlySet<string> = new Set([
  "move",
  "rename",
  "copy",
  "edit",
  "modify",
  "patch",
  "update",
  "append",
  "delete",
  "remove",
]);

function downstreamMechanism(
  c: Classification,
  description: string,
): { recommendation: Recommendation; effect: Effect } | undefined {
  const named = (kind: MentionKind) => c.mentions.filter((m) => m.kind === kind).map((m) => m.label);
  const kinds = new Set(c.effectKinds);

  // Step 1, question 1: does the downstream API take a key?
  const native = named(MentionKind.nativeKey);
  if (native.length > 0) {
    return {
      recommendation: recommendation(
        Mechanism.nativeKey,
        `its description names ${list(native)}, which takes an idempotency key: pass the caller's key ` +
          "downstream (Idempotency-Key header or SDK option), the same key on every retry",
      ),
      effect: Effect.nativeKey,
    };
  }
  const messaging = named(MentionKind.messaging);
  const payment = named(MentionKind.payment);
  // Someone else's store: a dedup row cannot share its transaction, nor a constraint or a name guard it.
  const outside =
    messaging.length > 0 ||
    payment.length > 0 ||
    named(MentionKind.service).length > 0 ||
    c.openWorld === true;

  // Question 2: do you own the store it writes to? Only what the definition says counts: an unnamed store
  // may be a third party's (merge_pull_request), and a model that needs it owned would not hold there.
  // Naming a write by its content fits a tool that writes new content, not one that moves, renames,
  // copies, edits or removes content already there (move_file): that one names its target itself.
  const contentNamed = named(MentionKind.content);
  const newContent = !c.words.some((w) => changesExistingContent.has(w));
  if (
    !outside &&
    newContent &&
    (contentNamed.length > 0 || (c.openWorld === false && kinds.has(EffectKind.content)))
  ) {
    const what = contentNamed.length > 0 ? list(contentNamed) : "content";
    return {
      recommendation: recommendation(
        Mechanism.contentAddressed,
        `it writes ${what}: name the write by its content (key = SHA-256 of the canonical content, a conditional ` +
          "put such as S3 If-None-Match: *), so a repeat writes nothing new",
      ),
      effect: Effect.ownedStore,
    };
  }
  const store = named(MentionKind.ownStore);
  const writes = kinds.has(EffectKind.write) || kinds.has(EffectKind.delete);
  const closedWorld = c.openWorld === false;
  if (!outside && (store.length > 0 || (closedWorld && writes))) {
    const where =
      store.length > 0 ? list(store) : "the closed world its annotations declare (openWorldHint: false)";
    const multi =
      kinds.has(EffectKind.delete) ||
      c.words.some((w) =>
        ["update", "upsert", "move", "transfer", "merge", "sync", "batch", "bulk"].includes(w),
      ) ||
      /\b(multiple|several|many|batch|bulk)\b/i.test(description) ||
      c.words.some((w) => w.length > 3 && w.endsWith("s") && !w.endsWith("ss"));
    return multi
      ? {
          recommendation: recommendation(
            Mechanism.dedupTable,
            `it changes several things in ${where}: keep the dedup record (key, args hash, status, result) and ` +
              "the write in one transaction at the tool boundary",
          ),
          effect: Effect.ownedStore,
        }
      : {
          recommendation: recommendation(
            Mechanism.insertOnConflict,
            `it inserts one row into ${where}: put a unique constraint on the key and INSERT … ON CONFLICT DO ` +
              "NOTHING RETURNING, so the database dedupes",
          ),
          effect: Effect.ownedStore,
        };
  }

  // Question 3: can the effect be undone?
  const undo = named(MentionKind.compensatable);
  if (undo.length > 0 || kinds.has(EffectKind.payment) || payment.length > 0) {
    const why = undo.length > 0 ? `it can be undone (${list(undo)})` : "it moves money with no known key";
    return {
      recommendation: recommendation(
        Mechanism.saga,
        `${why}: record the intent, call, keep the external id, compensate a duplicate, and reconcile ` +
          "records left pending",
      ),
      effect: Effect.compensatable,
    };
  }
  return undefined;
}
