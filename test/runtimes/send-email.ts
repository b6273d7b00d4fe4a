/**
 * The demo scenario, on one store: an agent's `send_email` that counts the emails it sends, called through
 * the repeat sources an agent meets. Each case asserts how many emails went out.
 */
import assert from "node:assert/strict";
import { type IdempotencyStore, idempotent, isIdempotencyError } from "idempotool";
import type { RuntimeCase } from "./harness.js";

interface Email {
  readonly to: string;
  readonly subject: string;
}

/** A `send_email` tool on `store`, the emails it sent, and a hook called when a repeat starts waiting. */
function sendEmailTool(store: IdempotencyStore, onWait?: () => void) {
  const sent: Email[] = [];
  let gate: Promise<void> = Promise.resolve();
  const tool = idempotent(
    async (email: Email) => {
      sent.push(email);
      await gate;
      return { messageId: `msg-${sent.length}` };
    },
    {
      name: "send_email",
      store,
      effect: "irreversible",
      onEvent: (event) => {
        if (event.type === "in_flight_wait") onWait?.();
      },
    },
  );
  return {
    tool,
    sent,
    /** Holds every send until the returned function is called. */
    hold: () => {
      let open!: () => void;
      gate = new Promise((resolve) => {
        open = resolve;
      });
      return () => open();
    },
  };
}

const alice: Email = { to: "alice@example.com", subject: "Your order shipped" };

/** The scenario's cases on a fresh store from `create` each; `label` names the store in each case. */
export function sendEmailCases(label: string, create: () => IdempotencyStore): RuntimeCase[] {
  const scenario = (name: string, body: (store: IdempotencyStore) => Promise<void>): RuntimeCase => ({
    name: `send_email on ${label}: ${name}`,
    run: async () => {
      const store = create();
      try {
        await body(store);
      } finally {
        await store.close?.();
      }
    },
  });

  return [
    scenario("the same call twice in a row sends one email and replays the first result", async (store) => {
      const { tool, sent } = sendEmailTool(store);
      const first = await tool(alice, { key: "turn-1-email-alice" });
      const again = await tool(alice, { key: "turn-1-email-alice" });
      assert.equal(sent.length, 1);
      assert.equal(first.was_replay, false);
      assert.equal(again.was_replay, true);
      assert.deepEqual(again.result, first.result);
      assert.equal(again.original_called_at, first.original_called_at);
    }),

    scenario("two concurrent duplicates send one email; the second waits and replays", async (store) => {
      let release: (() => void) | undefined;
      const { tool, sent, hold } = sendEmailTool(store, () => release?.());
      release = hold();
      // The model emitted the same call twice in one turn: both start before either finishes.
      const [a, b] = await Promise.all([
        tool(alice, { key: "turn-2-email-alice" }),
        tool(alice, { key: "turn-2-email-alice" }),
      ]);
      assert.equal(sent.length, 1);
      assert.deepEqual(
        [a.was_replay, b.was_replay].sort(),
        [false, true],
        "one call ran, the other replayed its outcome",
      );
      assert.deepEqual(a.result, b.result);
    }),

    scenario("a retry after the first reply was lost sends no second email", async (store) => {
      const { tool, sent } = sendEmailTool(store);
      // The transport drops the reply after the tool ran and its outcome was recorded.
      const flaky = async (email: Email, key: string) => {
        await tool(email, { key });
        throw new TypeError("fetch failed: connection reset");
      };
      await assert.rejects(flaky(alice, "turn-3-email-alice"), /connection reset/);
      const retried = await tool(alice, { key: "turn-3-email-alice" });
      assert.equal(sent.length, 1);
      assert.equal(retried.was_replay, true);
      assert.deepEqual(retried.result, { messageId: "msg-1" });
    }),

    scenario(
      "the same key with other arguments is refused with a typed error, sending nothing",
      async (store) => {
        const { tool, sent } = sendEmailTool(store);
        await tool(alice, { key: "turn-4-email-alice" });
        const other = { ...alice, subject: "Your order was cancelled" };
        await assert.rejects(tool(other, { key: "turn-4-email-alice" }), (error: unknown) => {
          assert.ok(isIdempotencyError(error, "idempotency_key_conflict"), String(error));
          return true;
        });
        assert.equal(sent.length, 1);
      },
    ),

    scenario("a new key is a new intent: it sends a second email", async (store) => {
      const { tool, sent } = sendEmailTool(store);
      await tool(alice, { key: "turn-5-email-alice" });
      const next = await tool(alice, { key: "turn-6-email-alice" });
      assert.equal(next.was_replay, false);
      assert.equal(sent.length, 2);
    }),
  ];
}
