/**
 * idempotent() inside a Worker on an older compatibility date, where `setTimeout` returns a number with no
 * `unref()`: the call must still run the tool once, replay the repeat, and leave the record completed (it
 * once claimed the key and then threw before the tool ran, leaving the claim in progress).
 */
import { join } from "node:path";
import { expect, it } from "vitest";
import { startWorker } from "./fixtures/workerd.js";

it("idempotent() runs the tool and replays it in a Worker on compatibility date 2025-09-01 with nodejs_compat", async () => {
  const mf = await startWorker(
    join(import.meta.dirname, "fixtures/cloudflare/timers-worker.ts"),
    {},
    {
      compatibilityDate: "2025-09-01",
    },
  );
  try {
    const answer = (await (await mf.dispatchFetch("http://worker/")).json()) as {
      runs: number;
      outcomes: unknown[];
      status: string | null;
    };
    expect(answer.runs).toBe(1);
    expect(answer.outcomes[1]).toMatchObject({ was_replay: true });
    expect(answer.status).toBe("completed");
  } finally {
    await mf.dispose();
  }
}, 120_000);
