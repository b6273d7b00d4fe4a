import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { isIdempotencyError } from "../core/errors.js";
import { idempotent } from "../core/idempotent.js";
import { memoryStore } from "../core/memory-store.js";
import { ReplayedFailureError } from "../core/outcomes.js";
import type { IdempotencyStore } from "../core/store.js";
import { envelopeResult } from "../mcp/tool-results.js";
import { fakeClock } from "../testing/fake-clock.js";
import { modelOutputOf } from "../tool-calls/model-output.js";
import { type ResolveOptions, readTrail, resolveRecord, reviewQueue, type TrailEntry } from "./index.js";
import { resolveRecordAsked } from "./resolve.js";
import { trailEntryOf, trailScope } from "./trail.js";

/** An irreversible tool whose first call throws after its effect may have happened: its outcome is unknown. */
function flakyMailer(
  store: IdempotencyStore,
  options: { encryption?: { keys: Record<string, Uint8Array>; current: string } } = {},
) {
  let runs = 0;
  const clock = fakeClock();
  const tool = idempotent(
    async (args: { to: string }) => {
      runs++;
      if (runs === 1) throw new Error("socket hang up");
      return { sent: args.to };
    },
    { name: "send_email", store, effect: "irreversible", clock, ...options },
  );
  return { tool, clock, store, runs: () => runs };
}

async function codeOf(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
    return "none";
  } catch (error) {
    return isIdempotencyError(error) ? error.code : String(error);
  }
}

function resolution(
  mailer: { store: IdempotencyStore; clock: ResolveOptions["clock"] },
  overrides: Partial<ResolveOptions>,
): ResolveOptions {
  return {
    store: mailer.store,
    clock: mailer.clock,
    scope: "default",
    key: "k1",
    as: "completed",
    result: { sent: "ada@example.com", messageId: "m-81" },
    evidence: "provider log: m-81 delivered",
    by: "ops",
    ...overrides,
  } as ResolveOptions;
}

/** A store on a clock of its own, as PostgreSQL's and Redis's are: every request's time is replaced by it. */
function serverClocked() {
  const server = fakeClock();
  const inner = memoryStore();
  const at = <R extends { now: number }>(request: R): R => ({ ...request, now: server.now() });
  const store: IdempotencyStore = {
    ...inner,
    claim: (request) => inner.claim(at(request)),
    takeover: (request) => inner.takeover(at(request)),
    settle: (request) => inner.settle(at(request)),
    renew: (request) => inner.renew(at(request)),
    get: (id) => inner.get(id, server.now()),
  };
  return { server, inner, store };
}

