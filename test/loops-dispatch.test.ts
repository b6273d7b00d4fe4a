/**
 * The provider-neutral dispatcher: single flight per intent, order, failures as outcomes, configuration errors.
 */
import { describe, expect, it } from "vitest";
import {
  definitiveFailure,
  type Effect,
  fingerprint,
  isIdempotencyError,
  memoryStore,
  notExecuted,
} from "../src/index.js";
import {
  dispatchToolCalls,
  intentKey,
  loopTool,
  type ToolCallOutcome,
  type ToolCallRequest,
} from "../src/loops/index.js";
import { fakeClock } from "../src/testing/fake-clock.js";

interface Email {
  to: string;
  subject: string;
}

function emailTool(options: { output?: "envelope" | "merge"; fail?: () => Error } = {}) {
  const sent: Email[] = [];
  const store = memoryStore();
  const sendEmail = loopTool(
    async (args: Email) => {
      sent.push(args);
      await new Promise((resolve) => setTimeout(resolve, 5));
      if (options.fail) throw options.fail();
      return { messageId: `m-${sent.length}` };
    },
    {
      name: "send_email",
      store,
      effect: "native-key",
      ...(options.output ? { output: options.output } : {}),
    },
  );
  return { sent, sendEmail, store };
}

const alice: Email = { to: "alice@example.com", subject: "Hi" };
const bob: Email = { to: "bob@example.com", subject: "Hi" };

function call(id: string, input: unknown, name = "send_email"): ToolCallRequest {
  return { id, name, input };
}

