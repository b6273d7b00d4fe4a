/**
 * Seed Case 1 on the real LangGraph: a node that sends an email after `interrupt()` is re-run from the
 * top on resume and after a crash. Each fix is shown next to a control proving the bug is real.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Command, interrupt, MemorySaver } from "@langchain/langgraph";
import { afterEach, describe, expect, it } from "vitest";
import { type Envelope, keys, memoryStore } from "../src/index.js";
import { mintKey, nodeTool } from "../src/langgraph/index.js";
import { type SqliteStore, sqliteStore } from "../src/sqlite/index.js";
import {
  createOutbox,
  type EmailStateType,
  emailArgs,
  interruptsOf,
  type NodeFn,
  type Outbox,
  sendEmailTool,
  singleNodeGraph,
  ticket,
} from "./fixtures/langgraph-email.js";

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function tempDb(): string {
  const dir = mkdtempSync(join(tmpdir(), "idempotool-langgraph-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return join(dir, "idempotency.db");
}

/** A "process": its own connection to the shared SQLite file, closed after the test. */
function openStore(path: string): SqliteStore {
  const store = sqliteStore({ path });
  cleanups.push(() => store.close());
  return store;
}

const thread = (id: string) => ({ configurable: { thread_id: id } });
const proposeWithKey: NodeFn = (state) => ({
  draft: `Dear ${state.customer}, we refunded you.`,
  ...mintKey("send_email"),
});

/**
 * The body of Case 1's node: approval, the send, then a second question. The send sits between two
 * interrupts, so the second resume re-runs it: the plainest way LangGraph repeats an effect.
 */
function reviewAndSend(send: (state: EmailStateType, config: Parameters<NodeFn>[1]) => Promise<string>) {
  const node: NodeFn = async (state, config) => {
    const approved = interrupt({ question: "send this reply?", draft: state.draft });
    if (approved !== true) return { status: "rejected" };
    const messageId = await send(state, config);
    const followUp = interrupt({ question: "schedule a follow-up?" });
    return { status: followUp === true ? "sent, follow-up" : "sent", messageId };
  };
  return node;
}

async function resumeTwice(graph: ReturnType<typeof singleNodeGraph>, threadId: string) {
  const paused = await graph.invoke(ticket, thread(threadId));
  expect(interruptsOf(paused)).toHaveLength(1);
  const afterApproval = await graph.invoke(new Command({ resume: true }), thread(threadId));
  expect(interruptsOf(afterApproval)).toEqual([{ question: "schedule a follow-up?" }]);
  return graph.invoke(new Command({ resume: false }), thread(threadId));
}

describe("without idempotool, LangGraph repeats the effect (controls)", () => {
  it("sends two emails when the node is resumed twice", async () => {
    const outbox = createOutbox();
    const graph = singleNodeGraph(new MemorySaver(), {
      reviewAndSend: reviewAndSend(async (state) => (await outbox.deliver(emailArgs(state))).messageId),
    });
    await resumeTwice(graph, "control-twice");
    expect(outbox.sent).toHaveLength(2);
  });

  it("sends two emails through idempotent() when the node mints its own key: each re-run mints a new one", async () => {
    const outbox = createOutbox();
    const send = sendEmailTool(memoryStore(), outbox);
    const graph = singleNodeGraph(new MemorySaver(), {
      reviewAndSend: reviewAndSend(async (state) => {
        // The seed's OP-6 written naively in one node: the key is written into the state object, but
        // LangGraph checkpoints a node's update only when it returns, so every re-run finds no key.
        const key = keys.fromState(state as unknown as Record<string, unknown>, "send_email");
        return (await send(emailArgs(state), { key })).result.messageId;
      }),
    });
    await resumeTwice(graph, "control-own-key");
    expect(outbox.sent).toHaveLength(2);
    expect(outbox.sent[0]?.key).not.toBe(outbox.sent[1]?.key);
  });

  it("sends two emails when two workers resume the same thread at once (a double-clicked approve)", async () => {
    const saver = new MemorySaver();
    const outbox = createOutbox({ delayMs: 30 });
    const worker = () =>
      singleNodeGraph(saver, {
        reviewAndSend: reviewAndSend(async (state) => (await outbox.deliver(emailArgs(state))).messageId),
      });
    await worker().invoke(ticket, thread("control-double-click"));
    await Promise.all([
      worker().invoke(new Command({ resume: true }), thread("control-double-click")),
      worker().invoke(new Command({ resume: true }), thread("control-double-click")),
    ]);
    expect(outbox.sent).toHaveLength(2);
  });

  it("sends two emails when the node crashes after the send and the thread is resumed", async () => {
    const saver = new MemorySaver();
    const outbox = createOutbox();
    let crash = true;
    const graph = singleNodeGraph(saver, {
      reviewAndSend: async (state) => {
        if (interrupt({ draft: state.draft }) !== true) return { status: "rejected" };
        const { messageId } = await outbox.deliver(emailArgs(state));
        if (crash) {
          crash = false;
          throw new Error("process died before the checkpoint");
        }
        return { status: "sent", messageId };
      },
    });
    await graph.invoke(ticket, thread("control-crash"));
    await expect(graph.invoke(new Command({ resume: true }), thread("control-crash"))).rejects.toThrow(
      "process died",
    );
    await graph.invoke(null, thread("control-crash"));
    expect(outbox.sent).toHaveLength(2);
  });
});

