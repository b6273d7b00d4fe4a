/**
 * Where a LangGraph node's key comes from: minted upstream into checkpointed state, or derived from
 * the node run's thread and checkpoint namespace. Proven against the real LangGraph.
 */
import {
  Annotation,
  Command,
  END,
  entrypoint,
  getConfig,
  interrupt,
  MemorySaver,
  Send,
  START,
  StateGraph,
  task,
} from "@langchain/langgraph";
import { describe, expect, it } from "vitest";
import { idempotent, memoryStore } from "../src/index.js";
import { keyFromCheckpoint, keyFromState, mintKey, nodeTool } from "../src/langgraph/index.js";
import { createOutbox, sendEmailTool } from "./fixtures/langgraph-email.js";

const thread = (id: string) => ({ configurable: { thread_id: id } });

describe("keyFromCheckpoint", () => {
  /** A node that records its key on every pass, interrupts, then crashes once on the way out. */
  function recordingGraph(saver: MemorySaver, seen: string[], crash: { once: boolean }) {
    return new StateGraph(Annotation.Root({ done: Annotation<boolean>() }))
      .addNode("send", (_state, config) => {
        seen.push(keyFromCheckpoint(config, "send_email"));
        interrupt("approve?");
        if (crash.once) {
          crash.once = false;
          throw new Error("crash");
        }
        return { done: true };
      })
      .addEdge(START, "send")
      .addEdge("send", END)
      .compile({ checkpointer: saver });
  }

  it("is the same on every re-run of one node run: resumed, crashed, resumed by a restarted process", async () => {
    const saver = new MemorySaver();
    const seen: string[] = [];
    const crash = { once: true };
    const graph = recordingGraph(saver, seen, crash);
    await graph.invoke({ done: false }, thread("t-1"));
    await expect(graph.invoke(new Command({ resume: true }), thread("t-1"))).rejects.toThrow("crash");
    await recordingGraph(saver, seen, crash).invoke(null, thread("t-1"));

    expect(seen).toHaveLength(3);
    expect(new Set(seen).size).toBe(1);
    expect(seen[0]).toMatch(/^composite_[0-9a-f]{64}$/);
  });

  it("differs between threads", async () => {
    const saver = new MemorySaver();
    const seen: string[] = [];
    const graph = recordingGraph(saver, seen, { once: false });
    await graph.invoke({ done: false }, thread("t-1"));
    await graph.invoke({ done: false }, thread("t-2"));
    expect(seen).toHaveLength(2);
    expect(seen[0]).not.toBe(seen[1]);
  });

  it("differs when the same node runs again in a later step (a loop is a new operation)", async () => {
    const seen: string[] = [];
    const graph = new StateGraph(Annotation.Root({ rounds: Annotation<number>() }))
      .addNode("send", (state, config) => {
        seen.push(keyFromCheckpoint(config, "send_email"));
        return { rounds: state.rounds + 1 };
      })
      .addEdge(START, "send")
      .addConditionalEdges("send", (state) => (state.rounds < 3 ? "send" : END))
      .compile({ checkpointer: new MemorySaver() });
    await graph.invoke({ rounds: 0 }, thread("loop"));
    expect(seen).toHaveLength(3);
    expect(new Set(seen).size).toBe(3);
  });

  it("refuses to make a key without a thread: nothing could recognise a re-run", async () => {
    const graph = new StateGraph(Annotation.Root({ key: Annotation<string>() }))
      .addNode("send", (_state, config) => ({ key: keyFromCheckpoint(config, "send_email") }))
      .addEdge(START, "send")
      .addEdge("send", END)
      .compile(); // no checkpointer, no thread_id
    await expect(graph.invoke({ key: "" })).rejects.toMatchObject({ code: "idempotency_key_missing" });
  });

  it("refuses the config given to invoke(), which names the thread but not the node run", () => {
    expect(() => keyFromCheckpoint(thread("t-1"), "send_email")).toThrow(
      expect.objectContaining({
        code: "idempotency_key_missing",
        message: expect.stringContaining("second"),
      }),
    );
  });

  it("reads LangGraph's executionInfo when configurable lacks the ids, and separates parts", () => {
    const fromConfigurable = keyFromCheckpoint(
      { configurable: { thread_id: "t-1", checkpoint_ns: "send:abc" } },
      "send_email",
    );
    const fromExecutionInfo = keyFromCheckpoint(
      { executionInfo: { threadId: "t-1", checkpointNs: "send:abc" } },
      "send_email",
    );
    expect(fromExecutionInfo).toBe(fromConfigurable);
    expect(
      keyFromCheckpoint({ configurable: { thread_id: "t-1", checkpoint_ns: "send:abc" } }, "send_sms"),
    ).not.toBe(fromConfigurable);
  });
});

