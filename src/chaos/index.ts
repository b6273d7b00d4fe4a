/**
 * `idempotool/chaos`: run your tool under every repeat source an agent meets (transport retry, framework
 * resume, duplicate emission, user retry, a crash right after the effect) and count its effects with a
 * probe: one intended call must give one effect. The same harness is the `idempotool chaos` command.
 *
 * It runs the tool against a throwaway SQLite store on Node's built-in `node:sqlite` (or on
 * `better-sqlite3` where the running Node lacks a usable one). The store-neutral helpers
 * (the conformance suite, `fakeClock()`, `recordToolCalls()`) are in `idempotool/testing`.
 * @example
 * import { chaos } from "idempotool/chaos";
 *
 * const report = await chaos("./src/tools.ts#sendEmail", { args: { to: "alice@example.com" } });
 * if (!report.ok) throw new Error("a repeat sent a second email");
 * @module
 */
export type { ChaosOptions, ChaosProgress, ChaosReport, SourceResult } from "./chaos.js";
export { chaos, SourceVerdict } from "./chaos.js";
export type { ChaosContext, ChaosFactory, ChaosTarget, ToolUnderTest } from "./chaos-module.js";
export { chaosProbe } from "./chaos-probe.js";
export { RepeatSource } from "./chaos-sources.js";
