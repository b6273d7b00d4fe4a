/**
 * `idempotool/audit`: the rules of docs/cli.md ("audit") over tool definitions. Which tools
 * are side-effectful, which of those take an idempotency key, and which operation model (OP-1 … OP-8)
 * each should use. `idempotool audit` is this, on the command line.
 *
 * @example
 * import { auditTools } from "idempotool/audit";
 *
 * const report = auditTools({ tools: [{ name: "send_email", inputSchema: { type: "object", properties: {} } }] });
 * for (const tool of report.tools) console.log(tool.name, tool.verdict, tool.finding);
 *
 * @module
 */
export type { AuditOptions, AuditReport, ToolAudit } from "./audit-tools.js";
export { auditTools, Verdict } from "./audit-tools.js";
export type { Classification, Mention, Signal } from "./classify.js";
export { classifyTool, ToolClass } from "./classify.js";
export type { KeyField, KeySearch } from "./idempotency-key.js";
export { findIdempotencyKey } from "./idempotency-key.js";
export type { ListMcpToolsOptions, McpServerCommand, McpToolList } from "./list-mcp-tools.js";
export { listMcpTools } from "./list-mcp-tools.js";
export type { MechanismInput, Plan, Recommendation } from "./mechanism.js";
export { Mechanism, mechanismTitles, recommendMechanism, ToolLayer } from "./mechanism.js";
export type { JsonSchema, ToolAnnotations, ToolDefinition } from "./tool-definition.js";
export { readToolDefinitions, ToolFormat } from "./tool-definition.js";