describe("dispatchToolCalls", () => {
  it("runs each intent once, keeps the model's order, and replays duplicates with their own call ids", async () => {
    const { sent, sendEmail } = emailTool();
    const outcomes = await dispatchToolCalls(
      [call("1", alice), call("2", bob), call("3", alice), call("4", bob)],
      [sendEmail],
      { turnId: "t1" },
    );
    expect(sent).toHaveLength(2);
    expect(outcomes.map((outcome) => outcome.callId)).toEqual(["1", "2", "3", "4"]);
    expect(outcomes.map((outcome) => outcome.ok && outcome.envelope.was_replay)).toEqual([
      false,
      false,
      true,
      true,
    ]);
    expect(outcomes[2]!.key).toBe(outcomes[0]!.key);
    expect(outcomes[0]!.key).toBe(intentKey("t1", "send_email", alice));
  });

  it("runs different intents of one response concurrently", async () => {
    let running = 0;
    let most = 0;
    const slow = loopTool(
      async (args: Email) => {
        running++;
        most = Math.max(most, running);
        await new Promise((resolve) => setTimeout(resolve, 20));
        running--;
        return args.to;
      },
      { name: "send_email", store: memoryStore() },
    );
    await dispatchToolCalls([call("1", alice), call("2", bob)], [slow], { turnId: "t1" });
    expect(most).toBe(2);
  });

  it("gives the duplicates of a failed call the same failure, without running them", async () => {
    const { sent, sendEmail } = emailTool({ fail: () => new Error("SMTP refused") });
    const outcomes = await dispatchToolCalls([call("1", alice), call("2", alice)], [sendEmail], {
      turnId: "t1",
    });
    expect(sent).toHaveLength(1);
    for (const outcome of outcomes) {
      expect(outcome.ok).toBe(false);
      if (outcome.ok) continue;
      expect(outcome.error.code).toBe("tool_error");
      expect(outcome.error.message).toBe(
        "send_email failed: SMTP refused. Retrying the identical call is safe: the service it calls dedupes " +
          "on its idempotency key.",
      );
    }
    expect(outcomes.map((outcome) => outcome.callId)).toEqual(["1", "2"]);
  });

  it("lets a call whose arguments were rejected run later, once they are fixed", async () => {
    const sent: Email[] = [];
    const strict = loopTool(
      async (args: Email) => {
        sent.push(args);
        return { ok: true };
      },
      {
        name: "send_email",
        store: memoryStore(),
        parse: (input) => {
          const email = input as Partial<Email>;
          if (!email.to?.includes("@")) throw new TypeError(`not an address: ${String(email.to)}`);
          return email as Email;
        },
      },
    );
    const [rejected] = await dispatchToolCalls([call("1", { to: "alice", subject: "Hi" })], [strict], {
      turnId: "t1",
    });
    expect(rejected).toMatchObject({ ok: false, error: { code: "invalid_arguments" } });
    expect(rejected!.ok || rejected!.error.message).toMatch(
      /\(not an address: alice\)\. Fix them and call it again/,
    );
    const [fixed] = await dispatchToolCalls([call("2", alice)], [strict], { turnId: "t1" });
    expect(fixed?.ok).toBe(true);
    expect(sent).toHaveLength(1);
  });

  it("releases the key when the tool says it did not run, so the next round may try again", async () => {
    let attempts = 0;
    const flaky = loopTool(
      async () => {
        attempts++;
        if (attempts === 1) throw notExecuted(new Error("rate limited before sending"));
        return { sent: true };
      },
      { name: "send_email", store: memoryStore() },
    );
    const [first] = await dispatchToolCalls([call("1", alice)], [flaky], { turnId: "t1" });
    const [second] = await dispatchToolCalls([call("2", alice)], [flaky], { turnId: "t1" });
    expect(first?.ok).toBe(false);
    expect(second).toMatchObject({ ok: true, output: { was_replay: false, result: { sent: true } } });
  });

  it("merges the marker into object results with output: merge", async () => {
    const { sendEmail } = emailTool({ output: "merge" });
    const outcomes = await dispatchToolCalls([call("1", alice), call("2", alice)], [sendEmail], {
      turnId: "t1",
    });
    expect(outcomes.map((outcome) => outcome.ok && outcome.output)).toEqual([
      { messageId: "m-1", was_replay: false, original_called_at: expect.any(String) },
      {
        messageId: "m-1",
        was_replay: true,
        original_called_at: expect.any(String),
        note: expect.stringContaining("did not run again"),
      },
    ]);
  });

  it("passes the near-duplicate hint of a new turn to the model, in both output modes", async () => {
    for (const output of ["envelope", "merge"] as const) {
      const sent: Email[] = [];
      const sendEmail = loopTool(
        async (args: Email) => {
          sent.push(args);
          return { messageId: `m-${sent.length}` };
        },
        { name: "send_email", store: memoryStore(), output, similar: { fields: ["to"] } },
      );
      const [first] = await dispatchToolCalls([call("1", alice)], [sendEmail], { turnId: "t1" });
      const [second] = await dispatchToolCalls([call("2", { ...alice, subject: "Hi again" })], [sendEmail], {
        turnId: "t2",
      });
      expect(sent).toHaveLength(2);
      expect(first?.ok && second?.ok).toBe(true);
      if (!first?.ok || !second?.ok) continue;
      expect(second.output).toMatchObject({
        was_replay: false,
        recent_similar_call: { idempotency_key: first.key },
        note: expect.stringContaining("a similar send_email call already completed"),
      });
    }
  });

  it("reports each outcome in order through onOutcome", async () => {
    const { sendEmail } = emailTool();
    const seen: ToolCallOutcome[] = [];
    const outcomes = await dispatchToolCalls([call("1", alice), call("2", {}, "nope")], [sendEmail], {
      turnId: "t1",
      onOutcome: (outcome) => seen.push(outcome),
    });
    expect(seen).toEqual(outcomes);
  });

  it("keeps scopes apart", async () => {
    const { sent, sendEmail } = emailTool();
    await dispatchToolCalls([call("1", alice)], [sendEmail], { turnId: "t1", scope: "user-a" });
    await dispatchToolCalls([call("1", alice)], [sendEmail], { turnId: "t1", scope: "user-b" });
    expect(sent).toHaveLength(2);
  });

  it("rejects a missing turn id, tools with one name, and a bad scope, before running anything", async () => {
    const { sent, sendEmail } = emailTool();
    const missing = await dispatchToolCalls([call("1", alice)], [sendEmail], { turnId: "" }).catch((e) => e);
    expect(isIdempotencyError(missing, "idempotency_key_missing")).toBe(true);
    await expect(
      dispatchToolCalls([call("1", alice)], [sendEmail, sendEmail], { turnId: "t1" }),
    ).rejects.toThrow(/Two tools are named "send_email"/);
    await expect(
      dispatchToolCalls([call("1", alice)], [sendEmail], { turnId: "t1", scope: "" }),
    ).rejects.toThrow(/scope/);
    expect(sent).toHaveLength(0);
  });

  it("tells the model when its arguments have none of the intent fields, and runs nothing", async () => {
    const sent: Email[] = [];
    // A misspelt list, as JavaScript lets one through: every call would otherwise share one key per turn.
    const sendEmail = loopTool(async (args: Email) => sent.push(args), {
      name: "send_email",
      store: memoryStore(),
      intentFields: ["too" as "to"],
    });
    const [alicesCall, bobsCall] = await dispatchToolCalls([call("1", alice), call("2", bob)], [sendEmail], {
      turnId: "t1",
    });
    for (const outcome of [alicesCall, bobsCall]) {
      expect(outcome?.ok).toBe(false);
      if (outcome?.ok !== false) continue;
      expect(outcome.error.code).toBe("invalid_arguments");
      expect(outcome.error.message).toMatch(/none of the fields `intentFields` names \(too\)/);
    }
    expect(sent).toEqual([]);
  });

  it("rejects bad options when the tool is made", () => {
    const store = memoryStore();
    const run = async () => 1;
    expect(() => loopTool(run, { name: "x", store, intentFields: [""] })).toThrow(/intentFields/);
    expect(() => loopTool(run, { name: "x", store, intentFields: [] })).toThrow(
      /`intentFields` must name at least one top-level argument/,
    );
    expect(() => loopTool(run, { name: "x", store, output: "raw" as "merge" })).toThrow(/output/);
    expect(() => loopTool(run, { name: "", store })).toThrow(/name/);
  });

  it("rejects when the caller aborts, instead of answering the model", async () => {
    const controller = new AbortController();
    let started!: () => void;
    const running = new Promise<void>((resolve) => {
      started = resolve;
    });
    const stuck = loopTool(
      (_args: Email, context) =>
        new Promise((_resolve, reject) => {
          context.signal.addEventListener("abort", () => reject(context.signal.reason));
          started();
        }),
      { name: "send_email", store: memoryStore(), effect: "native-key" },
    );
    const dispatching = dispatchToolCalls([call("1", alice)], [stuck], {
      turnId: "t1",
      signal: controller.signal,
    });
    await running;
    controller.abort(new Error("user closed the tab"));
    await expect(dispatching).rejects.toThrow(/user closed the tab/);
  });

  it("calls one tool directly with LoopTool.call", async () => {
    const { sent, sendEmail } = emailTool();
    const first = await sendEmail.call(
      { id: "a", name: "send_email", argumentsJson: JSON.stringify(alice) },
      { turnId: "t1" },
    );
    const again = await sendEmail.call({ id: "b", name: "send_email", input: alice }, { turnId: "t1" });
    expect(sent).toHaveLength(1);
    expect(first.ok && again.ok && again.envelope.was_replay).toBe(true);
  });
});