describe("an operator's resolution, as the tool's next caller sees it", () => {
  it("a repeat replays a result an operator recorded, and says who resolved it", async () => {
    const store = memoryStore();
    const mailer = flakyMailer(store);
    expect(await codeOf(mailer.tool({ to: "ada@example.com" }, { key: "k1" }))).toBe("outcome_unknown");
    expect(await codeOf(mailer.tool({ to: "ada@example.com" }, { key: "k1" }))).toBe("outcome_unknown");
    const [item] = (await reviewQueue({ store })).items;
    expect(item?.failure?.message).toBe("socket hang up");
    await resolveRecord(resolution(mailer, { expectVersion: item!.version }));
    const replay = await mailer.tool({ to: "ada@example.com" }, { key: "k1" });
    expect(replay.was_replay).toBe(true);
    expect(replay.result).toEqual({ sent: "ada@example.com", messageId: "m-81" });
    expect(replay.resolved_by_operator).toEqual({
      by: "ops",
      at: new Date(mailer.clock.now()).toISOString(),
      evidence: "provider log: m-81 delivered",
    });
    expect(mailer.runs()).toBe(1);
  });

  it("a repeat runs the tool once after an operator found it never ran", async () => {
    const store = memoryStore();
    const mailer = flakyMailer(store);
    await codeOf(mailer.tool({ to: "ada@example.com" }, { key: "k1" }));
    await resolveRecord(resolution(mailer, { as: "not_executed" }));
    const run = await mailer.tool({ to: "ada@example.com" }, { key: "k1" });
    expect([run.was_replay, run.resolved_by_operator, mailer.runs()]).toEqual([false, undefined, 2]);
  });

  it("a repeat gets back a failure an operator recorded, marked as theirs", async () => {
    const store = memoryStore();
    const mailer = flakyMailer(store);
    await codeOf(mailer.tool({ to: "ada@example.com" }, { key: "k1" }));
    await resolveRecord(
      resolution(mailer, { as: "failed", error: { message: "mailbox does not exist", code: "bounced" } }),
    );
    const error = await mailer.tool({ to: "ada@example.com" }, { key: "k1" }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ReplayedFailureError);
    expect((error as ReplayedFailureError).code).toBe("bounced");
    expect((error as ReplayedFailureError).resolved_by_operator?.by).toBe("ops");
    expect(mailer.runs()).toBe(1);
  });

  it("with encryption, the resolution is sealed for its record and replays; without the keys it is refused", async () => {
    const store = memoryStore();
    const encryption = { keys: { k1: randomBytes(32) }, current: "k1" };
    const mailer = flakyMailer(store, { encryption });
    await codeOf(mailer.tool({ to: "ada@example.com" }, { key: "k1" }));
    expect(await codeOf(resolveRecord(resolution(mailer, {})))).toBe("invalid_options");
    const queue = await reviewQueue({ store });
    expect([queue.items[0]?.sealed, queue.items[0]?.failure]).toEqual([true, undefined]);
    const opened = await reviewQueue({ store, tools: { send_email: { encryption } } });
    expect(opened.items[0]?.failure?.message).toBe("socket hang up");
    await resolveRecord(resolution(mailer, { tool: { encryption } }));
    const stored = await store.get({ scope: "default", key: "k1" }, mailer.clock.now());
    expect(stored?.result?.startsWith("idempotool:")).toBe(true);
    const replay = await mailer.tool({ to: "ada@example.com" }, { key: "k1" });
    expect([replay.result, replay.resolved_by_operator?.by]).toEqual([
      { sent: "ada@example.com", messageId: "m-81" },
      "ops",
    ]);
  });

  it("bad input is refused before anything is written", async () => {
    const store = memoryStore();
    const mailer = flakyMailer(store);
    await codeOf(mailer.tool({ to: "ada@example.com" }, { key: "k1" }));
    const before = await store.list({});
    for (const bad of [
      { evidence: "  " },
      { by: "" },
      { as: "sent" },
      { as: "failed", error: "" },
      { result: 10n },
      { tool: { maxResultBytes: 4 } },
    ] as Partial<ResolveOptions>[]) {
      const code = await codeOf(resolveRecord(resolution(mailer, bad)));
      expect(
        ["invalid_arguments", "invalid_options"],
        JSON.stringify(bad, (_, v) => String(v)),
      ).toContain(code);
    }
    const { result: _, ...noResult } = resolution(mailer, {});
    expect(await codeOf(resolveRecord(noResult as ResolveOptions))).toBe("invalid_arguments");
    expect(await store.list({})).toEqual(before);
  });

  it("frees or fails a record in progress only once its lease has been passed for minStaleMs", async () => {
    const store = memoryStore();
    const clock = fakeClock();
    const claim = { scope: "default", key: "k1", tool: "send_email", fingerprint: "f", leaseMs: 1_000 };
    await store.claim({ ...claim, token: "t1", ttlMs: 86_400_000, now: clock.now() });
    await clock.advance(61_000);
    const mailer = { store, clock };
    // Its worker may only be cut off or paused: freeing the key now could let it make the effect twice.
    expect(await codeOf(resolveRecord(resolution(mailer, { as: "not_executed" })))).toBe(
      "record_not_resolvable",
    );
    expect(await codeOf(resolveRecord(resolution(mailer, { as: "failed", error: "no" })))).toBe(
      "record_not_resolvable",
    );
    expect(await codeOf(resolveRecord(resolution(mailer, { as: "not_executed", minStaleMs: 0 })))).toBe(
      "none",
    );
    await store.claim({ ...claim, token: "t2", ttlMs: 86_400_000, now: clock.now() });
    await clock.advance(1_001 + 10 * 60_000);
    expect(await codeOf(resolveRecord(resolution(mailer, { as: "not_executed" })))).toBe("none");
    await store.claim({ ...claim, token: "t3", ttlMs: 86_400_000, now: clock.now() });
    await clock.advance(1_001);
    // The effect is there to see: recording it as completed needs no wait.
    expect(await codeOf(resolveRecord(resolution(mailer, {})))).toBe("none");
  });

  it("judges a lease, and how long it has been passed, by the store's clock, not the resolver's", async () => {
    const { server, inner, store } = serverClocked();
    const claim = { scope: "default", key: "k1", tool: "send_email", fingerprint: "f", leaseMs: 1_000 };
    const trailRecords = async () => (await inner.list({ scope: "idempotool:trail" })).records;
    await store.claim({ ...claim, token: "t1", ttlMs: 86_400_000, now: 0 });
    await server.advance(2_000);
    // Half an hour ahead of the store: by its own clock the lease passed 30 minutes ago.
    const ahead = fakeClock(server.now() + 30 * 60_000);
    expect(await codeOf(resolveRecord(resolution({ store, clock: ahead }, { as: "not_executed" })))).toBe(
      "record_not_resolvable",
    );
    expect(
      await codeOf(resolveRecord(resolution({ store, clock: ahead }, { as: "failed", error: "no" }))),
    ).toBe("record_not_resolvable");
    expect((await inner.get({ scope: "default", key: "k1" }, server.now()))?.token).toBe("t1");
    expect(await trailRecords(), "a refused resolution leaves nothing in the trail").toEqual([]);
    // Half an hour behind: by its own clock the lease is live, but the store's says it passed.
    const behind = fakeClock(server.now() - 30 * 60_000);
    expect(await codeOf(resolveRecord(resolution({ store, clock: behind }, {})))).toBe("none");

    await store.claim({ ...claim, key: "k3", token: "t3", ttlMs: 86_400_000, now: 0 });
    expect(
      await codeOf(resolveRecord(resolution({ store, clock: ahead }, { key: "k3" }))),
      "a lease live by the store's clock",
    ).toBe("record_not_resolvable");
    await server.advance(1_001 + 10 * 60_000);
    expect(
      await codeOf(resolveRecord(resolution({ store, clock: behind }, { key: "k3", as: "not_executed" }))),
    ).toBe("none");
    expect(await inner.get({ scope: "default", key: "k3" }, server.now())).toBeUndefined();
  });

  it("asks before it acts only when the resolution would go ahead by the store's clock; a no changes nothing", async () => {
    const { server, inner, store } = serverClocked();
    const claim = {
      scope: "default",
      tool: "send_email",
      fingerprint: "f",
      leaseMs: 1_000,
      ttlMs: 86_400_000,
    };
    await store.claim({ ...claim, key: "passed", token: "t1", now: 0 });
    await server.advance(2_000);
    await store.claim({ ...claim, key: "live", token: "t2", now: 0 });
    // Half an hour behind the store: by its own clock both leases are live.
    const mailer = { store, clock: fakeClock(server.now() - 30 * 60_000) };
    const free = (key: string) => resolution(mailer, { key, as: "not_executed", minStaleMs: 0 });
    const asked: string[] = [];
    const ask = (answer: boolean, key: string) => async () => {
      asked.push(key);
      if (!answer) throw new Error("not confirmed");
    };
    expect(await codeOf(resolveRecordAsked(free("live"), ask(true, "live")))).toBe("record_not_resolvable");
    await expect(resolveRecordAsked(free("passed"), ask(false, "passed"))).rejects.toThrow("not confirmed");
    expect((await inner.get({ scope: "default", key: "passed" }, server.now()))?.token).toBe("t1");
    expect((await inner.list({ scope: "idempotool:trail" })).records).toEqual([]);
    expect(await codeOf(resolveRecordAsked(free("passed"), ask(true, "passed")))).toBe("none");
    expect(await inner.get({ scope: "default", key: "passed" }, server.now())).toBeUndefined();
    expect(asked).toEqual(["passed", "passed"]);
  });

  it("refuses a plaintext outcome for a tool whose fingerprint is keyed, and the trail's own scope", async () => {
    const store = memoryStore();
    const clock = fakeClock();
    await store.claim({
      scope: "default",
      key: "k1",
      tool: "send_email",
      fingerprint: `hmac-sha256:k1:abcd:${"0".repeat(64)}`,
      token: "t1",
      leaseMs: 1_000,
      ttlMs: 86_400_000,
      now: clock.now(),
    });
    await clock.advance(2_000);
    const mailer = { store, clock };
    expect(await codeOf(resolveRecord(resolution(mailer, {})))).toBe("invalid_options");
    expect(await codeOf(resolveRecord(resolution(mailer, { scope: "idempotool:trail" })))).toBe(
      "invalid_arguments",
    );
  });

  it("tells its listener what it resolved; a listener that throws changes nothing", async () => {
    const store = memoryStore();
    const mailer = flakyMailer(store);
    await codeOf(mailer.tool({ to: "ada@example.com" }, { key: "k1" }));
    const heard: TrailEntry[] = [];
    const entry = await resolveRecord(
      resolution(mailer, {
        via: "cli",
        onResolution: (e) => {
          heard.push(e);
          throw new Error("listener broke");
        },
      }),
    );
    expect(heard).toEqual([entry]);
    expect(await readTrail({ store, scope: "default", key: "k1" })).toEqual([entry]);
    expect(entry).toMatchObject({
      via: "cli",
      tool: "send_email",
      before: { status: "unknown", attempts: 1 },
    });
  });

  it("a trail record whose entry names no known resolution is not read as an entry", async () => {
    const store = memoryStore();
    const mailer = flakyMailer(store);
    await codeOf(mailer.tool({ to: "ada@example.com" }, { key: "k1" }));
    const entry = await resolveRecord(resolution(mailer, {}));
    const { records } = await store.list({ scope: trailScope, limit: 10 });
    expect(records).toHaveLength(1);
    const record = records[0]!;
    expect(trailEntryOf(record)).toEqual(entry);
    const odd = { ...record, result: JSON.stringify({ ...JSON.parse(record.result!), as: "erased" }) };
    expect(trailEntryOf(odd)).toBeUndefined();
  });

  it("a store failure after the intent leaves the entry as interrupted, and the record untouched", async () => {
    const store = memoryStore();
    const mailer = flakyMailer(store);
    await codeOf(mailer.tool({ to: "ada@example.com" }, { key: "k1" }));
    const failing: IdempotencyStore = {
      ...store,
      claim: (request) => store.claim(request),
      settle: (request) => store.settle(request),
      get: (id, now) => store.get(id, now),
      list: (query) => store.list(query),
      release: (request) => store.release(request),
      renew: (request) => store.renew(request),
      delete: (id) => store.delete(id),
      purge: (request) => store.purge(request),
      takeover: () => Promise.reject(new Error("connection reset")),
    };
    expect(await codeOf(resolveRecord(resolution({ ...mailer, store: failing }, {})))).toBe(
      "store_unavailable",
    );
    const trail = await readTrail({ store, scope: "default", key: "k1" });
    expect(trail.map((e) => e.state)).toEqual(["interrupted"]);
    expect((await store.get({ scope: "default", key: "k1" }, mailer.clock.now()))?.status).toBe("unknown");
  });
});

