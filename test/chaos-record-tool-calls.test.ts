/**
 * `recordToolCalls()`: the seed's activation rule for test suites — the same (tool, arguments hash)
 * called more than once within one user turn is flagged; the same call in a new turn is a new intent.
 */
import { describe, expect, it } from "vitest";
import { fingerprint, idempotent, memoryStore } from "../src/index.js";
import { DuplicateToolCallsError, recordToolCalls } from "../src/testing/index.js";

const alice = { to: "alice@example.com", subject: "Minutes" };

describe("recordToolCalls", () => {
  it("flags a tool called twice with the same arguments in one turn", async () => {
    const recorder = recordToolCalls();
    const sent: string[] = [];
    const sendEmail = recorder.wrap("send_email", async (args: typeof alice) => {
      sent.push(args.to);
      return "ok";
    });
    recorder.turn("turn-1");
    await sendEmail(alice);
    // Same arguments in another key order: the same call.
    await sendEmail({ subject: "Minutes", to: "alice@example.com" });

    expect(sent).toHaveLength(2);
    const duplicates = recorder.duplicates();
    expect(duplicates).toHaveLength(1);
    expect(duplicates[0]).toMatchObject({
      tool: "send_email",
      turn: "turn-1",
      count: 2,
      argsHash: fingerprint(alice),
    });
    expect(() => recorder.assertNoDuplicates()).toThrow(DuplicateToolCallsError);
  });

  it("does not flag the same call in a new turn (a new intent), other arguments, or another tool", () => {
    const recorder = recordToolCalls();
    recorder.turn("turn-1");
    recorder.record("send_email", alice);
    recorder.record("send_email", { ...alice, to: "bob@example.com" });
    recorder.record("send_sms", alice);
    recorder.turn("turn-2");
    recorder.record("send_email", alice);
    expect(recorder.duplicates()).toEqual([]);
    expect(() => recorder.assertNoDuplicates()).not.toThrow();
    expect(recorder.calls.map((c) => c.turn)).toEqual(["turn-1", "turn-1", "turn-1", "turn-2"]);
  });

  it("takes calls from an agent loop, with the turn given per call", () => {
    const recorder = recordToolCalls();
    // Tool calls as a model emitted them, with new tool-call ids on the repeat.
    const emitted = [
      { id: "call_1", turn: "t9", name: "charge_card", arguments: '{"amount":1200,"currency":"eur"}' },
      { id: "call_2", turn: "t9", name: "charge_card", arguments: '{"currency":"eur","amount":1200}' },
    ];
    for (const call of emitted) recorder.record(call.name, JSON.parse(call.arguments), { turn: call.turn });
    expect(recorder.duplicates()).toMatchObject([{ tool: "charge_card", turn: "t9", count: 2 }]);
  });

  it("describes every duplicate in the assertion's message", () => {
    const recorder = recordToolCalls();
    for (let i = 0; i < 3; i++) recorder.record("send_email", alice);
    recorder.record("create_ticket", { title: "Printer on fire" });
    recorder.record("create_ticket", { title: "Printer on fire" });
    const error = (() => {
      try {
        recorder.assertNoDuplicates();
      } catch (e) {
        return e;
      }
    })() as DuplicateToolCallsError;
    expect(error.duplicates.map((d) => [d.tool, d.count])).toEqual([
      ["send_email", 3],
      ["create_ticket", 2],
    ]);
    expect(error.message).toContain('send_email ×3 in turn "default"');
    expect(error.message).toContain('"title":"Printer on fire"');
  });

  it("wraps an idempotent tool too: the recorder sees the model's repeat, the tool absorbs it", async () => {
    const recorder = recordToolCalls();
    let sent = 0;
    const sendEmail = recorder.wrap(
      "send_email",
      idempotent(
        async () => {
          sent += 1;
          return "ok";
        },
        { name: "send_email", store: memoryStore() },
      ),
    );
    recorder.turn("turn-1");
    const first = await sendEmail(alice, { key: "turn-1-alice" });
    const again = await sendEmail(alice, { key: "turn-1-alice" });
    expect(sent).toBe(1);
    expect([first.was_replay, again.was_replay]).toEqual([false, true]);
    expect(recorder.duplicates()).toHaveLength(1);
  });

  it("never judges arguments with no exact JSON form equal, and forgets everything on reset", () => {
    const recorder = recordToolCalls();
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    recorder.record("send_email", cyclic);
    recorder.record("send_email", cyclic);
    recorder.record("send_email", { amount: 12n });
    recorder.record("send_email", { amount: 12n });
    expect(recorder.duplicates()).toMatchObject([{ count: 2, args: { amount: 12n } }]);
    recorder.reset();
    expect(recorder.calls).toEqual([]);
  });

  it("refuses an empty turn id or tool name", () => {
    const recorder = recordToolCalls();
    expect(() => recorder.turn("")).toThrow(TypeError);
    expect(() => recorder.record("", {})).toThrow(TypeError);
  });
});
