/**
 * Failures in odd shapes: a value thrown that cannot become a string, a store refusing a key it cannot
 * hold, a store whose read throws at once while a takeover's reply is lost. Each still ends as the record
 * protocol says: the key freed when nothing ran, the outcome recorded when something may have, and the
 * caller told in the library's own words.
 */
import { describe, expect, it } from "vitest";
import { rejection } from "../../test/fixtures/tools.js";
import { fakeClock } from "../testing/fake-clock.js";
import { IdempotencyError, OutcomeUnknownError, StoreUnavailableError } from "./errors.js";
import type { IdempotencyEvent } from "./events.js";
import { idempotent } from "./idempotent.js";
import { memoryStore } from "./memory-store.js";
import type { IdempotencyStore } from "./store.js";

/** A value whose conversion to a string throws. */
const unprintable = () => Object.create(null) as object;

describe("a thrown value that cannot become a string", () => {
  it("thrown before the tool starts (by the clock the lease sleeps on): the key is freed, the value rethrown", async () => {
    const store = memoryStore();
    const thrown = unprintable();
    const clock = {
      now: () => 1_000,
      sleep: () => {
        throw thrown;
      },
    };
    const events: string[] = [];
    let runs = 0;
    const tool = idempotent(
      async () => {
        runs++;
        return "ok";
      },
      { name: "t", store, clock, onEvent: (event: IdempotencyEvent) => events.push(event.type) },
    );
    expect(await rejection(tool({}, { key: "k" }))).toBe(thrown);
    expect(runs).toBe(0);
    expect(events).toEqual(["run", "released"]);
    expect(await store.get({ scope: "default", key: "k" }, 1_000)).toBeUndefined();
  });

  it("thrown by an irreversible tool: the outcome is recorded unknown, and the caller told so", async () => {
    const store = memoryStore();
    const clock = fakeClock();
    const tool = idempotent(
      async () => {
        throw unprintable();
      },
      { name: "t", store, clock, effect: "irreversible" },
    );
    expect(await rejection(tool({}, { key: "k" }))).toBeInstanceOf(OutcomeUnknownError);
    expect((await store.get({ scope: "default", key: "k" }, clock.now()))?.status).toBe("unknown");
    expect(await rejection(tool({}, { key: "k" }))).toBeInstanceOf(OutcomeUnknownError);
  });
});

describe("a store that refuses the key itself", () => {
  it("is not asked again and again to release a claim it never made", async () => {
    const clock = fakeClock();
    let releases = 0;
    const refuse = () => {
      throw new IdempotencyError("invalid_arguments", "this store cannot hold that key");
    };
    const store: IdempotencyStore = {
      ...memoryStore(),
      claim: async () => refuse(),
      release: async () => {
        releases++;
        return refuse();
      },
    };
    const tool = idempotent(async () => "ok", { name: "t", store, clock });
    const error = await rejection(tool({}, { key: "k\u0000one" }));
    expect(error).toMatchObject({ code: "invalid_arguments" });
    await clock.advance(10 * 60_000);
    expect(releases).toBe(1);
  });
});

describe("a takeover whose reply was lost, on a store whose read throws at once", () => {
  it("fails closed with store_unavailable, reported as a store error, and runs nothing", async () => {
    const clock = fakeClock();
    const inner = memoryStore();
    // A dead worker's claim, stale by now.
    await inner.claim({
      scope: "default",
      key: "k",
      tool: "t",
      fingerprint: "unused",
      token: "dead",
      leaseMs: 1_000,
      ttlMs: 86_400_000,
      now: clock.now(),
    });
    await clock.advance(2_000);
    const store: IdempotencyStore = {
      ...inner,
      claim: async (request) => {
        const found = await inner.claim(request);
        // The stored fingerprint is whatever this call's is: the record is the same call's.
        return found.claimed
          ? found
          : { ...found, record: { ...found.record, fingerprint: request.fingerprint } };
      },
      takeover: async () => {
        throw new Error("takeover reply lost");
      },
      get: () => {
        throw new TypeError("get threw at once");
      },
    };
    const events: string[] = [];
    let runs = 0;
    const tool = idempotent(
      async () => {
        runs++;
        return "ok";
      },
      { name: "t", store, clock, effect: "native-key", onEvent: (event) => events.push(event.type) },
    );
    const error = await rejection(tool({}, { key: "k" }));
    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect(events).toContain("store_error");
    expect(runs).toBe(0);
  });
});