describe("mintKey and keyFromState", () => {
  it("mints a fresh key into the tool's field on every call", () => {
    const first = mintKey("send_email");
    const second = mintKey("send_email");
    expect(Object.keys(first)).toEqual(["send_email_idempotency_key"]);
    expect(first.send_email_idempotency_key).not.toBe(second.send_email_idempotency_key);
    expect(mintKey("send_email", () => "k-1")).toEqual({ send_email_idempotency_key: "k-1" });
  });

  it("rejects an empty tool name and a bad key from create()", () => {
    expect(() => mintKey("")).toThrow(expect.objectContaining({ code: "invalid_arguments" }));
    expect(() => mintKey("send_email", () => "")).toThrow(
      expect.objectContaining({ code: "idempotency_key_invalid" }),
    );
  });

  it("reads the key back, and never makes one up when it is missing", () => {
    expect(keyFromState({ send_email_idempotency_key: "k-1" }, "send_email")).toBe("k-1");
    expect(() => keyFromState({ draft: "x" }, "send_email")).toThrow(
      expect.objectContaining({
        code: "idempotency_key_missing",
        message: expect.stringContaining('mintKey("send_email")'),
      }),
    );
    expect(() => keyFromState({ send_email_idempotency_key: 42 }, "send_email")).toThrow(
      expect.objectContaining({ code: "idempotency_key_invalid" }),
    );
  });

  it("keeps one key across the re-runs of the node that interrupts, and a new one per pass through the minting node", async () => {
    const seen: { round: number; key: string }[] = [];
    const graph = new StateGraph(
      Annotation.Root({ round: Annotation<number>(), send_email_idempotency_key: Annotation<string>() }),
    )
      .addNode("propose", (state) => ({ round: state.round + 1, ...mintKey("send_email") }))
      .addNode("review", (state) => {
        seen.push({ round: state.round, key: keyFromState(state, "send_email") });
        interrupt("approve?");
        return {};
      })
      .addEdge(START, "propose")
      .addEdge("propose", "review")
      .addConditionalEdges("review", (state) => (state.round < 2 ? "propose" : END))
      .compile({ checkpointer: new MemorySaver() });

    await graph.invoke({ round: 0 }, thread("rounds"));
    await graph.invoke(new Command({ resume: true }), thread("rounds")); // round 1 re-runs, round 2 pauses
    await graph.invoke(new Command({ resume: true }), thread("rounds")); // round 2 re-runs

    expect(seen.map((s) => s.round)).toEqual([1, 1, 2, 2]);
    expect(seen[1]?.key).toBe(seen[0]?.key);
    expect(seen[3]?.key).toBe(seen[2]?.key);
    expect(seen[2]?.key).not.toBe(seen[0]?.key);
  });
});

describe("time travel: replaying a thread from an earlier checkpoint", () => {
  it("keeps a state key minted before that checkpoint, and gives a checkpoint key a new value", async () => {
    const seen: { state: string; checkpoint: string }[] = [];
    const graph = new StateGraph(
      Annotation.Root({ n: Annotation<number>(), send_email_idempotency_key: Annotation<string>() }),
    )
      .addNode("propose", (state) => ({ n: state.n + 1, ...mintKey("send_email") }))
      .addNode("send", (state, config) => {
        seen.push({
          state: keyFromState(state, "send_email"),
          checkpoint: keyFromCheckpoint(config, "send_email"),
        });
        return {};
      })
      .addEdge(START, "propose")
      .addEdge("propose", "send")
      .addEdge("send", END)
      .compile({ checkpointer: new MemorySaver() });
    await graph.invoke({ n: 0 }, thread("travel"));
    const history = [];
    for await (const snapshot of graph.getStateHistory(thread("travel"))) history.push(snapshot);
    const beforeSend = history.find((s) => s.next.includes("send"));
    const beforePropose = history.find((s) => s.next.includes("propose"));

    await graph.invoke(null, beforeSend!.config); // LangGraph forks a new checkpoint and re-runs `send`
    await graph.invoke(null, beforePropose!.config); // re-runs `propose` too, which mints again

    expect(seen).toHaveLength(3);
    expect(seen[1]?.state).toBe(seen[0]?.state);
    expect(seen[1]?.checkpoint).not.toBe(seen[0]?.checkpoint);
    expect(seen[2]?.state).not.toBe(seen[0]?.state);
  });
});

