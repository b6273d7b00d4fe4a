import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { idempotent } from "../src/core/idempotent.js";
import { memoryStore } from "../src/core/memory-store.js";
import { ReplayedFailureError } from "../src/core/outcomes.js";
import { ResultUndecryptableError } from "../src/core/result-codec.js";
import type { IdempotencyStore } from "../src/core/store.js";
import { checkpoint } from "../src/ops/index.js";
import { reconcileOnce } from "../src/reconcile/index.js";
import { saga } from "../src/saga/index.js";
import { tamper } from "./fixtures/tamper.js";

const encryption = { keys: { k1: randomBytes(32) }, current: "k1" };
const sealed = /^idempotool:aes-256-gcm:v2:k1:/;

async function stored(store: IdempotencyStore, key: string) {
  const record = await store.get({ scope: "default", key }, Date.now());
  if (record === undefined) throw new Error(`no record for ${key}`);
  return record;
}

/** What a call settled with, thrown or returned. */
async function outcomeOf(call: Promise<unknown>): Promise<unknown> {
  try {
    return await call;
  } catch (error) {
    return error;
  }
}

describe("with encryption, a store writer cannot change what a repeat is told", () => {
  it("does not replay an unknown outcome's error as a definitive failure when the status is flipped to failed", async () => {
    const store = memoryStore();
    let runs = 0;
    const send = idempotent(
      async () => {
        runs++;
        throw new Error("the connection closed after the message was handed over");
      },
      { name: "send_sms", store, encryption },
    );
    await expect(send({}, { key: "sms-1" })).rejects.toMatchObject({ code: "outcome_unknown" });
    await tamper(store, "sms-1", { status: "failed" });
    const repeat = await outcomeOf(send({}, { key: "sms-1" }));
    expect(repeat).not.toBeInstanceOf(ReplayedFailureError);
    expect(repeat).toBeInstanceOf(ResultUndecryptableError);
    expect(repeat).toMatchObject({ reason: "authentication_failed" });
    expect(runs).toBe(1);
  });

  it("does not replay a failure for a completed record flipped to failed, with its error emptied or holding its note", async () => {
    const store = memoryStore();
    const charge = idempotent(async () => ({ id: "ch_1" }), { name: "charge", store, encryption });
    await charge({}, { key: "paid" });
    await tamper(store, "paid", { status: "failed", result: null, error: null });
    await expect(charge({}, { key: "paid" })).rejects.toMatchObject({
      name: "ResultUndecryptableError",
      reason: "not_sealed",
    });

    const exportAll = idempotent(async () => "x".repeat(100), {
      name: "export",
      store,
      encryption,
      maxResultBytes: 10,
    });
    await exportAll({}, { key: "big" });
    await tamper(store, "big", { status: "failed" });
    await expect(exportAll({}, { key: "big" })).rejects.toMatchObject({
      name: "ResultUndecryptableError",
      reason: "authentication_failed",
    });
  });

  it("seals an undefined result, and refuses a completed record whose result was emptied", async () => {
    const store = memoryStore();
    const notify = idempotent(async () => undefined, { name: "notify", store, encryption });
    await notify({}, { key: "n-1" });
    expect((await stored(store, "n-1")).result).toMatch(sealed);
    await expect(notify({}, { key: "n-1" })).resolves.toMatchObject({ was_replay: true, result: undefined });

    let runs = 0;
    const charge = idempotent(async () => ({ id: `ch_${++runs}` }), { name: "charge", store, encryption });
    await charge({}, { key: "paid" });
    await tamper(store, "paid", { result: null });
    await expect(charge({}, { key: "paid" })).rejects.toMatchObject({
      name: "ResultUndecryptableError",
      reason: "not_sealed",
    });
    expect(runs).toBe(1);
  });

  it("still replays undefined from a record written before encryption, while acceptPlaintext is set", async () => {
    const store = memoryStore();
    const fn = async () => undefined;
    await idempotent(fn, { name: "notify", store })({}, { key: "old" });
    expect((await stored(store, "old")).result).toBeNull();
    const strict = idempotent(fn, { name: "notify", store, encryption });
    await expect(strict({}, { key: "old" })).rejects.toMatchObject({ reason: "not_sealed" });
    const migrating = idempotent(fn, {
      name: "notify",
      store,
      encryption: { ...encryption, acceptPlaintext: true },
    });
    await expect(migrating({}, { key: "old" })).resolves.toMatchObject({
      was_replay: true,
      result: undefined,
    });
  });

  it("seals the note on a result that was not kept, and refuses a forged one", async () => {
    const store = memoryStore();
    let runs = 0;
    const exportAll = idempotent(async () => `${++runs}`.repeat(100), {
      name: "export",
      store,
      encryption,
      maxResultBytes: 10,
    });
    await expect(exportAll({}, { key: "big" })).resolves.toMatchObject({ was_replay: false });
    const record = await stored(store, "big");
    expect(record.result).toBeNull();
    expect(record.error).toMatch(sealed);
    await expect(exportAll({}, { key: "big" })).rejects.toMatchObject({ code: "result_too_large" });

    await tamper(store, "big", {
      error: JSON.stringify({ code: "result_unserializable", reason: "the attacker says so" }),
    });
    await expect(exportAll({}, { key: "big" })).rejects.toMatchObject({
      name: "ResultUndecryptableError",
      reason: "not_sealed",
    });
    expect(runs).toBe(1);
  });

  it("a checkpoint refuses an unknown outcome flipped to failed and a result emptied at rest", async () => {
    const store = memoryStore();
    const options = { tool: "send_sms", args: { to: "+1555" }, encryption };
    const lost = await checkpoint(store, { ...options, key: "lost" });
    await lost.unknown(new Error("timed out after the send"));
    await tamper(store, "lost", { status: "failed" });
    await expect(checkpoint(store, { ...options, key: "lost" })).rejects.toBeInstanceOf(
      ResultUndecryptableError,
    );

    const sent = await checkpoint(store, { ...options, key: "sent" });
    await sent.complete({ sid: "SM1" });
    await tamper(store, "sent", { result: null });
    await expect(checkpoint(store, { ...options, key: "sent" })).rejects.toMatchObject({
      name: "ResultUndecryptableError",
      reason: "not_sealed",
    });
  });

  it("a record the reconciler settles keeps its status sealed in: its failure replays, its unknown note cannot become one", async () => {
    const store = memoryStore();
    const send = idempotent(
      async () => {
        throw new Error("timed out after the send");
      },
      { name: "send_sms", store, encryption },
    );
    await expect(send({}, { key: "undecided" })).rejects.toMatchObject({ code: "outcome_unknown" });
    await expect(send({}, { key: "declined" })).rejects.toMatchObject({ code: "outcome_unknown" });
    await reconcileOnce({
      store,
      tools: {
        send_sms: {
          encryption,
          verify: (record) =>
            record.key === "declined"
              ? { status: "failed", error: new Error("the carrier refused it") }
              : { status: "unknown", reason: "no lookup yet" },
        },
      },
    });
    await expect(send({}, { key: "declined" })).rejects.toMatchObject({
      message: "the carrier refused it",
      was_replay: true,
    });
    expect((await stored(store, "undecided")).status).toBe("unknown");
    await tamper(store, "undecided", { status: "failed" });
    await expect(send({}, { key: "undecided" })).rejects.toMatchObject({
      name: "ResultUndecryptableError",
      reason: "authentication_failed",
    });
  });

  it("a saga compensates a step that could not be kept without it, and that note is sealed too", async () => {
    const store = memoryStore();
    const steps: unknown[] = [];
    const refund = saga({
      name: "refund",
      store,
      encryption,
      // A Map has no JSON form: the step is not kept, the call still completed.
      run: async () => ({ externalId: "re_1", lines: new Map([["a", 1]]) }),
      compensate: async (_record, { step }) => {
        steps.push(step);
      },
    });
    await refund({}, { key: "refund-1" });
    expect((await stored(store, "refund-1")).error).toMatch(sealed);
    await refund.compensate({ key: "refund-1" }, "duplicate");
    expect(steps).toEqual([undefined]);
  });
});
