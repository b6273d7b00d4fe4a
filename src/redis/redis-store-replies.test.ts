/**
 * A reply that is neither 1 nor 0 to a script that answers one of them is no answer from Redis: a client
 * that makes one up (@upstash/redis answers "Aborted" for a request its abort signal stopped) must not
 * make an unsent release, renewal or delete look refused. Only the client is made up here: it injects
 * the failure.
 */
import { describe, expect, it } from "vitest";
import { type RedisLike, redisStore } from "./redis-store.js";

/** A client whose every script is answered with `reply`. */
function answering(reply: unknown): RedisLike {
  return {
    evalsha: async () => reply,
    eval: async () => reply,
    scan: async () => ["0", []],
  };
}

describe("redisStore, replies that are neither 1 nor 0", () => {
  for (const reply of ["Aborted", null, 2, "1"]) {
    it(`throws on ${JSON.stringify(reply)} rather than read it as refused`, async () => {
      const store = redisStore({ client: answering(reply) });
      const id = { scope: "tenant-a", key: "order-1" };
      await expect(store.release({ ...id, token: "t" })).rejects.toThrow(/neither 1 nor 0/);
      await expect(
        store.renew({ ...id, token: "t", leaseMs: 60_000, ttlMs: 60_000, now: Date.now() }),
      ).rejects.toThrow(/neither 1 nor 0/);
      await expect(store.delete(id)).rejects.toThrow(/neither 1 nor 0/);
    });
  }

  it("reads 1 as done and 0 as refused", async () => {
    const id = { scope: "tenant-a", key: "order-1" };
    expect(await redisStore({ client: answering(1) }).release({ ...id, token: "t" })).toBe(true);
    expect(await redisStore({ client: answering(0) }).release({ ...id, token: "t" })).toBe(false);
  });
});
