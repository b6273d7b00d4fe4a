/**
 * Which tools are side-effectful (docs/cli.md, "How a tool is classified"): a tool is side-effectful when its
 * annotations, its name (`send_`, `create_`, `charge_` … and their camelCase forms) or its description (it
 * wraps Stripe, SendGrid, a webhook …) say so. Annotations weigh most, then the name, then the description.
 */
import type { ToolDefinition } from "./tool-definition.js";
import {
  descriptionFiller,
  determiners,
  type EffectKind,
  MentionKind,
  mentionPatterns,
  nounLikeVerbs,
  phrasalVerbs,
  readOnlyPhrases,
  readVerbs,
  seedPrefixes,
  sideEffectVerbs,
} from "./vocabulary.js";

/** Read-only or side-effectful, the first question about a tool. */
export const ToolClass = {
  readOnly: "read-only",
  sideEffectful: "side-effectful",
  /** Nothing in the definition says either way. */
  unclear: "unclear",
} as const;
export type ToolClass = (typeof ToolClass)[keyof typeof ToolClass];

/** One piece of evidence, with where it came from. */
export interface Signal {
  readonly from: "annotations" | "name" | "description";
  readonly says: "read-only" | "side-effectful";
  /** In words, for a report: `name starts with "send"`. */
  readonly detail: string;
}

/** Something the description names: a third party, a store, a kind of content. */
export interface Mention {
  readonly label: string;
  readonly kind: MentionKind;
  readonly thirdParty: boolean;
}

export interface Classification {
  readonly class: ToolClass;
  /** Every signal found, the deciding one first. */
  readonly signals: readonly Signal[];
  /** The kinds of effect its verbs point at (payment, message, write …). */
  readonly effectKinds: readonly EffectKind[];
  readonly mentions: readonly Mention[];
  /** MCP `idempotentHint: true`: the tool says a repeat has no further effect. A claim, not a proof. */
  readonly declaredIdempotent: boolean;
  /**
   * MCP `openWorldHint`: `true` when the tool reaches things outside its own domain (a third party's API,
   * the web, a device), `false` when its world is closed (a store its owner runs); undefined when not given.
   */
  readonly openWorld?: boolean | undefined;
  /** The name split into lowercase words (`sendEmail` → `send`, `email`). */
  readonly words: readonly string[];
}

/**
 * Classify one tool as read-only or side-effectful, with the evidence.
 * @example
 * classifyTool({ name: "sendEmail", description: "", inputSchema: undefined, annotations: undefined, format: "mcp" }).class;
 * // "side-effectful"
 */
export function classifyTool(tool: ToolDefinition): Classification {
  const words = splitName(tool.name);
  const described = findMentions(tool.description);
  // `slack_post_message`, `spotify_add_to_queue`: a third party in the name says whose store it is too.
  const inName = findMentions(words.join(" ")).filter(
    (m) => m.thirdParty && !described.some((d) => d.label === m.label),
  );
  const mentions = [...described, ...inName];
  const byAnnotations = annotationSignals(tool);
  const byName = nameSignal(words);
  const byDescription = descriptionSignal(tool.description, described);
  // A name whose only verb is also a noun (`order_status`) weighs less than what the description says.
  const [strongName, weakName] = byName?.weak ? [undefined, byName] : [byName, undefined];
  const signals = [
    ...byAnnotations,
    ...(strongName ? [strongName.signal] : []),
    ...(byDescription ? [byDescription.signal] : []),
    ...(weakName ? [weakName.signal] : []),
  ];
  const deciding = signals[0];
  const effectKinds = new Set<EffectKind>();
  for (const kind of [...(byName?.kinds ?? []), ...(byDescription?.kinds ?? [])]) effectKinds.add(kind);
  // A noun-like verb alone (`order_status`, `email_customer`) is evidence, but not enough to decide.
  const decided = deciding && !(weakName && deciding === weakName.signal);
  return {
    class: decided ? deciding.says : ToolClass.unclear,
    signals,
    effectKinds: [...effectKinds],
    mentions,
    declaredIdempotent: tool.annotations?.idempotentHint === true,
    openWorld: tool.annotations?.openWorldHint,
    words,
  };
}

