import { describe, expect, it } from "vitest";
import { type Email, emailTool as sharedEmailTool } from "../../test/fixtures/tools.js";
import { isIdempotencyError } from "./errors.js";
import { similarMarkerKey } from "./keys.js";
import { memoryStore } from "./memory-store.js";
import type { IdempotencyStore } from "./store.js";

/** send_email with the near-duplicate hint on `to`, unless `similar` is false. */
function emailTool(store: IdempotencyStore = memoryStore(), similar: boolean | { windowMs: number } = true) {
  return sharedEmailTool({
    store,
    ...(similar ? { similar: { fields: ["to"], ...(typeof similar === "object" ? similar : {}) } } : {}),
  });
}

const summary: Email = { to: "alice@example.com", subject: "Meeting summary", body: "Notes." };

describe("the near-duplicate hint across turns", () => {
  it("runs a new intent that matches a recent call, and tells the agent about the earlier one", async () => {
    const { send, sent, clock } = emailTool();
    await send(summary, { key: "turn-1" });
    await clock.advance(20_000);
    const again = await send({ ...summary, body: "Notes, resent." }, { key: "turn-2" });

    expect(sent).toHaveLength(2);
    expect(again.was_replay).toBe(false);
    expect(again.recent_similar_call).toEqual({
      called_at: "2026-01-01T00:00:00.000Z",
      idempotency_key: "turn-1",
    });
  });

  it("gives no hint once the window has passed", async () => {
    const { send, clock } = emailTool(memoryStore(), { windowMs: 30_000 });
    await send(summary, { key: "turn-1" });
    await clock.advance(30_000);
    expect((await send(summary, { key: "turn-2" })).recent_similar_call).toBeUndefined();
  });

  it("gives no hint for another recipient, another scope, or a replay of the same key", async () => {
    const { send } = emailTool();
    await send(summary, { key: "turn-1", scope: "user-a" });
    expect(
      (await send({ ...summary, to: "bob@example.com" }, { key: "turn-2", scope: "user-a" }))
        .recent_similar_call,
    ).toBeUndefined();
    expect((await send(summary, { key: "turn-3", scope: "user-b" })).recent_similar_call).toBeUndefined();
    expect((await send(summary, { key: "turn-1", scope: "user-a" })).recent_similar_call).toBeUndefined();
  });

  it("points at the most recent similar call", async () => {
    const { send, clock } = emailTool();
    await send(summary, { key: "turn-1" });
    await clock.advance(10_000);
    await send(summary, { key: "turn-2" });
    await clock.advance(10_000);
    expect((await send(summary, { key: "turn-3" })).recent_similar_call?.idempotency_key).toBe("turn-2");
  });

  it("writes nothing extra to the store when the option is off", async () => {
    const { send, store, clock } = emailTool(memoryStore(), false);
    await send(summary, { key: "turn-1" });
    const listed = await store.list({});
    expect(listed.records.map((r) => r.key)).toEqual(["turn-1"]);
    expect((await send(summary, { key: "turn-2" })).recent_similar_call).toBeUndefined();
    await clock.advance(0);
  });

  it("costs only the hint when the store fails on its markers", async () => {
    const inner = memoryStore();
    const store: IdempotencyStore = {
      ...inner,
      get: () => Promise.reject(new Error("replica lag")),
      delete: () => Promise.reject(new Error("replica lag")),
    };
    const { send, sent } = emailTool(store);
    await send(summary, { key: "turn-1" });
    const again = await send(summary, { key: "turn-2" });
    expect(again.recent_similar_call).toBeUndefined();
    expect(sent).toHaveLength(2);
  });
});

describe("marker keys are the library's own", () => {
  it("refuses a caller's key in the markers' key space, before the store or the tool is touched", async () => {
    const { send, sent, store } = emailTool();
    const key = similarMarkerKey("send_email", { to: summary.to }, "reject");
    const error = await send(summary, { key }).catch((e: unknown) => e);
    expect(isIdempotencyError(error, "idempotency_key_invalid")).toBe(true);
    expect(sent).toEqual([]);
    expect((await store.list({})).records).toEqual([]);
  });

  it("never deletes a call's record that sits where a marker goes: a repeat still replays it", async () => {
    const { send, sent, store, clock } = emailTool();
    const markerKey = similarMarkerKey("send_email", { to: summary.to }, "reject");
    // A record of a call under that key, as a store written before keys were reserved may hold.
    const held = await store.claim({
      scope: "default",
      key: markerKey,
      tool: "send_email",
      fingerprint: "f".repeat(64),
      token: "earlier-call",
      leaseMs: 60_000,
      ttlMs: 86_400_000,
      now: clock.now(),
    });
    await store.settle({
      ...held.record,
      status: "completed",
      result: '{"messageId":"m-0"}',
      error: null,
      ttlMs: 86_400_000,
      now: clock.now(),
    });
    const first = await send(summary, { key: "turn-1" });
    expect(first.recent_similar_call).toBeUndefined();
    expect(sent).toEqual([summary]);
    const kept = await store.get({ scope: "default", key: markerKey }, clock.now());
    expect(kept).toMatchObject({ tool: "send_email", token: "earlier-call", status: "completed" });
  });
});
