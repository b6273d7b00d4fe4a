/**
 * `durableObjectStoreClient` and the stubs it sends through, in workerd: calls through one stub reach the
 * object in order; after a stub breaks the client takes a new one; and a claim held by the broken stub that
 * reaches the object after the core released it never lands (the object remembers the released token).
 * The stories run in the Worker (test/fixtures/cloudflare/stub-worker.ts); a wrapper stub only injects the
 * failure of a lost connection.
 */
import { join } from "node:path";
import type { Miniflare } from "miniflare";
import { afterAll, beforeAll, expect, it } from "vitest";
import { startWorker } from "./fixtures/workerd.js";

let mf: Miniflare;
let objects = 0;

beforeAll(async () => {
  mf = await startWorker(join(import.meta.dirname, "fixtures/cloudflare/stub-worker.ts"), {
    RECORDS: "Records",
  });
}, 60_000);

afterAll(async () => {
  await mf?.dispose();
});

async function story(path: string): Promise<unknown> {
  const response = await mf.dispatchFetch(`http://stubs${path}?object=stubs-${++objects}`);
  expect(response.status).toBe(200);
  return response.json();
}

it("delivers calls sent through one stub without waiting in the order they were sent", async () => {
  const outcomes = await story("/in-order");
  // Each claim finds the key free because the release before it came first, and each release frees it.
  expect(outcomes).toEqual(Array.from({ length: 20 }, () => ({ value: true })));
});

it("takes a new stub after a call fails with a lost connection, and keeps it on the object's own errors", async () => {
  const steps = await story("/replaced");
  expect(steps).toEqual([
    { step: "claim", stubsTaken: 1, outcome: { value: true } },
    { step: "get, connection lost", stubsTaken: 1, outcome: { error: "Network connection lost." } },
    { step: "get, new stub", stubsTaken: 2, outcome: { value: "token-a" } },
    { step: "release", stubsTaken: 2, outcome: { value: true } },
    {
      step: "claim, released token",
      stubsTaken: 2,
      outcome: { error: expect.stringMatching(/released before it arrived/) },
    },
    { step: "claim, new token", stubsTaken: 2, outcome: { value: true } },
  ]);
});

it("never lets a claim held by a broken stub land after the core released it: a repeat runs the tool once", async () => {
  const answer = (await story("/late-claim")) as {
    first: { code?: string };
    late: { value?: unknown; error?: string };
    repeat: { value?: { was_replay: boolean; result: unknown } };
    effects: number;
    stubsTaken: number;
  };
  // The caller heard the store was unavailable and did not run the tool; the release went on a new stub.
  expect(answer.first.code).toBe("store_unavailable");
  expect(answer.stubsTaken).toBe(2);
  // The claim reached the object after its release and was refused.
  expect(answer.late).toEqual({ error: expect.stringMatching(/released before it arrived/) });
  // The key was free: the repeat ran the tool, once.
  expect(answer.repeat.value).toMatchObject({
    was_replay: false,
    result: { sentTo: "alice@example.com", n: 1 },
  });
  expect(answer.effects).toBe(1);
});
