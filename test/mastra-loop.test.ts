/**
 * A step in a dountil loop runs once per pass in one workflow run, so (workflowId, runId, stepId) alone
 * names every pass alike: the iteration must be a part of the key, as the docs say, for each pass to send.
 */
import { Mastra } from "@mastra/core/mastra";
import { InMemoryStore } from "@mastra/core/storage";
import { createStep, createWorkflow } from "@mastra/core/workflows";
import { expect, it } from "vitest";
import { z } from "zod";
import { idempotent, memoryStore } from "../src/index.js";
import { idempotentStep, keyFromStep } from "../src/mastra/index.js";

const state = z.object({ to: z.string(), count: z.number() });

it("sends one reminder per loop pass when the iteration is a part of the key", async () => {
  const sent: string[] = [];
  const sendEmail = idempotent(
    async (args: { to: string; subject: string }) => {
      sent.push(args.to);
      return { id: `m-${sent.length}` };
    },
    { name: "send_email", store: memoryStore() },
  );
  const remind = idempotentStep(
    createStep({
      id: "remind",
      inputSchema: state,
      outputSchema: state,
      execute: async (params) => {
        await sendEmail(
          { to: params.inputData.to, subject: "reminder" },
          { key: keyFromStep(params, "send_email", params.inputData.count) },
        );
        return { to: params.inputData.to, count: params.inputData.count + 1 };
      },
    }),
  );
  const workflow = createWorkflow({ id: "reminders", inputSchema: state, outputSchema: state })
    .dountil(remind, async ({ inputData }) => inputData.count >= 3)
    .commit();
  const mastra = new Mastra({
    workflows: { reminders: workflow },
    storage: new InMemoryStore(),
    logger: false,
  });
  const run = await mastra.getWorkflow("reminders").createRun();

  const result = await run.start({ inputData: { to: "alice", count: 0 } });

  expect(result.status).toBe("success");
  // Three passes, three intended reminders.
  expect(sent).toEqual(["alice", "alice", "alice"]);
});