describe.each([
  { source: "state" as const, note: "the key minted upstream and checkpointed in state (OP-6)" },
  { source: "checkpoint" as const, note: "the key from thread_id + checkpoint_ns" },
])("with $note", ({ source }) => {
  /** Case 1's node, sending through a node tool; records every envelope it got. */
  function graphFor(saver: MemorySaver, outbox: Outbox, store = memoryStore()) {
    const envelopes: Envelope<{ messageId: string }>[] = [];
    const send = nodeTool(sendEmailTool(store, outbox), { key: source });
    const graph = singleNodeGraph(saver, {
      propose: proposeWithKey,
      reviewAndSend: reviewAndSend(async (state, config) => {
        const sent = await send(emailArgs(state), { state, config });
        envelopes.push(sent);
        return sent.result.messageId;
      }),
    });
    return { graph, envelopes };
  }

  it("resumed twice, sends exactly one email; the re-run gets the original result as a replay", async () => {
    const outbox = createOutbox();
    const { graph, envelopes } = graphFor(new MemorySaver(), outbox);
    const final = await resumeTwice(graph, `${source}-twice`);

    expect(outbox.sent).toHaveLength(1);
    expect(envelopes.map((e) => e.was_replay)).toEqual([false, true]);
    expect(envelopes[1]?.idempotency_key).toBe(envelopes[0]?.idempotency_key);
    expect(final.messageId).toBe("msg-1");
    expect(final.status).toBe("sent");
  });

  it("two workers resuming the same thread at once send one email", async () => {
    const saver = new MemorySaver();
    const db = tempDb();
    const outbox = createOutbox({ delayMs: 30 });
    // Two "processes": each its own compiled graph and its own connection to the shared SQLite file.
    const a = graphFor(saver, outbox, openStore(db));
    const b = graphFor(saver, outbox, openStore(db));
    await a.graph.invoke(ticket, thread(`${source}-double-click`));

    const paused = await Promise.all([
      a.graph.invoke(new Command({ resume: true }), thread(`${source}-double-click`)),
      b.graph.invoke(new Command({ resume: true }), thread(`${source}-double-click`)),
    ]);

    expect(outbox.sent).toHaveLength(1);
    // One worker sent; the other waited for its outcome and got the same message back as a replay.
    const sent = [...a.envelopes, ...b.envelopes];
    expect(sent.map((e) => e.was_replay).sort()).toEqual([false, true]);
    expect(sent.map((e) => e.result.messageId)).toEqual(["msg-1", "msg-1"]);
    for (const result of paused)
      expect(interruptsOf(result)).toEqual([{ question: "schedule a follow-up?" }]);
  });

  it("crashed after the send, resumed by a restarted process on the same SQLite file, sends one email", async () => {
    const saver = new MemorySaver(); // the checkpointer outlives the process, as a database would
    const db = tempDb();
    const outbox = createOutbox();
    const keysSeen: string[] = [];
    const processWith = (crashAfterSend: boolean) => {
      const send = nodeTool(sendEmailTool(openStore(db), outbox), { key: source });
      return singleNodeGraph(saver, {
        propose: proposeWithKey,
        reviewAndSend: async (state, config) => {
          if (interrupt({ draft: state.draft }) !== true) return { status: "rejected" };
          const sent = await send(emailArgs(state), { state, config });
          keysSeen.push(sent.idempotency_key);
          // The effect and its record are done; the process dies before LangGraph checkpoints the node.
          if (crashAfterSend) throw new Error("process died before the checkpoint");
          return { status: sent.was_replay ? "sent (replayed)" : "sent", messageId: sent.result.messageId };
        },
      });
    };

    const first = processWith(true);
    await first.invoke(ticket, thread(`${source}-crash`));
    await expect(first.invoke(new Command({ resume: true }), thread(`${source}-crash`))).rejects.toThrow(
      "process died",
    );
    expect(outbox.sent).toHaveLength(1);

    // The restarted process resumes the thread: LangGraph re-runs the node with the stored approval.
    const restarted = processWith(false);
    const final = await restarted.invoke(null, thread(`${source}-crash`));

    expect(outbox.sent).toHaveLength(1);
    expect(final.status).toBe("sent (replayed)");
    expect(final.messageId).toBe("msg-1");
    expect(keysSeen).toHaveLength(2);
    expect(keysSeen[1]).toBe(keysSeen[0]);
  });
});
