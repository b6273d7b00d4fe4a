import { describe, expect, it } from "vitest";
import { type IdempotencyError, isIdempotencyError } from "./errors.js";
import { idempotent } from "./idempotent.js";
import { resolveFingerprintKeys } from "./keyed-fingerprint.js";
import {
  argumentsKey,
  compensationKeyPrefix,
  isKeyedByArguments,
  keyedByArguments,
  keys,
  ownCompensationCall,
  similarMarkerKey,
  validateCallKey,
  validateKey,
  validateScope,
} from "./keys.js";
import { memoryStore } from "./memory-store.js";

function errorOf(run: () => unknown): IdempotencyError {
  try {
    run();
  } catch (error) {
    if (isIdempotencyError(error)) return error;
    throw error;
  }
  throw new Error("expected an IdempotencyError");
}

const derivedKey = (kind: string) => new RegExp(`^${kind}_[0-9a-f]{64}$`);

describe("keys.fromState", () => {
  it("creates a key, writes it into the state under <tool>_idempotency_key and returns it", () => {
    const state: Record<string, unknown> = { thread: "t-1" };
    const key = keys.fromState(state, "send_email", () => "generated-1");
    expect(key).toBe("generated-1");
    expect(state).toEqual({ thread: "t-1", send_email_idempotency_key: "generated-1" });
  });

  it("reuses the stored key on every repeat instead of minting a new one", () => {
    let minted = 0;
    const create = () => `generated-${++minted}`;
    const state: Record<string, unknown> = {};
    const first = keys.fromState(state, "send_email", create);
    expect(keys.fromState(state, "send_email", create)).toBe(first);
    expect(keys.fromState({ ...state }, "send_email", create)).toBe(first); // a resume from a checkpoint copy
    expect(minted).toBe(1);
  });

  it("keeps one key per tool", () => {
    const state: Record<string, unknown> = {};
    const email = keys.fromState(state, "send_email");
    const sms = keys.fromState(state, "send_sms");
    expect(email).not.toBe(sms);
    expect(state.send_email_idempotency_key).toBe(email);
    expect(state.send_sms_idempotency_key).toBe(sms);
  });

  it("creates a random UUID by default", () => {
    const key = keys.fromState({}, "charge");
    expect(key).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(keys.fromState({}, "charge")).not.toBe(key);
  });

  it("treats a field that is null or undefined as no key yet", () => {
    const state: Record<string, unknown> = { send_email_idempotency_key: null };
    expect(keys.fromState(state, "send_email", () => "fresh")).toBe("fresh");
    expect(keys.fromState({ send_email_idempotency_key: undefined }, "send_email", () => "fresh")).toBe(
      "fresh",
    );
  });

  it("mints a new key when the state was not persisted before the call: the pitfall its doc warns about", () => {
    const checkpoint: Record<string, unknown> = {}; // taken before the key was made
    const live = { ...checkpoint };
    const first = keys.fromState(live, "send_email");
    const afterResume = keys.fromState({ ...checkpoint }, "send_email");
    expect(afterResume).not.toBe(first);
  });

  it.each([
    ["an empty string", ""],
    ["a number", 42],
    ["an object", { key: "k" }],
    ["a string over 255 characters", "k".repeat(256)],
  ])("rejects a stored key that is %s as idempotency_key_invalid", (_, stored) => {
    const error = errorOf(() => keys.fromState({ send_email_idempotency_key: stored }, "send_email"));
    expect(error.code).toBe("idempotency_key_invalid");
    expect(error.message).toMatch(/^state\.send_email_idempotency_key must be a non-empty string/);
  });

  it("rejects an invalid key from create() and leaves the state untouched", () => {
    const state: Record<string, unknown> = {};
    expect(errorOf(() => keys.fromState(state, "send_email", () => "")).code).toBe("idempotency_key_invalid");
    expect(state).toEqual({});
  });

  it("rejects an empty tool name as invalid_arguments", () => {
    const error = errorOf(() => keys.fromState({}, ""));
    expect(error.code).toBe("invalid_arguments");
    expect(error.message).toBe("keys.fromState needs toolName as a non-empty string, got an empty string.");
  });

  it.each([null, "state", 7])("rejects a state that is not an object (%s) as invalid_arguments", (state) => {
    const error = errorOf(() => keys.fromState(state as never, "send_email"));
    expect(error.code).toBe("invalid_arguments");
    expect(error.message).toBe("keys.fromState needs the agent state object.");
  });

  it("accepts a stored key of exactly 255 characters", () => {
    const stored = "k".repeat(255);
    expect(keys.fromState({ send_email_idempotency_key: stored }, "send_email")).toBe(stored);
  });

  it.each([
    ["", "an empty string"],
    ["k".repeat(256), "256 characters long, over the 255-character limit"],
    [42, "a number"],
    [Array.from({ length: 300 }, () => "k"), "an array"],
    [{ key: "k" }, "an object"],
  ])("says what a refused stored key is: %#", (stored, what) => {
    expect(errorOf(() => keys.fromState({ send_email_idempotency_key: stored }, "send_email")).message).toBe(
      `state.send_email_idempotency_key must be a non-empty string of at most 255 characters, but is ${what}.`,
    );
  });

  it.each([
    [null, "null"],
    [undefined, "undefined"],
  ])("names what create() returned when it is no key: %s", (made, what) => {
    expect(errorOf(() => keys.fromState({}, "send_email", () => made as never)).message).toBe(
      `The key returned by keys.fromState's create() must be a non-empty string of at most 255 characters, but is ${what}.`,
    );
  });
});

