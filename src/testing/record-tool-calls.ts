/**
 * `recordToolCalls()`: a test helper that finds tools an agent calls twice (docs/testing.md). It records tool
 * calls, by wrapping the tool functions or by being told of each call, and flags the same (tool, arguments
 * hash) called more than once within one user turn.
 */
import { fingerprint } from "../core/fingerprint.js";

/** One recorded call. */
export interface RecordedCall {
  readonly tool: string;
  readonly turn: string;
  /** SHA-256 of the canonical JSON of the arguments (as idempotool fingerprints them). */
  readonly argsHash: string;
  readonly args: unknown;
  /** Order of recording, from 0. */
  readonly seq: number;
}

/** The same (tool, arguments hash) called more than once in one turn. */
export interface DuplicateToolCall {
  readonly tool: string;
  readonly turn: string;
  readonly argsHash: string;
  readonly args: unknown;
  readonly count: number;
  readonly calls: readonly RecordedCall[];
}

export interface ToolCallRecorder {
  /** Start a new user turn; later calls belong to it. Before the first `turn()`, calls go to turn "default". */
  turn(id: string): void;
  /** Record one call (from an agent loop's tool-call stream, say). `turn` overrides the current one. */
  record(tool: string, args: unknown, options?: { readonly turn?: string }): RecordedCall;
  /** Wrap a tool function so each call is recorded before it runs; the first argument is hashed. */
  wrap<F extends (...args: never[]) => unknown>(tool: string, fn: F): F;
  /** Every call recorded, in order. */
  readonly calls: readonly RecordedCall[];
  /** Each (turn, tool, arguments hash) called more than once. */
  duplicates(): DuplicateToolCall[];
  /** Throw a {@link DuplicateToolCallsError} describing every duplicate, if any. */
  assertNoDuplicates(): void;
  /** Forget every call and go back to turn "default". */
  reset(): void;
}

/** Thrown by `assertNoDuplicates()`; `duplicates` says which. */
export class DuplicateToolCallsError extends Error {
  override name = "DuplicateToolCallsError";
  readonly duplicates: readonly DuplicateToolCall[];
  constructor(duplicates: readonly DuplicateToolCall[]) {
    const lines = duplicates.map(
      (d) =>
        `  ${d.tool} ×${d.count} in turn "${d.turn}" with the same arguments (${short(d.args)}, hash ${d.argsHash.slice(0, 12)})`,
    );
    super(
      `The same tool call was made more than once in one turn:\n${lines.join("\n")}\n` +
        "A model, framework or retry repeated it: make the tool idempotent (one key per intent) or stop the repeat.",
    );
    this.duplicates = duplicates;
  }
}

/**
 * Record tool calls and flag the same (tool, args hash) twice in one turn.
 * @example
 * import { recordToolCalls } from "idempotool/testing";
 *
 * const recorder = recordToolCalls();
 * const sendEmail = recorder.wrap("send_email", async (args: { to: string }) => `sent to ${args.to}`);
 * recorder.turn("turn-1");
 * await sendEmail({ to: "alice@example.com" });
 * await sendEmail({ to: "alice@example.com" }); // the model emitted it twice
 * recorder.duplicates(); // [{ tool: "send_email", turn: "turn-1", count: 2, … }]
 * recorder.assertNoDuplicates(); // throws DuplicateToolCallsError
 */
export function recordToolCalls(): ToolCallRecorder {
  let current = "default";
  let calls: RecordedCall[] = [];
  const recorder: ToolCallRecorder = {
    turn(id) {
      if (typeof id !== "string" || id.length === 0)
        throw new TypeError("recorder.turn(id): id must be a non-empty string");
      current = id;
    },
    record(tool, args, options) {
      if (typeof tool !== "string" || tool.length === 0) {
        throw new TypeError("recorder.record(tool, args): tool must be a non-empty string");
      }
      const call: RecordedCall = {
        tool,
        turn: options?.turn ?? current,
        argsHash: hashArgs(args),
        args,
        seq: calls.length,
      };
      calls.push(call);
      return call;
    },
    wrap(tool, fn) {
      const wrapped = (...args: never[]) => {
        recorder.record(tool, args[0]);
        return fn(...args);
      };
      return wrapped as typeof fn;
    },
    get calls() {
      return calls;
    },
    duplicates() {
      const groups = new Map<string, RecordedCall[]>();
      for (const call of calls) {
        const id = JSON.stringify([call.turn, call.tool, call.argsHash]);
        const group = groups.get(id);
        if (group) group.push(call);
        else groups.set(id, [call]);
      }
      return [...groups.values()]
        .filter((group) => group.length > 1)
        .map((group) => {
          const first = group[0]!;
          return {
            tool: first.tool,
            turn: first.turn,
            argsHash: first.argsHash,
            args: first.args,
            count: group.length,
            calls: group,
          };
        });
    },
    assertNoDuplicates() {
      const duplicates = recorder.duplicates();
      if (duplicates.length > 0) throw new DuplicateToolCallsError(duplicates);
    },
    reset() {
      calls = [];
      current = "default";
    },
  };
  return recorder;
}

let unhashable = 0;

function hashArgs(args: unknown): string {
  try {
    // A BigInt argument is hashed as its decimal string rather than refused: this is a test aid.
    return fingerprint(args === undefined ? null : args, { bigint: "string" });
  } catch {
    // Arguments with no exact JSON form (a function, a cycle) are never judged equal to anything.
    unhashable += 1;
    return `unhashable-${unhashable}`;
  }
}

function short(args: unknown): string {
  let text: string;
  try {
    text = JSON.stringify(args) ?? String(args);
  } catch {
    text = String(args);
  }
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}