describe("what the model reads when a tool throws, by effect class", () => {
  /** A send_email tool of `effect` that throws `thrown()` on its first run, then succeeds. */
  function failingOnce(effect: Effect, thrown: () => unknown) {
    let runs = 0;
    const sendEmail = loopTool(
      async () => {
        runs++;
        if (runs === 1) throw thrown();
        return { messageId: `m-${runs}` };
      },
      { name: "send_email", store: memoryStore(), effect },
    );
    return { sendEmail, runs: () => runs };
  }

  const cases: {
    effect: Effect;
    what: string;
    thrown: () => unknown;
    code: string;
    message: string;
    /** Whether the identical call, made again in the same turn, runs the tool again. */
    retryRuns: boolean;
  }[] = [
    {
      effect: "native-key",
      what: "a plain throw",
      thrown: () => new Error("gateway timeout"),
      code: "tool_error",
      message:
        "send_email failed: gateway timeout. Retrying the identical call is safe: the service it calls " +
        "dedupes on its idempotency key.",
      retryRuns: true,
    },
    {
      effect: "owned-store",
      what: "a plain throw",
      thrown: () => new Error("deadlock detected"),
      code: "tool_error",
      message:
        "send_email failed: deadlock detected. Retrying the identical call is safe: nothing was committed.",
      retryRuns: true,
    },
    {
      effect: "irreversible",
      what: "a plain throw",
      thrown: () => new Error("socket hang up"),
      code: "outcome_unknown",
      message: "Do not retry it; tell the user it may or may not have happened and needs checking.",
      retryRuns: false,
    },
    {
      effect: "compensatable",
      what: "a plain throw",
      thrown: () => new Error("socket hang up"),
      code: "outcome_unknown",
      message: "Do not retry it; tell the user it may or may not have happened and needs checking.",
      retryRuns: false,
    },
    {
      effect: "irreversible",
      what: "notExecuted(error)",
      thrown: () => notExecuted(new Error("rate limited.")),
      code: "tool_error",
      message:
        "send_email failed and did not take effect: rate limited. Nothing was recorded, so retrying the " +
        "identical call is safe once the problem is fixed.",
      retryRuns: true,
    },
    {
      effect: "irreversible",
      what: "definitiveFailure(error)",
      thrown: () => definitiveFailure(new Error("mailbox does not exist")),
      code: "tool_error",
      message:
        "send_email failed: mailbox does not exist. This failure is recorded for this request: the identical " +
        "call gets the same failure without running again. Tell the user; it runs again only if they ask " +
        "for it in a new message.",
      retryRuns: false,
    },
  ];

  for (const { effect, what, thrown, code, message, retryRuns } of cases) {
    it(`${effect}, ${what}: ${code}, and the text says whether a retry is safe`, async () => {
      const { sendEmail, runs } = failingOnce(effect, thrown);
      const [first] = await dispatchToolCalls([call("1", alice)], [sendEmail], { turnId: "t1" });
      const [retry] = await dispatchToolCalls([call("2", alice)], [sendEmail], { turnId: "t1" });

      expect(first).toMatchObject({ ok: false, error: { code } });
      if (first?.ok !== false) return;
      if (code === "tool_error") expect(first.error.message).toBe(message);
      else expect(first.error.message).toContain(message);
      expect(runs()).toBe(retryRuns ? 2 : 1);
      expect(retry?.ok).toBe(retryRuns);
    });
  }

  it("says the tool was not run when the throw came before it (a significant picker)", async () => {
    let runs = 0;
    const sendEmail = loopTool(
      async () => {
        runs++;
        return { ok: true };
      },
      {
        name: "send_email",
        store: memoryStore(),
        effect: "native-key",
        significant: () => {
          throw new Error("no subject to fingerprint");
        },
      },
    );
    const [outcome] = await dispatchToolCalls([call("1", alice)], [sendEmail], { turnId: "t1" });
    expect(runs).toBe(0);
    expect(outcome).toMatchObject({
      ok: false,
      error: { code: "tool_error", message: "send_email was not run: no subject to fingerprint." },
    });
  });
});