describe("keys.composite", () => {
  const args = { to: "alice@example.com", subject: "Summary" };

  it("gives the same key for the same parts, whatever the key order of their objects", () => {
    const key = keys.composite("thread-1", "send_summary", args);
    expect(key).toMatch(derivedKey("composite"));
    expect(keys.composite("thread-1", "send_summary", { subject: "Summary", to: "alice@example.com" })).toBe(
      key,
    );
  });

  it("gives a different key when any part changes, including the arguments", () => {
    const key = keys.composite("thread-1", "send_summary", args);
    expect(keys.composite("thread-2", "send_summary", args)).not.toBe(key);
    expect(keys.composite("thread-1", "send_reply", args)).not.toBe(key);
    expect(keys.composite("thread-1", "send_summary", { ...args, to: "bob@example.com" })).not.toBe(key);
  });

  it("keeps the parts apart: moving a boundary between parts changes the key", () => {
    expect(keys.composite("ab", "c")).not.toBe(keys.composite("a", "bc"));
    expect(keys.composite(["a", "b"])).not.toBe(keys.composite("a", "b"));
  });

  it("rejects zero parts", () => {
    const error = errorOf(() => keys.composite());
    expect(error.code).toBe("invalid_arguments");
    expect(error.message).toMatch(/at least one part/);
  });

  it("rejects a part that is not JSON data, naming it", () => {
    expect(errorOf(() => keys.composite("thread-1", { when: Number.NaN })).message).toMatch(
      /^parts\[1\]\.when is NaN/,
    );
  });
});

describe("keys.intent", () => {
  const fields = { action: "send_email", to: "alice@example.com", subject: "Meeting summary" };

  it("makes a duplicate emission in one turn collide: same turn, same fields, any key order", () => {
    const key = keys.intent("turn-7", fields);
    expect(key).toMatch(derivedKey("intent"));
    expect(
      keys.intent("turn-7", { subject: "Meeting summary", to: "alice@example.com", action: "send_email" }),
    ).toBe(key);
  });

  it("gives a new turn a new key: asking again is a new intent and a new send", () => {
    expect(keys.intent("turn-8", fields)).not.toBe(keys.intent("turn-7", fields));
  });

  it("gives another intent in the same turn its own key", () => {
    expect(keys.intent("turn-7", { ...fields, to: "bob@example.com" })).not.toBe(
      keys.intent("turn-7", fields),
    );
  });

  it("hashes the canonical JSON of [turnId, fields]", () => {
    expect(keys.intent("turn-7", fields)).toBe(
      `intent_${keys.content(["turn-7", fields]).slice("content_".length)}`,
    );
  });

  it("differs from a composite or content key of the same data", () => {
    const key = keys.intent("turn-7", fields);
    expect(keys.composite("turn-7", fields)).not.toBe(key);
    expect(keys.content(["turn-7", fields])).not.toBe(key);
  });

  it.each([
    ["an empty turn id", "", fields, /turnId/],
    ["a turn id that is not a string", 7, fields, /turnId/],
    ["fields that are not an object", "turn-7", "alice", /intent fields/],
    ["fields that are an array", "turn-7", ["alice"], /intent fields/],
  ])("rejects %s as invalid_arguments", (_, turnId, badFields, message) => {
    const error = errorOf(() => keys.intent(turnId as string, badFields as Record<string, unknown>));
    expect(error.code).toBe("invalid_arguments");
    expect(error.message).toMatch(message);
  });

  it("rejects a field that is not JSON data, naming it", () => {
    expect(errorOf(() => keys.intent("turn-7", { to: new Set(["a"]) })).message).toMatch(
      /^fields\.to is a Set/,
    );
  });

  it("names the turn id and the helper in what it refuses", () => {
    expect(errorOf(() => keys.intent("turn-\ud800", fields)).message).toMatch(
      /^turnId contains a lone surrogate/,
    );
    expect(errorOf(() => keys.intent(7 as never, fields)).message).toBe(
      "keys.intent needs turnId as a non-empty string, got a number.",
    );
  });

  it("rejects null fields as invalid_arguments", () => {
    const error = errorOf(() => keys.intent("turn-7", null as never));
    expect(error.code).toBe("invalid_arguments");
    expect(error.message).toMatch(/intent fields/);
  });
});

