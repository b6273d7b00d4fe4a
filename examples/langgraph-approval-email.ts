/**
 * Case 1 of docs/operation-models.md: a support agent drafts a reply, a human approves it at
 * `interrupt()`, and the email goes out. LangGraph re-runs a node from the top on resume and after a
 * crash, so the customer could get the reply twice. The fix has two layers, and this example shows that
 * either alone leaks:
 *
 * 1. topology: the key is minted in the node that drafts (checkpointed before anyone is asked), and the
 *    send lives in its own node after the review;
 * 2. tool layer: the send runs through idempotent() on a SQLite store shared by every worker, under
 *    the approved key and arguments.
 *
 * Run: node --import tsx examples/langgraph-approval-email.ts (exits non-zero if any check fails)
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  Annotation,
  type BaseCheckpointSaver,
  Command,
  END,
  interrupt,
  MemorySaver,
  START,
  StateGraph,
} from "@langchain/langgraph";
import { ApprovalMismatchError, type IdempotencyStore, idempotent, keys } from "idempotool";
import {
  type ApprovalDecision,
  type ApprovalRequest,
  approve,
  isApprovalRequest,
  keyFromState,
  mintKey,
  requestApproval,
  runApproved,
} from "idempotool/langgraph";
import { sqliteStore } from "idempotool/sqlite";

interface Email {
  readonly to: string;
  readonly subject: string;
  readonly body: string;
}

/** The email provider. Like SendGrid's v3 send in Case 1, it takes no idempotency key: every call is an email. */
const outbox: Email[] = [];
async function deliver(email: Email): Promise<{ messageId: string }> {
  await new Promise((resolve) => setTimeout(resolve, 20));
  outbox.push(email);
  return { messageId: `msg-${outbox.length}` };
}

const Ticket = Annotation.Root({
  customer: Annotation<string>(),
  to: Annotation<string>(),
  draft: Annotation<string>(),
  approval: Annotation<ApprovalDecision | undefined>(),
  messageId: Annotation<string>(),
  // The key's field must be declared, or LangGraph silently drops the update that carries it.
  send_email_idempotency_key: Annotation<string | undefined>(),
});
type TicketState = typeof Ticket.State;

const emailOf = (state: TicketState): Email => ({
  to: state.to,
  subject: `Re: your ticket, ${state.customer}`,
  body: state.draft,
});
const draftReply = (state: TicketState) => `Dear ${state.customer}, we have refunded your order.`;

/** A worker: a compiled graph with its own connection to the shared SQLite file. */
function worker(checkpointer: BaseCheckpointSaver, store: IdempotencyStore, crashAfterSend = false) {
  const sendEmail = idempotent((email: Email) => deliver(email), {
    name: "send_email",
    store,
    effect: "irreversible",
  });
  return new StateGraph(Ticket)
    .addNode("propose", (state) => ({ draft: draftReply(state), ...mintKey("send_email") }))
    .addNode("review", (state) => ({
      approval: requestApproval(sendEmail, emailOf(state), {
        key: keyFromState(state, "send_email"),
        interrupt,
      }),
    }))
    .addNode("send", async (state) => {
      if (!state.approval?.approved) return {};
      const sent = await runApproved(sendEmail, emailOf(state), state.approval, {
        key: keyFromState(state, "send_email"),
      });
      if (crashAfterSend) throw new Error("worker died before LangGraph saved the checkpoint");
      return { messageId: sent.result.messageId };
    })
    .addEdge(START, "propose")
    .addEdge("propose", "review")
    .addEdge("review", "send")
    .addEdge("send", END)
    .compile({ checkpointer, interruptBefore: ["send"] }); // a breakpoint where an operator may edit
}

const ann = { customer: "Ann", to: "ann@example.com" };
const thread = (id: string) => ({ configurable: { thread_id: id } });

async function askForApproval(graph: ReturnType<typeof worker>, threadId: string): Promise<ApprovalRequest> {
  const paused = (await graph.invoke(ann, thread(threadId))) as { __interrupt__?: { value: unknown }[] };
  const request = paused.__interrupt__?.map((i) => i.value).find(isApprovalRequest);
  assert.ok(request, "the review node asks for approval");
  assert.equal(outbox.length, 0, "nothing is sent before the approval");
  return request;
}

/** Approve, then run on past the breakpoint before `send`. */
async function approveAndSend(graph: ReturnType<typeof worker>, threadId: string, request: ApprovalRequest) {
  await graph.invoke(new Command({ resume: approve(request) }), thread(threadId));
  return graph.invoke(null, thread(threadId));
}

async function sends(scenario: string, run: () => Promise<void>): Promise<number> {
  outbox.length = 0;
  await run();
  console.log(`${scenario.padEnd(68)} ${outbox.length} email${outbox.length === 1 ? "" : "s"}`);
  return outbox.length;
}

