/**
 * DESIGN §7 on the real LangGraph: a human approval given at `interrupt()` covers exactly the
 * arguments it was shown, under one key. A re-run that computes other arguments runs nothing.
 */
import { Command, interrupt, MemorySaver } from "@langchain/langgraph";
import { describe, expect, it } from "vitest";
import { ApprovalMismatchError, fingerprint, isIdempotencyError, memoryStore } from "../src/index.js";
import {
  type ApprovalDecision,
  type ApprovalRequest,
  approve,
  isApprovalRequest,
  keyFromCheckpoint,
  keyFromState,
  mintKey,
  reject,
  requestApproval,
  runApproved,
} from "../src/langgraph/index.js";
import {
  createOutbox,
  type EmailArgs,
  type EmailStateType,
  interruptsOf,
  type NodeFn,
  type Outbox,
  sendEmailTool,
  singleNodeGraph,
  splitGraph,
  ticket,
} from "./fixtures/langgraph-email.js";
import { rejection } from "./fixtures/tools.js";

const thread = (id: string) => ({ configurable: { thread_id: id } });
const proposeKey: NodeFn = () => mintKey("send_email");

/** The model writing the reply inside the node that interrupts: each re-run writes it again. */
function modelDrafts(...drafts: string[]) {
  let calls = 0;
  return (state: EmailStateType): EmailArgs => {
    const body = drafts[Math.min(calls++, drafts.length - 1)]!;
    return { to: state.to, subject: `Re: ticket for ${state.customer}`, body };
  };
}

/** Case 1's unrefactored node: write, ask, send, all in one body. */
function approvingNode(
  outbox: Outbox,
  write: (state: EmailStateType) => EmailArgs,
  keyFrom: "state" | "checkpoint",
) {
  const send = sendEmailTool(memoryStore(), outbox);
  const node: NodeFn = async (state, config) => {
    const args = write(state);
    const key =
      keyFrom === "state" ? keyFromState(state, "send_email") : keyFromCheckpoint(config, "send_email");
    const decision = requestApproval(send, args, { key, interrupt });
    if (!decision.approved) return { status: `rejected: ${decision.reason ?? "no reason"}` };
    const sent = await runApproved(send, args, decision);
    return { status: "sent", messageId: sent.result.messageId };
  };
  return node;
}

type AnyEmailGraph = ReturnType<typeof singleNodeGraph> | ReturnType<typeof splitGraph>;

async function pausedForApproval(graph: AnyEmailGraph, threadId: string) {
  const paused = await graph.invoke(ticket, thread(threadId));
  const request = interruptsOf(paused).find(isApprovalRequest);
  if (!request) throw new Error("the graph did not ask for approval");
  return request as ApprovalRequest<EmailArgs>;
}

