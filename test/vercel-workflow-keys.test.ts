/**
 * `idempotool/vercel-workflow` outside a run: the real `getStepMetadata` refuses there, and so do the
 * helpers, before anything runs. Inside a run, on the SDK's local runtime, see vercel-workflow-example.test.ts.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, expectTypeOf, it } from "vitest";
import { getStepMetadata } from "workflow";
import { systemClock } from "../src/index.js";
import * as entry from "../src/vercel-workflow/index.js";
import { type GetStepMetadata, stepKey, stepTool } from "../src/vercel-workflow/index.js";
import { emailTool } from "./fixtures/tools.js";

const metadata = (stepId: string) => () => ({ stepId, stepName: "notify", attempt: 1 });

describe("stepKey", () => {
  it("is the same for one stepId whatever the attempt, and differs by stepId and by part", () => {
    const key = stepKey(metadata("step_01A"), "send_email");
    expect(key).toMatch(/^composite_[0-9a-f]{64}$/);
    expect(stepKey(() => ({ stepId: "step_01A", attempt: 3 }), "send_email")).toBe(key);
    expect(stepKey(metadata("step_01B"), "send_email")).not.toBe(key);
    expect(stepKey(metadata("step_01A"), "send_sms")).not.toBe(key);
  });

  it("refuses with idempotency_key_missing when the real getStepMetadata is called outside a step", () => {
    expect(() => getStepMetadata()).toThrow(); // what the SDK does
    let error: unknown;
    try {
      stepKey(getStepMetadata, "send_email");
    } catch (e) {
      error = e;
    }
    expect(error).toMatchObject({ code: "idempotency_key_missing" });
    expect((error as Error).cause).toBeInstanceOf(Error);
  });

  it("refuses metadata without a stepId, and a first argument that is not a function", () => {
    expect(() => stepKey(() => ({ stepId: "" }))).toThrow(
      expect.objectContaining({ code: "idempotency_key_missing" }),
    );
    expect(() => stepKey({ stepId: "step_01A" } as never)).toThrow(
      expect.objectContaining({ code: "invalid_arguments" }),
    );
  });
});

describe("stepTool", () => {
  const { send, sent } = emailTool({ clock: systemClock });
  const sendEmail = stepTool(send, { getStepMetadata });

  it("refuses outside a step and sends nothing", async () => {
    await expect(sendEmail({ to: "alice@example.com" })).rejects.toMatchObject({
      code: "idempotency_key_missing",
    });
    expect(sent).toEqual([]);
  });

  it("replays the first outcome for every call from one step", async () => {
    const tool = stepTool(sendEmail.tool, { getStepMetadata: metadata("step_01C") });
    const first = await tool({ to: "bob@example.com" });
    const again = await tool({ to: "bob@example.com" });
    expect(again).toMatchObject({ was_replay: true, result: first.result });
    expect(sent).toEqual([{ to: "bob@example.com" }]);
  });

  it("rejects a tool not made by idempotent() and a missing getStepMetadata at configuration time", () => {
    expect(() => stepTool((async () => 1) as never, { getStepMetadata })).toThrow(
      expect.objectContaining({ code: "invalid_options" }),
    );
    expect(() => stepTool(sendEmail.tool, {} as never)).toThrow(/option `getStepMetadata`/);
  });
});

describe("idempotool/vercel-workflow", () => {
  it("exports exactly its documented values, and the SDK's getStepMetadata fits the shape it reads", () => {
    expect(Object.keys(entry).sort()).toEqual(["stepKey", "stepTool"]);
    expectTypeOf(getStepMetadata).toExtend<GetStepMetadata>();
  });

  it("never imports the Workflow SDK at runtime", () => {
    for (const file of ["index.ts", "step-key.ts", "step-tool.ts"]) {
      const source = readFileSync(join(import.meta.dirname, "../src/vercel-workflow", file), "utf8");
      expect(source).not.toMatch(/^import .* from "(workflow|@workflow\/)/m);
    }
  });
});
