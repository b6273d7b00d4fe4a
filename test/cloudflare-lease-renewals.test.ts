/**
 * A lease's renewals must never silently stop. In a Worker a timer belongs to the request that set it and
 * is dropped when that request ends, so renewals must not hang on a timer an earlier request armed.
 */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { startWorker } from "./fixtures/workerd.js";

describe("renewals in a Cloudflare Worker", () => {
  it("a lease renews even after an earlier request, whose timer the runtime dropped with it, has ended", async () => {
    const mf = await startWorker(join(import.meta.dirname, "fixtures/cloudflare/lease-worker.ts"), {});
    try {
      const alone = (await (await mf.dispatchFetch("http://worker/long?ms=1000")).json()) as {
        renewals: number;
      };
      // Period 100 ms: about 10 renewals in one second.
      expect(alone.renewals).toBeGreaterThanOrEqual(5);
      await (await mf.dispatchFetch("http://worker/short")).text();
      // The short request's 100 ms renewal timer was armed in its request; the request is over.
      await new Promise((resolve) => setTimeout(resolve, 50));
      const after = (await (await mf.dispatchFetch("http://worker/long?ms=1000")).json()) as {
        renewals: number;
      };
      expect(after.renewals).toBeGreaterThanOrEqual(5);
    } finally {
      await mf.dispose();
    }
  }, 120_000);

  it("a first call's lease, which arms its timer only once found still held, renews in its own request", async () => {
    const mf = await startWorker(join(import.meta.dirname, "fixtures/cloudflare/lease-worker.ts"), {});
    try {
      // The short request's lease arms at once, and so proves the Worker's timers to the next.
      await (await mf.dispatchFetch("http://worker/short")).text();
      const waiting = (await (
        await mf.dispatchFetch("http://worker/long?ms=1000&start=unless-stopped-at-once")
      ).json()) as { renewals: number };
      expect(waiting.renewals).toBeGreaterThanOrEqual(5);
    } finally {
      await mf.dispose();
    }
  }, 120_000);
});