describe("what a model reads of a resolved replay", () => {
  it("the note says a person recorded the outcome, in every output mode and over MCP", async () => {
    const store = memoryStore();
    const mailer = flakyMailer(store);
    await codeOf(mailer.tool({ to: "ada@example.com" }, { key: "k1" }));
    await resolveRecord(resolution(mailer, {}));
    const replay = await mailer.tool({ to: "ada@example.com" }, { key: "k1" });
    const envelopeOut = modelOutputOf(replay, "envelope", "send_email");
    expect(envelopeOut.note).toContain("an operator recorded it by hand at");
    // Who and the evidence are in the field, not in the sentence the model reads.
    expect(envelopeOut.note).not.toMatch(/ops|provider log/);
    const merged = modelOutputOf(replay, "merge", "send_email");
    expect(merged.resolved_by_operator).toEqual(replay.resolved_by_operator);
    const mcp = envelopeResult({ ...replay, result: { content: [{ type: "text", text: "sent m-81" }] } });
    const text = (mcp.content ?? []).map((c) => ("text" in c ? c.text : "")).join("\n");
    expect(text).toContain("an operator recorded it by hand");
    expect(
      (mcp._meta as Record<string, { resolved_by_operator?: unknown }>)["idempotool/envelope"]
        ?.resolved_by_operator,
    ).toEqual(replay.resolved_by_operator);
  });

  it("a replay the tool itself recorded says nothing of an operator", async () => {
    const store = memoryStore();
    const tool = idempotent(async () => ({ ok: true }), { name: "noop", store });
    await tool({}, { key: "k" });
    const replay = await tool({}, { key: "k" });
    expect("resolved_by_operator" in replay).toBe(false);
    expect(modelOutputOf(replay, "envelope", "noop").note).not.toContain("by hand");
  });
});