/** `sendEmail`, `send_email`, `gmail.send`, `HTTPPost` → lowercase words. */
export function splitName(name: string): string[] {
  return name
    .replace(/([a-z0-9])([A-Z])/g, "$1 $2")
    .replace(/([A-Z]+)([A-Z][a-z])/g, "$1 $2")
    .split(/[^A-Za-z0-9]+/)
    .filter((word) => word.length > 0)
    .map((word) => word.toLowerCase());
}

function annotationSignals(tool: ToolDefinition): Signal[] {
  const hints = tool.annotations;
  if (!hints) return [];
  if (hints.readOnlyHint === true) {
    return [{ from: "annotations", says: "read-only", detail: "its MCP annotations say readOnlyHint: true" }];
  }
  const signals: Signal[] = [];
  if (hints.readOnlyHint === false) {
    signals.push({
      from: "annotations",
      says: "side-effectful",
      detail: "its MCP annotations say readOnlyHint: false",
    });
  }
  if (hints.destructiveHint === true) {
    signals.push({
      from: "annotations",
      says: "side-effectful",
      detail: "its MCP annotations say destructiveHint: true",
    });
  }
  return signals;
}

interface NameSignal {
  readonly signal: Signal;
  readonly kinds: readonly EffectKind[];
  /** The only verb is one that is also a noun, so the name may be a noun phrase. */
  readonly weak: boolean;
}

function nameSignal(split: readonly string[]): NameSignal | undefined {
  const words = joinPhrasalVerbs(split).map(withoutRedo);
  const kinds = words.flatMap((word) => {
    const kind = sideEffectVerbs.get(word);
    return kind ? [kind] : [];
  });
  const sideEffect = (detail: string, weak = false): NameSignal => ({
    signal: { from: "name", says: "side-effectful", detail },
    kinds,
    weak,
  });
  const readOnly = (detail: string): NameSignal => ({
    signal: { from: "name", says: "read-only", detail },
    kinds: [],
    weak: false,
  });

  // The decisive prefixes (`send_`, `charge_` …) decide on their own.
  const [head] = words;
  if (head !== undefined && seedPrefixes.has(head) && words.length > 1) {
    return sideEffect(`its name starts with "${head}", a prefix that always marks a side effect`);
  }
  // `get_or_create`, `find_or_insert`: the second verb may write.
  const or = words.indexOf("or");
  if (or > 0) {
    const after = words.slice(or + 1).find((word) => sideEffectVerbs.has(word));
    if (after) return sideEffect(`its name may "${after}"`);
  }
  // `fetch_and_archive`, `search_then_replace`: the second verb writes, whatever the first one does. A
  // verb that may be a noun (`get_name_and_email`) is read as the noun here.
  const and = words.findIndex((word, index) => index > 0 && (word === "and" || word === "then"));
  if (and > 0) {
    const after = words.slice(and + 1).find((word) => sideEffectVerbs.has(word) && !nounLikeVerbs.has(word));
    if (after) return sideEffect(`its name also does "${after}"`);
  }
  const verbs = words
    .map((word, index) => ({ word, index }))
    .filter(({ word }) => sideEffectVerbs.has(word) || readVerbs.has(word));
  const first = verbs[0];
  if (!first) return undefined;
  const where = (word: string, index: number) =>
    index === 0 ? `its name starts with "${word}"` : `its name has the verb "${word}"`;
  if (readVerbs.has(first.word)) return readOnly(where(first.word, first.index));
  // `email_lookup`, `order_status_get`: a verb that is also a noun, followed by a read verb, is the noun.
  if (nounLikeVerbs.has(first.word)) {
    const next = verbs.find(({ index }) => index > first.index);
    if (next && readVerbs.has(next.word)) return readOnly(where(next.word, next.index));
    if (next && !nounLikeVerbs.has(next.word)) return sideEffect(where(next.word, next.index));
    if (!next) return sideEffect(`${where(first.word, first.index)}, which may be a noun`, true);
  }
  return sideEffect(where(first.word, first.index));
}