describe("what the model reads when the same call is still running", () => {
  for (const { remaining, leaseMs, advice } of [
    { remaining: 134, leaseMs: 1_000, advice: "after about 134 ms." },
    { remaining: 42_000, leaseMs: 45_000, advice: "after about 42 seconds." },
  ]) {
    it(`advises the identical call again when the holder's lease passes, ${remaining} ms from now`, async () => {
      const clock = fakeClock();
      const store = memoryStore();
      let runs = 0;
      const sendEmail = loopTool(
        async () => {
          runs++;
          return { ok: true };
        },
        { name: "send_email", store, clock, waitMs: 0 },
      );
      // Another worker holds this intent's key (running, or crashed): its lease has `remaining` ms left.
      await store.claim({
        scope: "default",
        key: intentKey("t1", "send_email", alice),
        tool: "send_email",
        fingerprint: fingerprint(alice),
        token: "other-worker",
        leaseMs,
        ttlMs: 86_400_000,
        now: clock.now() - (leaseMs - remaining),
      });

      const [outcome] = await dispatchToolCalls([call("1", alice)], [sendEmail], { turnId: "t1" });

      expect(runs).toBe(0);
      expect(outcome).toMatchObject({ ok: false, error: { code: "idempotency_key_in_use" } });
      if (outcome?.ok !== false) return;
      expect(outcome.error.message).toBe(
        "send_email was not run again: the same call is still running. Do not call it again now. If its " +
          `result is needed, make the identical call again ${advice}`,
      );
      expect(isIdempotencyError(outcome.error.cause, "idempotency_key_in_use")).toBe(true);
      expect((outcome.error.cause as { retryAfterMs: number }).retryAfterMs).toBe(remaining);
    });
  }
});