describe("keys.content", () => {
  it("gives equal content the same key, whatever the key order", () => {
    const key = keys.content({ path: "reports/q3.md", body: "# Q3" });
    expect(key).toMatch(derivedKey("content"));
    expect(keys.content({ body: "# Q3", path: "reports/q3.md" })).toBe(key);
  });

  it("gives any change of content, or of a value's type, a new key", () => {
    const key = keys.content({ path: "reports/q3.md", body: "# Q3" });
    expect(keys.content({ path: "reports/q3.md", body: "# Q3 " })).not.toBe(key);
    expect(keys.content(1)).not.toBe(keys.content("1"));
  });

  it("blocks the same message sent again later: the pitfall its doc warns about", () => {
    const message = { to: "alice@example.com", body: "Reminder: standup at 10" };
    const today = keys.content(message);
    const tomorrow = keys.content(message);
    expect(tomorrow).toBe(today); // a legitimate second send would be absorbed as a repeat
  });

  it("rejects content that is not JSON data, naming it content", () => {
    expect(errorOf(() => keys.content(Number.NaN)).message).toMatch(/^content is NaN/);
  });
});

describe("similarMarkerKey", () => {
  it("fingerprints the similar fields as the tool's bigint option says", () => {
    expect(similarMarkerKey("send_email", { cents: 10n }, "string")).toMatch(/^~similar~[0-9a-f]{64}$/);
    expect(() => similarMarkerKey("send_email", { cents: 10n }, "reject")).toThrow(/BigInt/);
  });
});

describe("validateKey", () => {
  it("returns the key it accepts", () => {
    expect(validateKey("turn-7-alice", "send_email")).toBe("turn-7-alice");
    expect(validateKey("k".repeat(255), "send_email")).toBe("k".repeat(255));
  });

  for (const key of [undefined, null]) {
    it(`calls a ${String(key)} key missing, and tells the caller to choose one that repeats with the call`, () => {
      const error = errorOf(() => validateKey(key, "send_email"));
      expect(error.code).toBe("idempotency_key_missing");
      expect(error.message).toMatch(/^send_email: no idempotency key\. Pass \{ key \}/);
      expect(error.message).toContain("stable across every repeat (see keys.fromState and keys.intent)");
      expect(error.message).toContain("idempotool never makes one up");
    });
  }

  it("names the type of a key that is no string", () => {
    const error = errorOf(() => validateKey(42, "send_email"));
    expect(error.code).toBe("idempotency_key_invalid");
    expect(error.message).toBe("send_email: the idempotency key must be a string, got number.");
  });

  it("names the allowed length and the key's own", () => {
    const error = errorOf(() => validateKey("k".repeat(256), "send_email"));
    expect(error.code).toBe("idempotency_key_invalid");
    expect(error.message).toBe("send_email: the idempotency key must be 1–255 characters, got 256.");
  });

  it("says why a key cut in the middle of a character is refused", () => {
    const error = errorOf(() => validateKey("order-\ud83d", "send_email"));
    expect(error.code).toBe("idempotency_key_invalid");
    expect(error.message).toContain("lone UTF-16 surrogate at index 6");
    expect(error.message).toContain(
      "Stores keep it as U+FFFD, so two keys that differ only there would be one record",
    );
  });

  it("refuses idempotool's reserved key spaces, naming each and asking for another key", () => {
    const marker = errorOf(() => validateKey("~similar~abc", "send_email"));
    expect(marker.code).toBe("idempotency_key_invalid");
    expect(marker.message).toBe(
      'send_email: idempotency keys starting with "~similar~" are reserved for idempotool\'s near-duplicate markers; choose another key.',
    );
    const compensation = errorOf(() => validateKey(`${compensationKeyPrefix}abc`, "send_email"));
    expect(compensation.message).toBe(
      'send_email: idempotency keys starting with "~compensation~" are reserved for idempotool\'s saga compensations; choose another key.',
    );
    const byArguments = errorOf(() => validateKey("~args~abc", "send_email"));
    expect(byArguments.message).toBe(
      'send_email: idempotency keys starting with "~args~" are reserved for idempotool\'s calls made without a key; choose another key.',
    );
    // Not even idempotool's own compensation call may use one.
    expect(errorOf(() => validateCallKey("~args~abc", "refund", ownCompensationCall({}))).code).toBe(
      "idempotency_key_invalid",
    );
  });
});