describe("approvals bound to (key, fingerprint)", () => {
  it("control: a plain interrupt() approval sends a draft the reviewer never saw when the re-run rewrites it", async () => {
    const outbox = createOutbox();
    const write = modelDrafts("A: we refunded you.", "B: no refund, sorry.");
    const graph = singleNodeGraph(new MemorySaver(), {
      reviewAndSend: async (state) => {
        const args = write(state);
        if (interrupt({ draft: args.body }) !== true) return { status: "rejected" };
        return { status: "sent", messageId: (await outbox.deliver(args)).messageId };
      },
    });
    const paused = await graph.invoke(ticket, thread("control"));
    expect(interruptsOf(paused)).toEqual([{ draft: "A: we refunded you." }]);

    await graph.invoke(new Command({ resume: true }), thread("control"));

    expect(outbox.sent.map((e) => e.body)).toEqual(["B: no refund, sorry."]);
  });

  it("approve A, the re-run produces B: B is not executed and the run fails with ApprovalMismatchError", async () => {
    const outbox = createOutbox();
    const graph = singleNodeGraph(new MemorySaver(), {
      propose: proposeKey,
      reviewAndSend: approvingNode(
        outbox,
        modelDrafts("A: we refunded you.", "B: no refund, sorry."),
        "state",
      ),
    });
    const request = await pausedForApproval(graph, "mismatch");
    expect(request.args.body).toBe("A: we refunded you.");
    expect(request.fingerprint).toBe(fingerprint(request.args));

    const error = await rejection(
      graph.invoke(new Command({ resume: approve(request) }), thread("mismatch")),
    );

    expect(error).toBeInstanceOf(ApprovalMismatchError);
    expect(isIdempotencyError(error, "idempotency_key_conflict")).toBe(true);
    const mismatch = error as ApprovalMismatchError;
    expect(mismatch.httpStatus).toBe(422);
    expect(mismatch.key).toBe(request.key);
    expect(mismatch.originalFingerprint).toBe(request.fingerprint);
    expect(mismatch.fingerprint).toBe(fingerprint({ ...request.args, body: "B: no refund, sorry." }));
    expect(mismatch.originalCalledAt).toBe(request.requested_at);
    expect(outbox.sent).toEqual([]);

    // Retrying the thread re-runs the node with the same approval: still refused, still no email.
    await expect(graph.invoke(null, thread("mismatch"))).rejects.toBeInstanceOf(ApprovalMismatchError);
    expect(outbox.sent).toEqual([]);
  });

  it.each(["state", "checkpoint"] as const)(
    "approve A, the re-run produces A again: it runs once, under the approved key (key from %s)",
    async (keyFrom) => {
      const outbox = createOutbox();
      const graph = singleNodeGraph(new MemorySaver(), {
        propose: proposeKey,
        reviewAndSend: approvingNode(outbox, modelDrafts("A: we refunded you."), keyFrom),
      });
      const request = await pausedForApproval(graph, `same-${keyFrom}`);

      const final = await graph.invoke(new Command({ resume: approve(request) }), thread(`same-${keyFrom}`));

      expect(final.status).toBe("sent");
      expect(outbox.sent).toEqual([{ ...request.args, key: request.key }]);
    },
  );

  it("a rejection runs nothing", async () => {
    const outbox = createOutbox();
    const graph = singleNodeGraph(new MemorySaver(), {
      propose: proposeKey,
      reviewAndSend: approvingNode(outbox, modelDrafts("A: we refunded you."), "state"),
    });
    const request = await pausedForApproval(graph, "rejected");

    const final = await graph.invoke(
      new Command({ resume: reject(request, "wrong tone") }),
      thread("rejected"),
    );

    expect(final.status).toBe("rejected: wrong tone");
    expect(outbox.sent).toEqual([]);
  });

  it("a bare `true` cannot approve: it does not say which arguments, so nothing runs", async () => {
    const outbox = createOutbox();
    const graph = singleNodeGraph(new MemorySaver(), {
      propose: proposeKey,
      reviewAndSend: approvingNode(outbox, modelDrafts("A: we refunded you."), "state"),
    });
    await pausedForApproval(graph, "bare-true");

    const error = await rejection(graph.invoke(new Command({ resume: true }), thread("bare-true")));

    expect(isIdempotencyError(error, "invalid_arguments")).toBe(true);
    expect((error as Error).message).toContain("approve(request)");
    expect(outbox.sent).toEqual([]);
  });

  it("an approval given on one thread does not approve the same draft on another", async () => {
    const outbox = createOutbox();
    const graph = singleNodeGraph(new MemorySaver(), {
      propose: proposeKey,
      reviewAndSend: approvingNode(outbox, modelDrafts("A: we refunded you."), "state"),
    });
    const first = await pausedForApproval(graph, "thread-1");
    const second = await pausedForApproval(graph, "thread-2");
    expect(second.fingerprint).toBe(first.fingerprint);

    const error = await rejection(graph.invoke(new Command({ resume: approve(first) }), thread("thread-2")));

    expect(error).toBeInstanceOf(ApprovalMismatchError);
    expect((error as ApprovalMismatchError).approvedKey).toBe(first.key);
    expect((error as ApprovalMismatchError).key).toBe(second.key);
    expect(outbox.sent).toEqual([]);
  });

  describe("after the topology fix: the send in its own node, the decision kept in state", () => {
    function graphWithBreakpoint(outbox: Outbox) {
      const send = sendEmailTool(memoryStore(), outbox);
      const args = (state: EmailStateType): EmailArgs => ({
        to: state.to,
        subject: `Re: ticket for ${state.customer}`,
        body: state.draft,
      });
      const saver = new MemorySaver();
      const nodes = {
        propose: (state: EmailStateType) => ({
          draft: `A: Dear ${state.customer}, we refunded you.`,
          ...mintKey("send_email"),
        }),
        review: (state: EmailStateType) => ({
          approval: requestApproval(send, args(state), { key: keyFromState(state, "send_email"), interrupt }),
        }),
        send: async (state: EmailStateType) => {
          const approval: ApprovalDecision | undefined = state.approval;
          if (!approval?.approved) return { status: "rejected" };
          const sent = await runApproved(send, args(state), approval, {
            key: keyFromState(state, "send_email"),
          });
          return { status: "sent", messageId: sent.result.messageId };
        },
      };
      return { saver, nodes };
    }

    it("sends the approved draft once", async () => {
      const outbox = createOutbox();
      const { saver, nodes } = graphWithBreakpoint(outbox);
      const graph = splitGraph(saver, nodes);
      const request = await pausedForApproval(graph, "split");

      const final = await graph.invoke(new Command({ resume: approve(request) }), thread("split"));

      expect(final.status).toBe("sent");
      expect(outbox.sent.map((e) => e.body)).toEqual([request.args.body]);
    });

    it("refuses a draft edited between the approval and the send (an operator's updateState)", async () => {
      const outbox = createOutbox();
      const { saver, nodes } = graphWithBreakpoint(outbox);
      // A breakpoint before `send`, where an operator edits the state.
      const graph = splitGraph(saver, nodes, { interruptBefore: ["send"] });
      const request = await pausedForApproval(graph, "edited");
      await graph.invoke(new Command({ resume: approve(request) }), thread("edited"));
      expect((await graph.getState(thread("edited"))).next).toEqual(["send"]);

      await graph.updateState(thread("edited"), { draft: "B: we refunded you twice." });
      const error = await rejection(graph.invoke(null, thread("edited")));

      expect(error).toBeInstanceOf(ApprovalMismatchError);
      expect(outbox.sent).toEqual([]);
    });
  });
});

