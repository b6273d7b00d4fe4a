/**
 * Every store gives a caller the envelope the memory store gives (test/fixtures/stores.ts): on the first
 * call and on its replay, the store behind idempotent() does not show. Where the server's clock dates a
 * record (PostgreSQL, Redis), its times are the server's, and only the span between them must agree.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Envelope, idempotent, memoryStore } from "../src/index.js";
import { fakeClock } from "../src/testing/index.js";
import { type OpenedTestStore, openStoreUrl, STORES, type StoreService } from "./fixtures/stores.js";

for (const row of STORES.filter((r) => r.name !== "memory")) {
  describe(`${row.name}: the same envelope as the memory store`, () => {
    let service: StoreService | undefined;
    let store: OpenedTestStore;
    beforeAll(async () => {
      if (row.kind === "factory") {
        store = row.create();
        return;
      }
      service = await row.start();
      store = await openStoreUrl((await service.fresh("envelope"))[0]!);
    }, 60_000);
    afterAll(async () => {
      await store?.close();
      await service?.close();
    });

    it("on the first call and on its replay", async () => {
      const clock = fakeClock();
      const inMemory = idempotent(async () => 1, { name: "t", store: memoryStore(), clock });
      const tested = idempotent(async () => 1, { name: "t", store, clock });
      for (const call of ["first", "replay"]) {
        const got = await tested({}, { key: "k" });
        const wanted = await inMemory({}, { key: "k" });
        if (row.judgesByRequestTime) {
          expect(got, call).toEqual(wanted);
        } else {
          expect(withoutTimes(got), call).toEqual(withoutTimes(wanted));
          // The record's time to live runs from when the call settled, a few real milliseconds in.
          expect(span(got), call).toBeGreaterThanOrEqual(span(wanted));
          expect(span(got), call).toBeLessThan(span(wanted) + 5_000);
        }
      }
    });
  });
}

function withoutTimes({ original_called_at: _, expires_at: __, ...rest }: Envelope<unknown>) {
  return rest;
}

/** How long the record is kept, from its first call. */
function span(envelope: Envelope<unknown>): number {
  return Date.parse(envelope.expires_at) - Date.parse(envelope.original_called_at);
}
