// The conformance suite is only worth something if it fails broken stores. Each store here wraps
// memoryStore and breaks one promise of the contract; the suite must catch it in the cases that
// describe that promise, and still pass the cases about other things.
import { setImmediate as nextMacrotask } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { decodeListCursor, encodeListCursor } from "../src/core/list-paging.js";
import { memoryStore } from "../src/core/memory-store.js";
import type { IdempotencyStore } from "../src/core/store.js";
import { storeConformanceCases } from "../src/testing/conformance.js";
import { fakeClock } from "../src/testing/fake-clock.js";

/** Claim as get-then-insert with a macrotask in between: two callers can both see the key free. */
function nonAtomicClaim(): IdempotencyStore {
  const inner = memoryStore();
  return {
    ...inner,
    async claim(request) {
      const existing = await inner.get(request, request.now);
      await nextMacrotask();
      if (existing) return { claimed: false, record: existing, now: request.now };
      await inner.delete(request);
      return inner.claim(request);
    },
  };
}

/** Settle, renew and release act for whoever asks, not only for the owner token. */
function ignoresOwnerTokens(): IdempotencyStore {
  const inner = memoryStore();
  const ownerOf = async (id: { scope: string; key: string }) =>
    (await inner.get(id, Number.NEGATIVE_INFINITY))?.token ?? "";
  return {
    ...inner,
    settle: async (request) => inner.settle({ ...request, token: await ownerOf(request) }),
    renew: async (request) => inner.renew({ ...request, token: await ownerOf(request) }),
    release: async (request) => inner.release({ ...request, token: await ownerOf(request) }),
  };
}

/** Takeover treats every lease as passed. */
function ignoresLeases(): IdempotencyStore {
  const inner = memoryStore();
  return {
    ...inner,
    async takeover(request) {
      const current = await inner.get(request, request.now);
      const now = current ? Math.max(request.now, current.leaseExpiresAt) : request.now;
      return inner.takeover({ ...request, now });
    },
  };
}

/** Claim takes over a stale lease by itself instead of returning the holder. */
function claimTakesOverStaleLeases(): IdempotencyStore {
  const inner = memoryStore();
  return {
    ...inner,
    async claim(request) {
      const outcome = await inner.claim(request);
      const holder = outcome.record;
      if (outcome.claimed || holder.status !== "in_progress" || holder.leaseExpiresAt > request.now)
        return outcome;
      const record = await inner.takeover({ ...request, fromToken: holder.token });
      return record ? { claimed: true, record, now: request.now } : outcome;
    },
  };
}

/** List pages in (scope, key) order, but its cursor compares keys alone. */
function cursorIgnoresScope(): IdempotencyStore {
  const inner = memoryStore();
  return {
    ...inner,
    async list({ cursor, limit = 100, ...filters }) {
      const after = cursor === undefined ? undefined : decodeListCursor("broken", cursor);
      const all = (await inner.list({ ...filters, limit: 1_000 })).records;
      const rest = all.filter((record) => after === undefined || record.key > after.key);
      const records = rest.slice(0, limit);
      const last = records.at(-1);
      return rest.length > limit && last ? { records, nextCursor: encodeListCursor(last) } : { records };
    },
  };
}

/**
 * Settle and renew find nothing once the record's window has passed: the store forgets a record the moment
 * it expires, as Redis did when it deleted every key at its record's expiresAt.
 */
function forgetsAtWindowEnd(): IdempotencyStore {
  const inner = memoryStore();
  return {
    ...inner,
    // memoryStore's get drops an expired record as it looks it up.
    async settle(request) {
      await inner.get(request, request.now);
      return inner.settle(request);
    },
    async renew(request) {
      await inner.get(request, request.now);
      return inner.renew(request);
    },
  };
}

/** Claim takes a record in progress or unknown for a holder even past its window, as if it were live. */
function openRecordsBlockClaims(): IdempotencyStore {
  const inner = memoryStore();
  return {
    ...inner,
    async claim(request) {
      const held = await inner.get(request, Number.NEGATIVE_INFINITY);
      if (held?.status === "in_progress" || held?.status === "unknown")
        return { claimed: false, record: held, now: request.now };
      return inner.claim(request);
    },
  };
}

/**
 * Settle refuses a result (or, with `field`, a failure's text) over `keepsBytes` (as a database refuses a
 * row over its size limit), while the store declares `declaresBytes` (or nothing).
 */
function keepsLessThanItDeclares(
  keepsBytes: number,
  declaresBytes?: number,
  field: "result" | "error" = "result",
): () => IdempotencyStore {
  return () => {
    const inner = memoryStore();
    return {
      ...inner,
      ...(declaresBytes === undefined ? {} : { maxStoredResultBytes: declaresBytes }),
      async settle(request) {
        const text = request[field];
        if (text !== null && Buffer.byteLength(text, "utf8") > keepsBytes) {
          throw new Error("row too large");
        }
        return inner.settle(request);
      },
    };
  };
}

/**
 * Claim and get look a key up as `lookUp` turns it: folded to one case and normalised (as a case-insensitive
 * collation would), or cut at a NUL (as a C string would).
 */
function looksKeysUp(lookUp: (key: string) => string): () => IdempotencyStore {
  return () => {
    const inner = memoryStore();
    return {
      ...inner,
      claim: (request) => inner.claim({ ...request, key: lookUp(request.key) }),
      get: (id, now) => inner.get({ ...id, key: lookUp(id.key) }, now),
    };
  };
}

