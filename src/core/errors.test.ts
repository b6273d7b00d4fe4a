import { describe, expect, it } from "vitest";
import { iso, retryAfterMsOf } from "./errors.js";
import { claimedRecord } from "./store.js";

describe("iso", () => {
  it("formats epoch ms exactly as Date#toISOString, across the fast range and its edges", () => {
    const samples = [
      0, 1, 999, 1000, 86_399_999, 86_400_000, 951_782_400_000 /* 2000-02-29 */, 951_868_800_000,
      4_107_542_400_000 /* 2100-03-01 */, 1_767_225_600_000, 253_402_300_799_999 /* 9999-12-31 */,
      253_402_300_800_000, -1, -62_198_755_200_000, 8.64e15, 1.5,
    ];
    // A deterministic spread over 1970–9999, every leap-year rule included.
    let x = 12_345;
    for (let i = 0; i < 20_000; i++) {
      x = (x * 1_103_515_245 + 12_345) % 2 ** 31;
      samples.push(Math.floor((x / 2 ** 31) * 253_402_300_800_000));
    }
    for (const ms of samples) expect(iso(ms), String(ms)).toBe(new Date(ms).toISOString());
  });

  it("stays exact when the same seconds come back, interleaved (the envelope's two times per call)", () => {
    const created = 1_767_225_599_000; // 2025-12-31T23:59:59.000Z
    const expires = created + 86_400_000;
    for (let ms = 0; ms < 3_000; ms += 7) {
      for (const at of [created + ms, expires + ms, created + 2 * ms, expires - ms]) {
        expect(iso(at), String(at)).toBe(new Date(at).toISOString());
      }
    }
  });

  it("throws as Date does for a time no Date can hold", () => {
    expect(() => iso(Number.NaN)).toThrow(RangeError);
    expect(() => iso(8.64e15 + 1)).toThrow(RangeError);
  });
});

describe("retryAfterMsOf", () => {
  const claim = { scope: "s", key: "k", tool: "t", fingerprint: "f", token: "o", ttlMs: 60_000 };

  it("is the time until the holder's lease passes, whether that is 134 ms or 42 s away", () => {
    expect(retryAfterMsOf(claimedRecord({ ...claim, leaseMs: 1_000, now: 0 }, 0), 866)).toBe(134);
    expect(retryAfterMsOf(claimedRecord({ ...claim, leaseMs: 45_000, now: 0 }, 0), 3_000)).toBe(42_000);
  });

  it("is at least 100 ms, and never more than the holder's lease when its clock ran ahead of ours", () => {
    expect(retryAfterMsOf(claimedRecord({ ...claim, leaseMs: 1_000, now: 0 }, 0), 999)).toBe(100);
    // A writer 30 s ahead: its lease looks 75 s away to us, but it took only 45 s.
    expect(retryAfterMsOf(claimedRecord({ ...claim, leaseMs: 45_000, now: 30_000 }, 30_000), 0)).toBe(45_000);
  });
});
