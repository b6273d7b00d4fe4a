/**
 * The demo's LangGraph row: an upstream node mints the send's key into checkpointed state; the next
 * node asks for approval at `interrupt()`, sends, and then asks a follow-up question. LangGraph re-runs
 * the node from the top on each resume, so the second resume runs the send again: it replays.
 * Loaded by a dynamic `import()`: it needs @langchain/langgraph.
 * @module
 */
import { Annotation, Command, END, interrupt, MemorySaver, START, StateGraph } from "@langchain/langgraph";
import {
  type ApprovalDecision,
  approve,
  isApprovalRequest,
  keyFromState,
  mintKey,
  requestApproval,
  runApproved,
} from "../langgraph/index.js";
import type { IntegrationContext } from "./demo-integrations.js";
import { sendEmailTool } from "./demo-tool.js";

const Draft = Annotation.Root({
  messageId: Annotation<string>(),
  // Declared, or LangGraph drops the update that carries the key.
  send_email_idempotency_key: Annotation<string | undefined>(),
});

export async function runLangGraphRow({
  store,
  outbox,
  scope,
  email,
}: IntegrationContext): Promise<string[]> {
  const sendEmail = sendEmailTool({ store, outbox });
  const got: string[] = [];
  const graph = new StateGraph(Draft)
    .addNode("draft", () => mintKey("send_email"))
    .addNode("review_and_send", async (state) => {
      const key = keyFromState(state, "send_email");
      const decision: ApprovalDecision = requestApproval(sendEmail, email, { key, interrupt, scope });
      if (!decision.approved) return {};
      const sent = await runApproved(sendEmail, email, decision, { key, scope });
      got.push(sent.was_replay ? "replay" : "sent");
      interrupt("schedule a follow-up?"); // the next resume re-runs this node, send and all
      return { messageId: sent.result.messageId };
    })
    .addEdge(START, "draft")
    .addEdge("draft", "review_and_send")
    .addEdge("review_and_send", END)
    .compile({ checkpointer: new MemorySaver() });

  const thread = { configurable: { thread_id: scope } };
  const paused = (await graph.invoke({}, thread)) as { __interrupt__?: { value: unknown }[] };
  const request = paused.__interrupt__?.map((i) => i.value).find(isApprovalRequest);
  if (!request) throw new Error("the graph did not ask for approval");
  await graph.invoke(new Command({ resume: approve(request) }), thread); // resume 1: approved, sends
  await graph.invoke(new Command({ resume: "no follow-up" }), thread); // resume 2: the node runs again
  return got;
}
