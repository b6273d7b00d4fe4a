/**
 * What the bench runs: a subject (idempotool on a store, the floor on the same client, or an anchor library)
 * answering the three workloads, with the trivial tool it wraps counting how often it really ran.
 */

import { performance } from "node:perf_hooks";

/** A tool's arguments as an agent would send them: a small nested JSON object. */
export const toolArgs = {
  to: "alice@example.com",
  subject: "Quarterly report",
  body: "Hi Alice, the Q3 figures are attached. Let me know if anything looks off.",
  cc: ["bob@example.com", "carol@example.com"],
  priority: 2,
  attachments: [{ name: "q3.pdf", bytes: 48_213 }],
};
export type ToolArgs = typeof toolArgs;
/** The same call with one field changed: under a used key it must be refused (payload validation). */
export const conflictingArgs: ToolArgs = { ...toolArgs, priority: 3 };

export interface ToolResult {
  readonly queued: boolean;
  readonly to: string;
  readonly messageId: string;
}

/** The trivial wrapped function: returns at once, and counts its runs so the bench can prove dedup. */
export interface CountedTool {
  readonly fn: (args: ToolArgs) => Promise<ToolResult>;
  runs(): number;
}

export function countedTool(): CountedTool {
  let runs = 0;
  return {
    fn: async (args) => {
      runs++;
      return { queued: true, to: args.to, messageId: "m-1" };
    },
    runs: () => runs,
  };
}

export const Workload = { first: "first", replay: "replay", contended: "contended" } as const;
export type Workload = (typeof Workload)[keyof typeof Workload];

export const SubjectName = {
  idempotool: "idempotool",
  floor: "floor",
  powertools: "powertools",
  nodeIdempotency: "node-idempotency",
  /** Powertools with its in-process LRU (`useLocalCache`) in front of the same Redis: the tiered anchor. */
  powertoolsCache: "powertools+cache",
  /** idempotool from another build (`--compare DIR`): an experiment measured beside the baseline, interleaved. */
  candidate: "candidate",
} as const;
export type SubjectName = (typeof SubjectName)[keyof typeof SubjectName];

export type Call = (key: string, args: ToolArgs) => Promise<unknown>;

export interface Subject {
  readonly name: SubjectName;
  /** What exactly runs, for the JSON and the docs. */
  readonly description: string;
  /** A unique key: a first call (claim, run, settle). */
  readonly first: Call;
  /** A completed key: the recorded result comes back without running the tool. */
  readonly replay: Call;
  /** One of many concurrent callers on one key: one runs, the others get its outcome (or are refused). */
  readonly contended: Call;
  /** Whether a used key with other arguments is refused (the floor has no fingerprint check). */
  readonly validatesPayload: boolean;
  /** How many times the wrapped tool ran. */
  runs(): number;
  /** Fresh state before a repetition (in-memory subjects start empty each time), if needed. */
  reset?(): void;
}

/** A library wrapper that answers all three workloads with one call. */
export function wrapperSubject(options: {
  readonly name: SubjectName;
  readonly description: string;
  readonly tool: CountedTool;
  readonly build: () => Call;
  /** Rebuild (an empty store) before each repetition. */
  readonly fresh?: boolean;
  readonly validatesPayload?: boolean;
}): Subject {
  const { build } = options;
  let call = build();
  const through: Call = (key, args) => call(key, args);
  return {
    name: options.name,
    description: options.description,
    first: through,
    replay: through,
    contended: through,
    validatesPayload: options.validatesPayload ?? true,
    runs: options.tool.runs,
    ...(options.fresh
      ? {
          reset() {
            call = build();
          },
        }
      : {}),
  };
}

/** A floor's claim lost to another caller (another process, in the fleet row). */
export class AlreadyClaimed extends Error {
  override name = "AlreadyClaimed";
  constructor(floor: string, key: string) {
    super(`${floor} floor: ${key} is already claimed`);
  }
}

/**
 * A floor's contended call, whose losers wait for the outcome as idempotool's callers do: callers in this
 * process join the one in flight (singleFlight), and a claim lost to another process polls the record
 * (`replay`, every millisecond) until it is completed, for up to 10 s. Without it a loser would be
 * refused at once and counted as done, and the floor would do less than the library it bounds.
 */
export function waitingFlight(
  first: (key: string, args: ToolArgs) => Promise<unknown>,
  replay: (key: string, args: ToolArgs) => Promise<unknown>,
): Call {
  const claimOrWait = async (key: string, args: ToolArgs) => {
    try {
      return await first(key, args);
    } catch (error) {
      if (!(error instanceof AlreadyClaimed)) throw error;
    }
    const deadline = performance.now() + 10_000;
    for (;;) {
      try {
        return await replay(key, args);
      } catch (error) {
        if (performance.now() > deadline) throw error;
      }
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
  };
  return singleFlight(claimOrWait, replay);
}

/**
 * The in-process part of a floor's contended path: the first caller for a key runs `lead`; later callers in
 * this process wait for it and then do `follow` (one read). No polling, no second claim.
 */
export function singleFlight(
  lead: (key: string, args: ToolArgs) => Promise<unknown>,
  follow: (key: string, args: ToolArgs) => Promise<unknown>,
): Call {
  const flying = new Map<string, Promise<unknown>>();
  return async (key, args) => {
    const leader = flying.get(key);
    if (leader) {
      await leader.catch(() => undefined);
      return follow(key, args);
    }
    const running = lead(key, args);
    flying.set(key, running);
    try {
      return await running;
    } finally {
      flying.delete(key);
    }
  };
}
