/**
 * The record protocol under the repeats that broke it before: a key reused by another tool, a call that
 * outlives its window and then dies, and replies the store applied but the caller never heard.
 */
import { describe, expect, it } from "vitest";
import { fakeClock } from "../testing/fake-clock.js";
import { KeyConflictError, OutcomeUnknownError, StoreUnavailableError } from "./errors.js";
import type { IdempotencyEvent } from "./events.js";
import { fingerprint } from "./fingerprint.js";
import { idempotent } from "./idempotent.js";
import { memoryStore } from "./memory-store.js";
import { definitiveFailure } from "./outcomes.js";
import type { IdempotencyStore } from "./store.js";

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected the call to fail");
}

/** Two tools on one store, counting what each actually did. */
function emailAndSms(store: IdempotencyStore = memoryStore()) {
  const clock = fakeClock();
  const done: string[] = [];
  const args = { to: "+15550100", body: "Your code is 4711" };
  const sendEmail = idempotent(
    async (a: typeof args) => {
      done.push(`email:${a.to}`);
      return { channel: "email" };
    },
    { name: "send_email", store, clock, waitMs: 10_000 },
  );
  const sendSms = idempotent(
    async (a: typeof args) => {
      done.push(`sms:${a.to}`);
      return { channel: "sms" };
    },
    { name: "send_sms", store, clock, waitMs: 10_000 },
  );
  return { sendEmail, sendSms, done, args, clock, store };
}

describe("a key belongs to one tool", () => {
  it("refuses the same key under another tool with a conflict that names both tools, and never runs it", async () => {
    const { sendEmail, sendSms, done, args } = emailAndSms();
    await sendEmail(args, { key: "turn-7" });
    const error = await rejection(sendSms(args, { key: "turn-7" }));
    expect(error).toBeInstanceOf(KeyConflictError);
    const conflict = error as KeyConflictError;
    expect(conflict.code).toBe("idempotency_key_conflict");
    expect(conflict.httpStatus).toBe(422);
    expect(conflict.originalTool).toBe("send_email");
    expect(conflict.tool).toBe("send_sms");
    expect(conflict.message).toMatch(/send_email/);
    expect(conflict.message).toMatch(/send_sms/);
    expect(conflict.message).toMatch(/new key/);
    expect(done).toEqual(["email:+15550100"]);
  });

  it("does not wait on another tool's call in flight, nor replay its failure or its unknown outcome", async () => {
    const { sendSms, done, args, store, clock } = emailAndSms();
    let release!: () => void;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const slowEmail = idempotent(
      async () => {
        await held;
        return { channel: "email" };
      },
      { name: "send_email", store, clock },
    );
    const running = slowEmail(args, { key: "in-flight" });
    await Promise.resolve();
    expect(await rejection(sendSms(args, { key: "in-flight" }))).toBeInstanceOf(KeyConflictError);
    release();
    await running;

    const failing = idempotent(
      async () => {
        throw definitiveFailure(new Error("bounced"));
      },
      { name: "send_email", store, clock },
    );
    await rejection(failing(args, { key: "failed" }));
    expect(await rejection(sendSms(args, { key: "failed" }))).toBeInstanceOf(KeyConflictError);

    const crashing = idempotent(
      async () => {
        throw new Error("socket closed mid-send");
      },
      { name: "send_email", store, clock },
    );
    expect(await rejection(crashing(args, { key: "unknown" }))).toBeInstanceOf(OutcomeUnknownError);
    expect(await rejection(sendSms(args, { key: "unknown" }))).toBeInstanceOf(KeyConflictError);
    expect(done).toEqual([]);
  });

  it("still gives each tool its own key in another scope", async () => {
    const { sendEmail, sendSms, done, args } = emailAndSms();
    await sendEmail(args, { key: "turn-7", scope: "user-1" });
    const sms = await sendSms(args, { key: "turn-7", scope: "user-2" });
    expect(sms.was_replay).toBe(false);
    expect(done).toEqual(["email:+15550100", "sms:+15550100"]);
  });
});

