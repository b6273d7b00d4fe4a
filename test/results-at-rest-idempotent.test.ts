import { randomBytes } from "node:crypto";
import { expect, it } from "vitest";
import { idempotent } from "../src/core/idempotent.js";
import { memoryStore } from "../src/core/memory-store.js";
import { definitiveFailure } from "../src/core/outcomes.js";
import { ResultUndecryptableError } from "../src/core/result-codec.js";

const k1 = randomBytes(32);
const k2 = randomBytes(32);

it("idempotent() stores results encrypted and redacted, replays them, and rotates keys", async () => {
  const store = memoryStore();
  let runs = 0;
  const fn = async () => {
    runs++;
    return { card: { number: "4242" }, token: "tok", id: "ch_1" };
  };
  const v1 = idempotent(fn, {
    name: "charge",
    store,
    redact: ["token"],
    encryption: { keys: { k1 }, current: "k1" },
  });
  const first = await v1({}, { key: "a" });
  expect(first.result.token).toBe("tok");
  const raw = await store.get({ scope: "default", key: "a" }, Date.now());
  expect(raw?.result).not.toContain("4242");
  const v2 = idempotent(fn, {
    name: "charge",
    store,
    redact: ["token"],
    encryption: { keys: { k2, k1 }, current: "k2" },
  });
  const replay = await v2({}, { key: "a" });
  expect(replay).toMatchObject({
    was_replay: true,
    result: { card: { number: "4242" }, token: "[redacted]", id: "ch_1" },
  });
  const wrong = idempotent(fn, { name: "charge", store, encryption: { keys: { k2 }, current: "k2" } });
  await expect(wrong({}, { key: "a" })).rejects.toBeInstanceOf(ResultUndecryptableError);
  expect(runs).toBe(1);
});

it("idempotent() seals definitive failures and replays them", async () => {
  const store = memoryStore();
  const encryption = { keys: { k1 }, current: "k1" };
  const tool = idempotent(
    async () => {
      throw definitiveFailure(new Error("card 4242 declined"), { last4: "4242" });
    },
    { name: "charge", store, encryption },
  );
  await expect(tool({}, { key: "a" })).rejects.toThrow("card 4242 declined");
  expect((await store.get({ scope: "default", key: "a" }, Date.now()))?.error).not.toContain("4242");
  await expect(tool({}, { key: "a" })).rejects.toMatchObject({
    message: "card 4242 declined",
    was_replay: true,
  });
});
