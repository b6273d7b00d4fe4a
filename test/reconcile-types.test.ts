/**
 * Type tests: the reconciler's `tools` map has a real type. A tool typed by its result fits it, and a
 * hook written inline sees `unknown`, not `any`. `tsc --noEmit` checks them.
 */
import { describe, expectTypeOf, it } from "vitest";
import { memoryStore } from "../src/index.js";
import type { ReconcileOptions, ReconcileTool } from "../src/reconcile/index.js";

type ToolEntry = ReconcileOptions["tools"][string];
type CompensateStep = Parameters<NonNullable<ToolEntry["compensate"]>>[1]["step"];
type VerifyResult = Extract<Awaited<ReturnType<ToolEntry["verify"]>>, { status: "completed" }>["result"];

describe("reconcile({ tools })", () => {
  it("hands an inline hook unknown values, never any", () => {
    expectTypeOf<CompensateStep>().toBeUnknown();
    expectTypeOf<VerifyResult>().toBeUnknown();
  });

  it("takes a tool typed by its own result beside others", () => {
    const refund: ReconcileTool<{ refundId: string }> = {
      verify: async () => ({ status: "completed", result: { refundId: "re_1" } }),
      compensate: async (_record, { step }) => step?.refundId,
    };
    const notify: ReconcileTool<number> = { verify: () => ({ status: "unknown" }) };
    const options: ReconcileOptions = { store: memoryStore(), tools: { refund, notify } };
    expectTypeOf(options.tools).toEqualTypeOf<Readonly<Record<string, ReconcileTool>>>();
  });
});