describe("an outcome nobody knows stays unknown for the whole window", () => {
  it("fails closed for ttlMs after the lease of a long call that died, instead of running it again", async () => {
    const clock = fakeClock();
    const inner = memoryStore();
    let alive = true;
    // The worker's process dies after the effect: its renewals stop reaching the store.
    const store: IdempotencyStore = {
      ...inner,
      renew: (request) => (alive ? inner.renew(request) : Promise.reject(new Error("process gone"))),
    };
    const sent: string[] = [];
    const options = { name: "send_sms", store, clock, ttlMs: 2_000, leaseMs: 1_000, waitMs: 0 } as const;
    const send = idempotent(async (args: { to: string }) => {
      sent.push(args.to);
      await new Promise<never>(() => {});
    }, options);
    void send({ to: "bob" }, { key: "k" });
    await clock.advance(2_500);
    expect(sent).toEqual(["bob"]);
    alive = false;
    const leaseEnd = (await inner.get({ scope: "default", key: "k" }, clock.now()))!.leaseExpiresAt;

    const repeat = idempotent(async (args: { to: string }) => {
      sent.push(args.to);
    }, options);
    // Through the rest of its lease and a whole window after, a repeat is told nobody knows.
    for (const at of [leaseEnd + 1, leaseEnd + 1_999]) {
      await clock.advance(at - clock.now());
      expect(await rejection(repeat({ to: "bob" }, { key: "k" }))).toBeInstanceOf(OutcomeUnknownError);
    }
    expect(sent).toEqual(["bob"]);
  });
});

/** A store whose replies to chosen operations are lost after the store applied them. */
function lossyStore(inner: IdempotencyStore) {
  const lose = { claim: 0, settle: 0, release: 0, resendClaim: 0, resendSettle: 0, resendTakeover: 0 };
  const store: IdempotencyStore = {
    ...inner,
    async claim(request) {
      const answer = await inner.claim(request);
      if (lose.resendClaim > 0) {
        lose.resendClaim--;
        return inner.claim(request);
      }
      if (lose.claim > 0) {
        lose.claim--;
        throw new Error("connection reset after the claim was written");
      }
      return answer;
    },
    async settle(request) {
      const answer = await inner.settle(request);
      if (lose.resendSettle > 0) {
        lose.resendSettle--;
        return inner.settle(request);
      }
      if (lose.settle > 0) {
        lose.settle--;
        throw new Error("connection reset after the settle was written");
      }
      return answer;
    },
    async takeover(request) {
      const answer = await inner.takeover(request);
      if (lose.resendTakeover > 0) {
        lose.resendTakeover--;
        return inner.takeover(request);
      }
      return answer;
    },
    async release(request) {
      if (lose.release > 0) {
        lose.release--;
        throw new Error("store unreachable");
      }
      return inner.release(request);
    },
  };
  return { store, lose };
}