describe("nodeTool", () => {
  const tool = sendEmailTool(memoryStore(), createOutbox());

  it("fails at configuration time for a bad key source or a function that is not an idempotent tool", () => {
    expect(() => nodeTool(tool, { key: "thread" as "state" })).toThrow(
      expect.objectContaining({ code: "invalid_options", message: expect.stringContaining("`key`") }),
    );
    const plain = (async () => ({ messageId: "m" })) as unknown as typeof tool;
    expect(() => nodeTool(plain, { key: "state" })).toThrow(
      expect.objectContaining({ code: "invalid_options" }),
    );
  });

  it("runs nothing when the node does not hand over what the key comes from", async () => {
    const outbox = createOutbox();
    const send = nodeTool(sendEmailTool(memoryStore(), outbox), { key: "checkpoint" });
    const args = { to: "ann@example.com", subject: "Re", body: "A" };
    await expect(send(args, {} as { config: never })).rejects.toMatchObject({
      code: "idempotency_key_missing",
    });
    await expect(send(args, { config: thread("t-1") })).rejects.toMatchObject({
      code: "idempotency_key_missing",
    });
    expect(outbox.sent).toEqual([]);
  });

  it("gives each task of a Send fan-out its own checkpoint key, so each recipient gets one email", async () => {
    const outbox = createOutbox();
    const send = nodeTool(sendEmailTool(memoryStore(), outbox), { key: "checkpoint" });
    const Fan = Annotation.Root({
      recipients: Annotation<string[]>(),
      sent: Annotation<string[]>({ reducer: (a, b) => [...a, ...b], default: () => [] }),
    });
    const graph = new StateGraph(Fan)
      .addNode("notify", async (input: { to: string }, config) => {
        interrupt("approve all?"); // each fanned-out task re-runs on resume
        const sent = await send({ to: input.to, subject: "Outage", body: "We are on it." }, { config });
        return { sent: [sent.idempotency_key] };
      })
      .addConditionalEdges(START, (state) => state.recipients.map((to) => new Send("notify", { to })))
      .addEdge("notify", END)
      .compile({ checkpointer: new MemorySaver() });

    await graph.invoke({ recipients: ["ann@example.com", "bob@example.com"] }, thread("fan-out"));
    const final = await graph.invoke(new Command({ resume: true }), thread("fan-out"));

    expect(outbox.sent.map((e) => e.to).sort()).toEqual(["ann@example.com", "bob@example.com"]);
    expect(new Set(final.sent).size).toBe(2);
  });

  it("gives two tools called in one node run two keys", async () => {
    const store = memoryStore();
    const email = nodeTool(
      idempotent(async () => "email", { name: "send_email", store }),
      { key: "checkpoint" },
    );
    const sms = nodeTool(
      idempotent(async () => "sms", { name: "send_sms", store }),
      { key: "checkpoint" },
    );
    const graph = new StateGraph(Annotation.Root({ keys: Annotation<string[]>() }))
      .addNode("notify", async (_state, config) => {
        const sent = [await email({}, { config }), await sms({}, { config })];
        return { keys: sent.map((s) => s.idempotency_key) };
      })
      .addEdge(START, "notify")
      .addEdge("notify", END)
      .compile({ checkpointer: new MemorySaver() });
    const { keys } = await graph.invoke({ keys: [] }, thread("two-tools"));
    expect(new Set(keys).size).toBe(2);
  });
});

describe("the Functional API: a task that crashed after its effect runs again on resume", () => {
  function workflow(send: (to: string) => Promise<string>, crash: { once: boolean }) {
    const sendTask = task("send_email", async (to: string) => {
      const messageId = await send(to);
      if (crash.once) {
        crash.once = false;
        throw new Error("crash after the send");
      }
      return messageId;
    });
    return entrypoint({ name: "notify", checkpointer: new MemorySaver() }, async (to: string) => {
      interrupt({ to });
      return sendTask(to);
    });
  }

  async function approveCrashResume(flow: ReturnType<typeof workflow>, threadId: string) {
    await flow.invoke("ann@example.com", thread(threadId));
    await expect(flow.invoke(new Command({ resume: true }), thread(threadId))).rejects.toThrow("crash");
    return flow.invoke(null, thread(threadId));
  }

  it("control: without idempotool the email goes out twice", async () => {
    const outbox = createOutbox();
    const flow = workflow(async (to) => (await outbox.deliver({ to, subject: "Re", body: "A" })).messageId, {
      once: true,
    });
    await approveCrashResume(flow, "fn-control");
    expect(outbox.sent).toHaveLength(2);
  });

  it("with the key from the task's checkpoint namespace, it goes out once", async () => {
    const outbox = createOutbox();
    const tool = sendEmailTool(memoryStore(), outbox);
    const flow = workflow(
      async (to) => {
        // Inside a task the config comes from getConfig(); the task's namespace survives the crash.
        const sent = await tool(
          { to, subject: "Re", body: "A" },
          { key: keyFromCheckpoint(getConfig(), "send_email") },
        );
        return sent.result.messageId;
      },
      { once: true },
    );
    const result = await approveCrashResume(flow, "fn-fixed");
    expect(outbox.sent).toHaveLength(1);
    expect(result).toBe("msg-1");
  });
});
