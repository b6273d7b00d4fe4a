/**
 * `idempotool/audit`: the checks of `idempotool audit` over tool definitions, for a program (a test that
 * keeps a project's tools auditable, a dashboard). Which tools are side-effectful, which of those take an
 * idempotency key, and which operation model (OP-1 … OP-8) each should use.
 *
 * The report's shape is the API; how a tool is classified is not. The heuristics behind it (verbs, third
 * parties named in descriptions, key lookalikes) change as they meet new tools, so they stay inside the
 * CLI. A tool you wrap yourself needs no audit: give `idempotent()` its `effect`.
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
export type { Signal } from "./classify.js";
export { ToolClass } from "./classify.js";
export type { KeyField } from "./idempotency-key.js";
export type { ListMcpToolsOptions, McpServerCommand, McpToolList } from "./list-mcp-tools.js";
export { listMcpTools } from "./list-mcp-tools.js";
export type { Recommendation } from "./mechanism.js";
export { Mechanism, ToolLayer } from "./mechanism.js";
export { ToolFormat } from "./tool-definition.js";
