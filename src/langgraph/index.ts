/**
 * `idempotool/langgraph`: side effects in LangGraph nodes that survive re-runs (OP-6 and Case 1 in
 * docs/operation-models.md).
 *
 * LangGraph re-runs a node from the top when it resumes after `interrupt()` or after a crash, so
 * everything before the point it stopped runs again. Two layers keep an effect to one:
 * - topology: mint the key (`mintKey`) in a node that runs before the node that interrupts, so it is
 *   checkpointed before any effect, and put the effect after the interrupt;
 * - the tool layer: run the effect through `idempotent()` under that key (`keyFromState`,
 *   `keyFromCheckpoint`, `nodeTool`), so a re-run replays the first outcome.
 * Approvals given at `interrupt()` are bound to the key and the arguments' fingerprint
 * (`requestApproval`, `runApproved`): a re-run with other arguments runs nothing, and throws
 * `ApprovalMismatchError` (exported from `idempotool`).
 *
 * Nothing here imports LangGraph: pass the node's `config` and LangGraph's `interrupt` in.
 * @module
 */

export type {
  ApprovalDecision,
  ApprovalRequest,
  ApprovedDecision,
  RejectedDecision,
} from "../tool-calls/approval-decision.js";
export { approve, isApprovalRequest, reject } from "../tool-calls/approval-decision.js";
export type { Interrupt, RequestApprovalOptions, RunApprovedOptions } from "./approval.js";
export { requestApproval, runApproved } from "./approval.js";
export type { NodeConfig } from "./checkpoint-key.js";
export { keyFromCheckpoint } from "./checkpoint-key.js";
export type { NodeCall, NodeTool, NodeToolOptions } from "./node-tool.js";
export { KeySource, nodeTool } from "./node-tool.js";
export type { KeyField } from "./state-key.js";
export { keyFromState, mintKey } from "./state-key.js";