async function failingCases(createStore: () => IdempotencyStore): Promise<Set<string>> {
  const failing = new Set<string>();
  const cases = storeConformanceCases({
    name: "broken",
    create: () => ({ store: createStore(), clock: fakeClock() }),
  });
  for (const c of cases) {
    try {
      await c.run();
    } catch {
      failing.add(c.name);
    }
  }
  return failing;
}

const names = new Set(
  storeConformanceCases({ name: "names", create: () => ({ store: memoryStore(), clock: fakeClock() }) }).map(
    (c) => c.name,
  ),
);
function caseName(name: string): string {
  expect(names, `no conformance case is named "${name}"`).toContain(name);
  return name;
}

const inserts = "claim inserts an in_progress record carrying the request, its lease and its expiry";

describe("the conformance suite catches broken stores", () => {
  it("fails a store whose claim is not atomic", async () => {
    const failing = await failingCases(nonAtomicClaim);
    expect(failing).toContain(
      caseName(
        "concurrent claims of one key: exactly one wins and every other caller sees the winner's token",
      ),
    );
    expect(failing).not.toContain(caseName(inserts));
  });

  it("fails a store whose settle, renew and release ignore the owner token", async () => {
    const failing = await failingCases(ignoresOwnerTokens);
    for (const name of [
      "settle with a wrong token returns null and leaves the record unchanged",
      "after a takeover the old token can no longer settle, renew or release (fencing)",
      "renew with a wrong token returns false and leaves the record unchanged",
      "release deletes the record only for the owner token, and the key can be claimed again",
    ]) {
      expect(failing).toContain(caseName(name));
    }
    expect(failing).not.toContain(caseName(inserts));
  });

  it("fails a store whose takeover ignores a live lease", async () => {
    const failing = await failingCases(ignoresLeases);
    expect(failing).toContain(
      caseName("takeover of a live lease returns null and leaves the record unchanged"),
    );
    expect(failing).not.toContain(caseName(inserts));
  });

  it("fails a store whose claim takes over stale leases", async () => {
    const failing = await failingCases(claimTakesOverStaleLeases);
    expect(failing).toContain(
      caseName("claim never takes over a stale lease: it returns the stale holder for the caller to decide"),
    );
    expect(failing).not.toContain(caseName(inserts));
  });

  it("fails a store whose list cursor forgets the scope", async () => {
    const failing = await failingCases(cursorIgnoresScope);
    expect(failing).toContain(caseName("list pages skip nothing when scopes share keys"));
    expect(failing).not.toContain(caseName(inserts));
  });

  it("fails a store that keeps smaller results than it declares, or than 1 MiB sealed when it declares none", async () => {
    const largest = caseName(
      "keeps a result as large as it declares (maxStoredResultBytes, else 1 MiB sealed) byte-exact, beside the longest names",
    );
    for (const broken of [
      keepsLessThanItDeclares(64 * 1024, 64 * 1024 + 1),
      keepsLessThanItDeclares(1024 * 1024),
    ]) {
      const failing = await failingCases(broken);
      expect(failing).toContain(largest);
      expect(failing).not.toContain(caseName(inserts));
    }
    // Declaring what it keeps is enough.
    expect(await failingCases(keepsLessThanItDeclares(64 * 1024, 64 * 1024))).not.toContain(largest);
  });

  it("fails a store that keeps a smaller failure than the result it declares", async () => {
    const largest = (what: string) =>
      caseName(
        `keeps a ${what} as large as it declares (maxStoredResultBytes, else 1 MiB sealed) byte-exact, beside the longest names`,
      );
    const failing = await failingCases(keepsLessThanItDeclares(64 * 1024, 64 * 1024 + 1, "error"));
    expect(failing).toContain(largest("failure"));
    expect(failing).not.toContain(largest("result"));
    expect(failing).not.toContain(caseName(inserts));
  });

  it("fails a store that folds case or normalisation, or cuts a key at a NUL", async () => {
    const folded = await failingCases(looksKeysUp((key) => key.normalize("NFC").toLowerCase()));
    expect(folded).toContain(
      caseName(
        "keys that differ by case, by Unicode normalisation or in the last of 255 characters are different records",
      ),
    );
    expect(folded).not.toContain(caseName(inserts));
    const cut = await failingCases(looksKeysUp((key) => key.split("\u0000")[0]!));
    expect(cut).toContain(
      caseName(
        "a NUL inside a scope or key makes a different record, or the store refuses it as invalid_arguments",
      ),
    );
    expect(cut).not.toContain(caseName(inserts));
  });

  it("fails a store that forgets a record in progress or unknown when its window ends", async () => {
    const failing = await failingCases(forgetsAtWindowEnd);
    for (const name of [
      "a call frozen past its window without renewing still records its outcome, and a repeat then replays it",
      "settle and renew by the owner succeed after the window passed, while the store still holds the record",
    ]) {
      expect(failing).toContain(caseName(name));
    }
    expect(failing).not.toContain(caseName(inserts));
  });

  it("fails a store whose record in progress or unknown blocks claims past its window", async () => {
    const failing = await failingCases(openRecordsBlockClaims);
    expect(failing).toContain(
      caseName(
        "a record in progress or unknown past its window never blocks a claim, which fences its owner's late settle out",
      ),
    );
    expect(failing).not.toContain(caseName(inserts));
  });

  it("passes the store these are broken from", async () => {
    expect(await failingCases(memoryStore)).toEqual(new Set());
  });
});
