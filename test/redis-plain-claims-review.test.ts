// A plain claim replays a settled record because its key is there: that holds only while the key's expiry
// is the millisecond before the record's. A key that outlives its record (its expiry lifted or moved by
// someone else, or set by a store judging by another clock) must not make an expired record replay.
import { describe, expect, it } from "vitest";
import { tieredStore } from "../src/index.js";
import { redisStore } from "../src/redis/index.js";
import { recordName } from "../src/redis/record-key.js";
import { claimRequest } from "./fixtures/claim-request.js";
import { serverNow } from "./fixtures/redis-helpers.js";
import { redisTestFile } from "./fixtures/redis-test-file.js";

const { client, fresh } = redisTestFile("plain-review");

const completed = (key: string, token: string, ttlMs: number, now: number) => ({
  scope: "tenant-a",
  key,
  token,
  status: "completed" as const,
  result: `"${key}"`,
  error: null,
  ttlMs,
  now,
});

describe("redisStore plain claims never replay a record past its expiresAt", () => {
  it("claims over a completed record whose key lost its expiry once the record has expired", async () => {
    const prefix = await fresh();
    const store = redisStore({ client, prefix });
    await store.claim(claimRequest());
    await store.settle(completed("order-1", "token-a", 60_000, Date.now()));
    const name = recordName(prefix, "tenant-a", "order-1");
    // The record as it stands once its window has passed, its key kept by a PERSIST (another program's,
    // an operator's, a copy that dropped TTLs): expiresAt is a second ago by the server's clock.
    const value = (await client.get(name))!;
    const expiresAt = (await serverNow(client)) - 1_000;
    await client.set(name, value.replace(/^\d+/, String(expiresAt)));
    expect(await client.pexpiretime(name)).toBe(-1);

    const again = await store.claim(claimRequest({ token: "token-b" }));
    expect(again.claimed).toBe(true);
  });

  it("claims over a completed record a store on a clock behind the server's left with a longer-lived key", async () => {
    const prefix = await fresh();
    // A store judging by a clock 10 s behind Redis's (clock "request", or clockOffsetMs -10 000) on the
    // same prefix: it keeps the key for the record's remaining life on Redis's clock, past its expiresAt.
    const behind = redisStore({ client, prefix, clockOffsetMs: -10_000 });
    const onServer = redisStore({ client, prefix });
    await behind.claim(claimRequest({ leaseMs: 1_000, ttlMs: 5_000 }));
    const settled = (await behind.settle(completed("order-1", "token-a", 5_000, Date.now())))!;
    expect(settled.expiresAt).toBeLessThan(await serverNow(client));

    const again = await onServer.claim(claimRequest({ token: "token-b" }));
    expect(again.claimed).toBe(true);
  });
});

describe("tieredStore over a redisStore with plain claims", () => {
  it("serves a replay another worker settled from its cache for longer than a millisecond (asks for the store's clock)", async () => {
    const prefix = await fresh();
    const elsewhere = redisStore({ client, prefix });
    await elsewhere.claim(claimRequest());
    await elsewhere.settle(completed("order-1", "token-a", 60_000, Date.now()));

    let claims = 0;
    const durable = redisStore({ client, prefix });
    const tiered = tieredStore({
      store: {
        ...durable,
        claim: (request) => {
          claims++;
          return durable.claim(request);
        },
      },
    });
    const now = Date.now();
    expect((await tiered.claim(claimRequest({ token: "token-b", now }))).claimed).toBe(false);
    // 10 ms later by the caller's clock: well within maxStalenessMs (1 s) and the record's 60 s window.
    expect((await tiered.claim(claimRequest({ token: "token-c", now: now + 10 }))).claimed).toBe(false);
    expect(claims).toBe(1);
  });
});

describe("redisStore settle reads a stub as every other script does", () => {
  // A stub's key life is leaseMs + ttlMs + keptMs - 1: one of less than 1 ms is nothing a claim writes (SET PX
  // refuses it), so once such a value has no expiry it has no times to stand for: fromStub leaves it as
  // no record, and claim, get, takeover, renew and release refuse it. Settle must refuse it too, not
  // write a completed record over it.
  it.each(["0 0 0", "0 1 0", "1 0 0", "0 0 1"])(
    "refuses a stub without expiry whose key life (lease, ttl and kept %s) is under 1 ms",
    async (times) => {
      const prefix = await fresh();
      const store = redisStore({ client, prefix });
      const name = recordName(prefix, "tenant-a", "order-1");
      const forged = `~ ${times} 1 7 10 3 - -\ntoken-asend_emailfp1`;
      await client.set(name, forged);
      await expect(store.get({ scope: "tenant-a", key: "order-1" }, Date.now())).rejects.toThrow(
        /not an idempotool record/,
      );
      expect(await store.settle(completed("order-1", "token-a", 60_000, Date.now()))).toBeNull();
      expect(await client.get(name)).toBe(forged);
      expect(await client.pexpiretime(name)).toBe(-1);
    },
  );

  // Past 2^53 - 1 a Lua number is no longer exact and string.format("%d") overflows to a negative
  // number: read as a stub, such a value became a negative PEXPIRE, and a claim or a get deleted the key.
  it("refuses a stub whose times no store writes, and leaves the key as it is", async () => {
    const prefix = await fresh();
    const store = redisStore({ client, prefix });
    const name = recordName(prefix, "tenant-a", "order-1");
    const forged = "~ 100000000000000000000 1 86400000 1 7 10 3 - -\ntoken-asend_emailfp1";
    await client.set(name, forged);
    await expect(store.get({ scope: "tenant-a", key: "order-1" }, Date.now())).rejects.toThrow(
      /not an idempotool record/,
    );
    await expect(store.claim(claimRequest({ token: "token-b" }))).rejects.toThrow(/not an idempotool record/);
    expect(await store.settle(completed("order-1", "token-a", 60_000, Date.now()))).toBeNull();
    expect(await client.get(name)).toBe(forged);
  });
});