describe("what the queue shows of a call whose outcome is unknown", () => {
  const charge = { amount: 1200, card: { number: "4242424242424242", holder: "Ada" } };

  function charger(store: IdempotencyStore, options: Record<string, unknown> = {}) {
    return idempotent(
      async (_args: typeof charge | { note: string }) => {
        throw new Error("gateway timeout");
      },
      { name: "charge_card", store, effect: "irreversible", ...options },
    );
  }

  it("a preview of the arguments, redacted, only when the tool keeps one", async () => {
    const store = memoryStore();
    await codeOf(charger(store, { reviewPreview: true, redact: ["card.number"] })(charge, { key: "kept" }));
    await codeOf(charger(store)(charge, { key: "not-kept" }));
    const items = Object.fromEntries((await reviewQueue({ store })).items.map((item) => [item.key, item]));
    expect(JSON.parse(items.kept?.preview ?? "null")).toEqual({
      amount: 1200,
      card: { number: "[redacted]", holder: "Ada" },
    });
    expect(items["not-kept"]?.preview).toBeUndefined();
    // Without a preview or a verify answer, the failure is stored as the tool threw it, with no note.
    const plain = await store.get({ scope: "default", key: "not-kept" }, Date.now());
    expect(JSON.parse(plain?.error ?? "null")).toStrictEqual({ name: "Error", message: "gateway timeout" });
    expect(items.kept?.failure?.message).toBe("gateway timeout");
  });

  it("a long preview is cut at 1,000 characters, and a sealed one opens only with the tool's keys", async () => {
    const store = memoryStore();
    const encryption = { keys: { k1: randomBytes(32) }, current: "k1" };
    await codeOf(
      charger(store, { reviewPreview: true, encryption })({ note: "x".repeat(5000) }, { key: "long" }),
    );
    expect((await reviewQueue({ store })).items[0]).toMatchObject({ sealed: true });
    expect((await reviewQueue({ store })).items[0]?.preview).toBeUndefined();
    const [item] = (await reviewQueue({ store, tools: { charge_card: { encryption } } })).items;
    expect(item?.preview).toHaveLength(1000);
    expect(item?.preview?.endsWith("…")).toBe(true);
  });

  it("the verify hook's answer when a repeat asked it, and the first attempt's failure with it", async () => {
    const store = memoryStore();
    await codeOf(charger(store, { reviewPreview: true })(charge, { key: "k" }));
    const clock = fakeClock(Date.now() + 120_000);
    const verify = () => ({ status: "unknown" as const, reason: "the gateway has no record yet" });
    const repeat = charger(store, { reviewPreview: true, verify, clock });
    expect(await codeOf(repeat(charge, { key: "k" }))).toBe("outcome_unknown");
    const [item] = (await reviewQueue({ store, clock })).items;
    expect(item?.verify).toEqual({
      status: "unknown",
      reason: "the gateway has no record yet",
      at: new Date(clock.now()).toISOString(),
    });
    expect(item?.failure?.message).toBe("gateway timeout");
    expect(JSON.parse(item?.preview ?? "null")).toMatchObject({ amount: 1200 });
  });

  it("leaves the preview out rather than store a failure over the store's limit", async () => {
    const inner = memoryStore();
    const store: IdempotencyStore = Object.assign(Object.create(inner) as IdempotencyStore, {
      maxStoredResultBytes: 400,
    });
    await codeOf(charger(store, { reviewPreview: true })({ note: "y".repeat(600) }, { key: "big" }));
    await codeOf(charger(store, { reviewPreview: true })({ note: "small" }, { key: "small" }));
    const items = Object.fromEntries((await reviewQueue({ store })).items.map((item) => [item.key, item]));
    expect(items.big?.preview).toBeUndefined();
    expect(items.big?.failure?.message).toBe("gateway timeout");
    expect(items.small?.preview).toBe('{"note":"small"}');
  });

  it("a verify hook that threw, as an error with its message; one that answered oddly, without a reason", async () => {
    const store = memoryStore();
    await codeOf(charger(store)(charge, { key: "threw" }));
    await codeOf(charger(store)(charge, { key: "odd" }));
    const clock = fakeClock(Date.now() + 120_000);
    const throwing = () => {
      throw new Error("gateway unreachable");
    };
    await codeOf(charger(store, { verify: throwing, clock })(charge, { key: "threw" }));
    const odd = () => ({ status: "maybe" }) as unknown as { status: "unknown" };
    await codeOf(charger(store, { verify: odd, clock })(charge, { key: "odd" }));
    await codeOf(charger(store)(charge, { key: "none" }));
    const nothing = () => undefined as unknown as { status: "unknown" };
    await codeOf(charger(store, { verify: nothing, clock })(charge, { key: "none" }));
    const items = Object.fromEntries(
      (await reviewQueue({ store, clock })).items.map((item) => [item.key, item]),
    );
    const at = new Date(clock.now()).toISOString();
    expect(items.threw?.verify).toStrictEqual({ status: "error", reason: "gateway unreachable", at });
    expect(items.odd?.verify).toStrictEqual({ status: "maybe", at });
    expect(items.none?.verify).toStrictEqual({ status: "unrecognised", at });
    expect(items.threw?.preview).toBeUndefined();
  });

  it("refuses a reviewPreview that is not true or false", () => {
    expect(() => charger(memoryStore(), { reviewPreview: "yes" })).toThrow(/reviewPreview/);
  });
});
