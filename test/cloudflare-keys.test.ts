/**
 * Keys the conformance suite does not try, against durableObjectStore in workerd:
 * NUL inside a key or scope, case, and Unicode normalisation (NFC vs NFD) must each stay distinct records.
 */
import { join } from "node:path";
import type { Miniflare } from "miniflare";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { durableObjectStoreClient, type StoreCall } from "../src/cloudflare/index.js";
import { claimRequest } from "./fixtures/claim-request.js";
import { decode, encode } from "./fixtures/cloudflare/json-bridge.js";
import { startWorker } from "./fixtures/workerd.js";

let mf: Miniflare;
beforeAll(async () => {
  mf = await startWorker(join(import.meta.dirname, "fixtures/cloudflare/records-worker.ts"), {
    RECORDS: "Records",
  });
}, 60_000);
afterAll(async () => {
  await mf?.dispose();
});

async function post(path: string, object: string, body?: unknown): Promise<unknown> {
  const response = await mf.dispatchFetch(`http://records${path}?object=${encodeURIComponent(object)}`, {
    method: "POST",
    body: body === undefined ? "" : encode(body),
  });
  const answer = decode(await response.text()) as { value?: unknown; error?: { message: string } };
  if (answer.error) throw new Error(answer.error.message);
  return answer.value;
}

describe("durableObjectStore keeps hostile keys apart", () => {
  it("NUL, case and normalisation variants are distinct records", async () => {
    const object = "hostile-keys";
    await mf.dispatchFetch(`http://records/configure?object=${object}&clock=request`);
    const store = durableObjectStoreClient({
      idempotency: async (call: StoreCall) => post("/", object, call),
    });
    const pairs: [string, string][] = [
      ["tenant-a", "k\u0000one"],
      ["tenant-a", "k\u0000two"],
      ["tenant-a", "k"],
      ["t\u0000x", "k"],
      ["t\u0000y", "k"],
      ["tenant-a", "Order-1"],
      ["tenant-a", "order-1"],
      ["tenant-a", "caf\u00e9"],
      ["tenant-a", "cafe\u0301"],
    ];
    for (const [i, [scope, key]] of pairs.entries()) {
      const result = await store.claim(claimRequest({ scope, key, token: `token-${i}`, now: 1_000 }));
      expect(result.claimed, `${JSON.stringify([scope, key])} was taken for another record`).toBe(true);
      expect(result.record.key).toBe(key);
      expect(result.record.scope).toBe(scope);
    }
    for (const [i, [scope, key]] of pairs.entries()) {
      const record = await store.get({ scope, key }, 2_000);
      expect(record?.token, JSON.stringify([scope, key])).toBe(`token-${i}`);
      expect(record?.key).toBe(key);
    }
  });
});