describe("argumentsKey and keyedByArguments", () => {
  it("derives one key per tool and arguments, from the keyed fingerprint when there is one", () => {
    const key = argumentsKey("send_email", { to: "ada" }, "reject");
    expect(key).toMatch(/^~args~[0-9a-f]{64}$/);
    expect(argumentsKey("send_email", { to: "ada" }, "reject")).toBe(key);
    expect(argumentsKey("send_sms", { to: "ada" }, "reject")).not.toBe(key);
    expect(argumentsKey("send_email", { to: "bob" }, "reject")).not.toBe(key);
    // A tool whose arguments may hold bigints (bigint: "string") gets a key for them too.
    expect(argumentsKey("refund", { cents: 10n }, "string")).toMatch(/^~args~[0-9a-f]{64}$/);
    const fingerprintKeys = resolveFingerprintKeys(
      { keys: { f1: new Uint8Array(32).fill(7) }, current: "f1" },
      undefined,
      (option, problem) => {
        throw new Error(`${option} ${problem}`);
      },
    );
    expect(argumentsKey("send_email", { to: "ada" }, "reject", fingerprintKeys)).not.toBe(key);
  });

  it("marks only the call options given, and idempotent() keys such a call by its arguments", async () => {
    const marked = keyedByArguments({ key: "ignored" });
    expect(isKeyedByArguments(marked)).toBe(true);
    expect(isKeyedByArguments({ key: "ignored" })).toBe(false);
    const tool = idempotent(async (args: { to: string }) => args.to, {
      name: "send_email",
      store: memoryStore(),
    });
    const envelope = await tool({ to: "ada" }, keyedByArguments({ key: "ignored" }));
    expect(envelope.idempotency_key).toBe(argumentsKey("send_email", { to: "ada" }, "reject"));
  });
});

describe("validateCallKey", () => {
  const key = `${compensationKeyPrefix}${"0".repeat(64)}`;

  it("lets idempotool's own compensation call use a compensation key, and nobody else", () => {
    const own = { key };
    expect(ownCompensationCall(own)).toBe(own);
    expect(validateCallKey(key, "refund", own)).toBe(key);
    expect(errorOf(() => validateCallKey(key, "refund", { key })).code).toBe("idempotency_key_invalid");
  });

  it("still refuses a near-duplicate marker's key on idempotool's own call", () => {
    const own = ownCompensationCall({});
    expect(errorOf(() => validateCallKey("~similar~abc", "refund", own)).code).toBe(
      "idempotency_key_invalid",
    );
  });
});

describe("validateScope", () => {
  it("defaults to the default scope and returns a scope it accepts", () => {
    expect(validateScope(undefined)).toBe("default");
    expect(validateScope("tenant-a")).toBe("tenant-a");
    expect(validateScope("s".repeat(255))).toBe("s".repeat(255));
  });

  const bad: [string, unknown, string][] = [
    ["empty", "", "got 0 characters"],
    ["over 255 characters", "s".repeat(256), "got 256 characters"],
    ["a number", 7, "got number"],
    ["null", null, "got object"],
  ];
  for (const [label, scope, got] of bad) {
    it(`refuses a scope that is ${label}, saying what a scope must be and what it got`, () => {
      const error = errorOf(() => validateScope(scope));
      expect(error.code).toBe("invalid_arguments");
      expect(error.message).toBe(`The scope must be a string of 1–255 characters, ${got}.`);
    });
  }

  it("says where a scope's lone surrogate is and why it is refused", () => {
    const error = errorOf(() => validateScope("tenant-\udc00"));
    expect(error.code).toBe("invalid_arguments");
    expect(error.message).toBe(
      "The scope has a lone UTF-16 surrogate at index 7: stores keep it as U+FFFD, so two scopes that differ only there would be one.",
    );
  });
});