describe("approval values", () => {
  const request: ApprovalRequest<{ to: string }> = {
    type: "idempotool.approval_request",
    tool: "send_email",
    key: "k-1",
    fingerprint: fingerprint({ to: "ann@example.com" }),
    args: { to: "ann@example.com" },
    requested_at: "2026-01-01T00:00:00.000Z",
  };
  const tool = sendEmailTool(memoryStore(), createOutbox());

  it("approve() echoes the key and fingerprint; reject() carries the reason", () => {
    expect(approve(request)).toEqual({
      approved: true,
      key: "k-1",
      fingerprint: request.fingerprint,
      requested_at: request.requested_at,
    });
    expect(reject(request, "no")).toEqual({ approved: false, key: "k-1", reason: "no" });
    expect(reject()).toEqual({ approved: false });
    expect(() => approve({ key: "k-1" } as unknown as ApprovalRequest)).toThrow(/ApprovalRequest/);
  });

  it("isApprovalRequest() finds the request among other interrupt values", () => {
    expect([{ question: "?" }, request, null, "x"].filter(isApprovalRequest)).toEqual([request]);
  });

  it("runApproved() refuses a decision for another key than the node expects, and runs nothing", async () => {
    const outbox = createOutbox();
    const send = sendEmailTool(memoryStore(), outbox);
    const args = { to: "ann@example.com", subject: "Re", body: "A" };
    const decision = { approved: true, key: "k-1", fingerprint: fingerprint(args) } as const;

    await expect(runApproved(send, args, decision, { key: "k-2" })).rejects.toBeInstanceOf(
      ApprovalMismatchError,
    );
    expect(outbox.sent).toEqual([]);
    expect((await runApproved(send, args, decision, { key: "k-1" })).idempotency_key).toBe("k-1");
    expect(outbox.sent).toHaveLength(1);
  });

  it("runApproved() refuses a rejection, even one cast to an approval", async () => {
    const decision = reject(request) as unknown as Parameters<typeof runApproved>[2];
    await expect(
      runApproved(tool, { to: "ann@example.com", subject: "Re", body: "A" }, decision),
    ).rejects.toThrow(/not approved/);
  });

  it("requestApproval() checks its options before asking anyone", () => {
    const ask = () => {
      throw new Error("must not be asked");
    };
    expect(() => requestApproval(tool, {}, { key: "", interrupt: ask })).toThrow(
      expect.objectContaining({ code: "idempotency_key_invalid" }),
    );
    expect(() =>
      requestApproval(tool, {}, { key: "k", interrupt: undefined as unknown as () => unknown }),
    ).toThrow(expect.objectContaining({ code: "invalid_options" }));
    expect(() => requestApproval(tool, { when: Number.NaN }, { key: "k", interrupt: ask })).toThrow(
      expect.objectContaining({ code: "invalid_arguments" }),
    );
  });
});