const dir = mkdtempSync(join(tmpdir(), "idempotool-langgraph-example-"));
const stores: { close(): Promise<void> }[] = [];
/** Each worker opens its own connection, as separate processes would. */
function openStore(): IdempotencyStore {
  const store = sqliteStore({ path: join(dir, "idempotency.db") });
  stores.push(store);
  return store;
}

try {
  console.log("Either layer alone leaks:");

  const topologyOnly = await sends(
    "  topology only: the send node crashes after sending, resumed",
    async () => {
      const checkpointer = new MemorySaver();
      let crash = true;
      const graph = new StateGraph(Ticket)
        .addNode("propose", (state) => ({ draft: draftReply(state) }))
        .addNode("review", (state) => {
          interrupt(state.draft);
          return {};
        })
        .addNode("send", async (state) => {
          const { messageId } = await deliver(emailOf(state)); // no dedup
          if (crash) {
            crash = false;
            throw new Error("worker died before LangGraph saved the checkpoint");
          }
          return { messageId };
        })
        .addEdge(START, "propose")
        .addEdge("propose", "review")
        .addEdge("review", "send")
        .addEdge("send", END)
        .compile({ checkpointer });
      await graph.invoke(ann, thread("topology-only"));
      await assert.rejects(
        graph.invoke(new Command({ resume: true }), thread("topology-only")),
        /worker died/,
      );
      await graph.invoke(null, thread("topology-only"));
    },
  );
  assert.equal(topologyOnly, 2);

  const dedupOnly = await sends(
    "  dedup only: key minted in the node that interrupts, resumed twice",
    async () => {
      const sendEmail = idempotent((email: Email) => deliver(email), {
        name: "send_email",
        store: openStore(),
      });
      const graph = new StateGraph(Ticket)
        .addNode("review_and_send", async (state) => {
          const email = { ...emailOf(state), body: draftReply(state) };
          // OP-6 written inside one node: the key goes into the state object, but LangGraph saves a node's
          // update only when the node returns, so each re-run finds no key and mints another.
          const key = keys.fromState(state as unknown as Record<string, unknown>, "send_email");
          interrupt("send this reply?");
          const sent = await sendEmail(email, { key });
          interrupt("schedule a follow-up?");
          return { messageId: sent.result.messageId };
        })
        .addEdge(START, "review_and_send")
        .addEdge("review_and_send", END)
        .compile({ checkpointer: new MemorySaver() });
      await graph.invoke(ann, thread("dedup-only"));
      await graph.invoke(new Command({ resume: true }), thread("dedup-only"));
      await graph.invoke(new Command({ resume: true }), thread("dedup-only"));
    },
  );
  assert.equal(dedupOnly, 2);

  console.log("Both layers hold:");

  const doubleClick = await sends(
    "  the reviewer double-clicks approve: two workers resume at once",
    async () => {
      const checkpointer = new MemorySaver();
      const [a, b] = [worker(checkpointer, openStore()), worker(checkpointer, openStore())];
      const request = await askForApproval(a, "double-click");
      const results = await Promise.all([
        approveAndSend(a, "double-click", request),
        approveAndSend(b, "double-click", request),
      ]);
      assert.deepEqual(
        results.map((r) => r.messageId),
        ["msg-1", "msg-1"],
        "both workers report the one email",
      );
    },
  );
  assert.equal(doubleClick, 1);

  const crash = await sends("  a worker crashes after sending; a restarted one resumes", async () => {
    const checkpointer = new MemorySaver(); // outlives the worker, as a database checkpointer would
    const doomed = worker(checkpointer, openStore(), true);
    const request = await askForApproval(doomed, "crash");
    await assert.rejects(approveAndSend(doomed, "crash", request), /worker died/);
    assert.equal(outbox.length, 1, "the email went out before the crash");

    const restarted = worker(checkpointer, openStore());
    const final = await restarted.invoke(null, thread("crash"));
    assert.equal(final.messageId, "msg-1", "the restarted worker gets the original message back");
  });
  assert.equal(crash, 1);

  const edited = await sends("  the draft is edited after the approval: not sent", async () => {
    const graph = worker(new MemorySaver(), openStore());
    const request = await askForApproval(graph, "edited");
    await graph.invoke(new Command({ resume: approve(request) }), thread("edited"));
    await graph.updateState(thread("edited"), { draft: "Dear Ann, we have refunded your order twice." });
    await assert.rejects(graph.invoke(null, thread("edited")), (error: unknown) => {
      assert.ok(error instanceof ApprovalMismatchError);
      assert.equal(error.code, "idempotency_key_conflict");
      assert.equal(error.originalFingerprint, request.fingerprint);
      return true;
    });
  });
  assert.equal(edited, 0);

  console.log("Every check holds: one approved email per ticket.");
} finally {
  for (const store of stores) await store.close();
  rmSync(dir, { recursive: true, force: true });
}