function descriptionSignal(
  description: string,
  mentions: readonly Mention[],
): { signal: Signal; kinds: EffectKind[] } | undefined {
  const text = description.trim();
  if (text === "") return undefined;
  if (readOnlyPhrases.test(text)) {
    const phrase = text.match(readOnlyPhrases)?.[0] ?? "read-only";
    return {
      signal: { from: "description", says: "read-only", detail: `its description says "${phrase}"` },
      kinds: [],
    };
  }
  const opening = text.replace(descriptionFiller, "").match(/^([A-Za-z]+)(?:[ \t]+([A-Za-z]+))?/);
  const firstWord = opening?.[1];
  const next = opening?.[2]?.toLowerCase();
  const verb = firstWord ? baseForm(firstWord.toLowerCase(), next) : undefined;
  // A verb that may be a noun is the verb when an article or the like follows: "Orders a pizza".
  const asVerb =
    verb !== undefined && (!nounLikeVerbs.has(verb) || (next !== undefined && determiners.has(next)));
  if (verb && sideEffectVerbs.has(verb) && asVerb) {
    const words = verb.includes(" ") || nounLikeVerbs.has(verb) ? `${firstWord} ${opening?.[2]}` : firstWord;
    return {
      signal: {
        from: "description",
        says: "side-effectful",
        detail: `its description opens with "${words}"`,
      },
      kinds: [sideEffectVerbs.get(verb)!],
    };
  }
  if (verb && readVerbs.has(verb)) {
    return {
      signal: { from: "description", says: "read-only", detail: `its description opens with "${firstWord}"` },
      kinds: [],
    };
  }
  // Naming GitHub or a calendar says whose store it is, not that the tool changes it.
  const outside = mentions.filter((m) => m.thirdParty && m.kind !== MentionKind.service);
  if (outside.length > 0) {
    return {
      signal: {
        from: "description",
        says: "side-effectful",
        detail: `its description mentions ${list(outside.map((m) => m.label))}: it wraps an outside API`,
      },
      kinds: [],
    };
  }
  return undefined;
}

/**
 * `Sends` → `send`, `Notifies` → `notify`, `Publishes` → `publish`, `Lists` → `list`; with the word
 * after it, `Checks out` → `check out`.
 */
function baseForm(word: string, next?: string): string {
  const candidates = [word, word.replace(/ies$/, "y"), word.replace(/es$/, ""), word.replace(/s$/, "")];
  if (next !== undefined) {
    const phrasal = candidates.find((candidate) => phrasalVerbs.has(`${candidate} ${next}`));
    if (phrasal) return `${phrasal} ${next}`;
  }
  for (const candidate of candidates) {
    if (sideEffectVerbs.has(candidate) || readVerbs.has(candidate)) return candidate;
  }
  return word;
}

/** `redeploy` → `deploy`, `resend` → `send`: doing it again is doing it (but `review` is no `view`). */
function withoutRedo(word: string): string {
  if (sideEffectVerbs.has(word) || readVerbs.has(word) || !word.startsWith("re")) return word;
  return sideEffectVerbs.has(word.slice(2)) ? word.slice(2) : word;
}

/** `check`, `out` → `check out`: a two-word verb becomes one word. */
function joinPhrasalVerbs(words: readonly string[]): string[] {
  const joined: string[] = [];
  for (let i = 0; i < words.length; i++) {
    const pair = `${words[i]} ${words[i + 1]}`;
    if (i + 1 < words.length && phrasalVerbs.has(pair)) {
      joined.push(pair);
      i++;
    } else {
      joined.push(words[i]!);
    }
  }
  return joined;
}

function findMentions(description: string): Mention[] {
  return mentionPatterns
    .filter((m) => m.pattern.test(description))
    .map(({ label, kind, thirdParty }) => ({ label, kind, thirdParty }));
}

export function list(items: readonly string[]): string {
  if (items.length <= 1) return items.join("");
  return `${items.slice(0, -1).join(", ")} and ${items.at(-1)}`;
}