describe("lost replies never block a key and never mislead the caller", () => {
  function counted(
    store: IdempotencyStore,
    clock = fakeClock(),
    effect: "irreversible" | "native-key" = "irreversible",
  ) {
    const sent: string[] = [];
    const events: IdempotencyEvent[] = [];
    const send = idempotent(
      async (args: { to: string }) => {
        sent.push(args.to);
        return { id: `m-${sent.length}` };
      },
      { name: "send_email", store, clock, effect, waitMs: 0, onEvent: (e) => events.push(e) },
    );
    return { send, sent, events, clock };
  }

  it("a claim whose reply was lost is released, so a retry runs the tool once", async () => {
    const inner = memoryStore();
    const { store, lose } = lossyStore(inner);
    const { send, sent, clock } = counted(store);
    lose.claim = 1;
    expect(await rejection(send({ to: "alice" }, { key: "k" }))).toBeInstanceOf(StoreUnavailableError);
    expect(sent).toEqual([]);
    expect(await inner.get({ scope: "default", key: "k" }, clock.now())).toBeUndefined();
    const retry = await send({ to: "alice" }, { key: "k" });
    expect(retry.was_replay).toBe(false);
    expect(sent).toEqual(["alice"]);
  });

  it("keeps trying to release a claim it may have made until the store answers", async () => {
    const inner = memoryStore();
    const { store, lose } = lossyStore(inner);
    const clock = fakeClock();
    const { send, sent, events } = counted(store, clock);
    lose.claim = 1;
    lose.release = 3;
    expect(await rejection(send({ to: "alice" }, { key: "k" }))).toBeInstanceOf(StoreUnavailableError);
    expect((await inner.get({ scope: "default", key: "k" }, clock.now()))?.status).toBe("in_progress");
    await clock.advance(10_000);
    expect(await inner.get({ scope: "default", key: "k" }, clock.now())).toBeUndefined();
    expect(events.filter((e) => e.type === "released")).toHaveLength(1);
    expect((await send({ to: "alice" }, { key: "k" })).was_replay).toBe(false);
    expect(sent).toEqual(["alice"]);
  });

  it("retries the release on the system clock without keeping a finished process alive", async () => {
    const { store, lose } = lossyStore(memoryStore());
    lose.claim = 1;
    lose.release = 1;
    let released!: () => void;
    const retried = new Promise<void>((resolve) => {
      released = resolve;
    });
    const send = idempotent(async () => ({ id: "m-1" }), {
      name: "send_email",
      store,
      onEvent: (event) => {
        if (event.type === "released") released();
      },
    });
    const timeouts = () => process.getActiveResourcesInfo().filter((kind) => kind === "Timeout").length;
    const idle = timeouts();
    expect(await rejection(send({}, { key: "k" }))).toBeInstanceOf(StoreUnavailableError);
    expect(timeouts()).toBe(idle);
    await retried;
  });

  it("a claim the client resent finds its own record and runs the tool once, without waiting on itself", async () => {
    const { store, lose } = lossyStore(memoryStore());
    const { send, sent } = counted(store);
    lose.resendClaim = 1;
    const first = await send({ to: "alice" }, { key: "k" });
    expect(first.was_replay).toBe(false);
    expect(sent).toEqual(["alice"]);
    expect((await send({ to: "alice" }, { key: "k" })).was_replay).toBe(true);
    expect(sent).toEqual(["alice"]);
  });

  it("a settle the client resent reports the recorded outcome, not a lost lease", async () => {
    const { store, lose } = lossyStore(memoryStore());
    const { send, sent, events } = counted(store);
    lose.resendSettle = 1;
    const first = await send({ to: "alice" }, { key: "k" });
    expect(first).toMatchObject({ result: { id: "m-1" }, was_replay: false });
    expect(events.map((e) => e.type)).not.toContain("lease_lost");
    expect((await send({ to: "alice" }, { key: "k" })).result).toEqual({ id: "m-1" });
    expect(sent).toEqual(["alice"]);
  });

  it("a settle whose reply was lost once is found recorded on the retry", async () => {
    const { store, lose } = lossyStore(memoryStore());
    const { send } = counted(store);
    lose.settle = 1;
    expect((await send({ to: "alice" }, { key: "k" })).result).toEqual({ id: "m-1" });
  });

  it("a takeover the client resent is recognised as this caller's, and the tool runs once", async () => {
    const inner = memoryStore();
    const { store, lose } = lossyStore(inner);
    const clock = fakeClock();
    await inner.claim({
      scope: "default",
      key: "k",
      tool: "send_email",
      fingerprint: fingerprint({ to: "alice" }, { bigint: "reject" }),
      token: "crashed-worker",
      leaseMs: 1_000,
      ttlMs: 60_000,
      now: clock.now(),
    });
    const { send, sent } = counted(store, clock, "native-key");
    await clock.advance(1_000);
    lose.resendTakeover = 1;
    const taken = await send({ to: "alice" }, { key: "k" });
    expect(taken.was_replay).toBe(false);
    expect(sent).toEqual(["alice"]);
    const record = await inner.get({ scope: "default", key: "k" }, clock.now());
    expect(record).toMatchObject({ status: "completed", attempts: 2 });
  });
});

describe("verify answers after the record was taken from it", () => {
  it("does not run on a not_executed verdict once another caller holds the record: lease_lost, no second effect", async () => {
    const store = memoryStore();
    const clock = fakeClock();
    let sent = 0;
    const send = async () => {
      sent += 1;
      if (sent === 1) throw new Error("gateway timeout");
      return { sent };
    };
    await rejection(idempotent(send, { name: "send_sms", store, clock })({}, { key: "k" }));
    expect(sent).toBe(1);

    // The hook answers late: meanwhile another caller took the record over (its lease passed, say).
    const retry = idempotent(send, {
      name: "send_sms",
      store,
      clock,
      verify: async (record) => {
        const taken = await store.takeover({
          scope: record.scope,
          key: record.key,
          fromToken: record.token,
          token: "another-caller",
          leaseMs: 60_000,
          ttlMs: 60_000,
          now: record.leaseExpiresAt,
        });
        expect(taken).not.toBeNull();
        return { status: "not_executed" };
      },
    });
    const error = await rejection(retry({}, { key: "k" }));
    expect(error).toMatchObject({ code: "lease_lost" });
    expect(sent).toBe(1);
    expect((await store.get({ scope: "default", key: "k" }, clock.now()))?.token).toBe("another-caller");
  });
});
