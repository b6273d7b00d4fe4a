import { describe, expect, it } from "vitest";
import { aboutDuration, iso, parseDuration, shortDuration } from "./time.js";

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

  it("stays exact when more seconds and days take turns than it keeps, across midnights", () => {
    const midnight = 1_767_225_600_000; // 2026-01-01T00:00:00.000Z
    const times: number[] = [];
    for (let day = 0; day < 7; day++) {
      for (const offset of [-1_001, -1, 0, 999, 1_000]) times.push(midnight + day * 86_400_000 + offset);
    }
    for (let round = 0; round < 3; round++) {
      for (const at of times) expect(iso(at), String(at)).toBe(new Date(at).toISOString());
      times.reverse();
    }
  });

  it("throws as Date does for a time no Date can hold", () => {
    expect(() => iso(Number.NaN)).toThrow(RangeError);
    expect(() => iso(8.64e15 + 1)).toThrow(RangeError);
  });
});

describe("aboutDuration", () => {
  it("keeps each figure in the unit that tells the truth about it", () => {
    expect(aboutDuration(0.4)).toBe("about 1 ms");
    expect(aboutDuration(134)).toBe("about 134 ms");
    expect(aboutDuration(999)).toBe("about 999 ms");
    expect(aboutDuration(999.6)).toBe("about 1 second");
    expect(aboutDuration(1_499)).toBe("about 1 second");
    expect(aboutDuration(2_600)).toBe("about 3 seconds");
    expect(aboutDuration(42_000)).toBe("about 42 seconds");
    expect(aboutDuration(119_000)).toBe("about 119 seconds");
    expect(aboutDuration(150_000)).toBe("about 3 minutes");
    expect(aboutDuration(60 * 60_000)).toBe("about 60 minutes");
    expect(aboutDuration(3 * 3_600_000)).toBe("about 3 hours");
  });
});

describe("shortDuration", () => {
  it("gives the largest whole unit, rounded down, and 0s for a time already past", () => {
    expect(shortDuration(-5_000)).toBe("0s");
    expect(shortDuration(999)).toBe("0s");
    expect(shortDuration(59_999)).toBe("59s");
    expect(shortDuration(60_000)).toBe("1m");
    expect(shortDuration(3_599_999)).toBe("59m");
    expect(shortDuration(3_600_000)).toBe("1h");
    expect(shortDuration(86_399_999)).toBe("23h");
    expect(shortDuration(10 * 86_400_000)).toBe("10d");
  });
});

describe("parseDuration", () => {
  it("reads a whole number and one unit, in milliseconds", () => {
    expect(parseDuration("500ms")).toBe(500);
    expect(parseDuration("90s")).toBe(90_000);
    expect(parseDuration(" 10m ")).toBe(600_000);
    expect(parseDuration("2h")).toBe(7_200_000);
    expect(parseDuration("7d")).toBe(604_800_000);
    expect(parseDuration("1w")).toBe(604_800_000);
  });

  it("reads nothing else", () => {
    for (const text of ["soon", "10", "1.5h", "-1m", "10 m", "10M", "m", ""]) {
      expect(parseDuration(text), text).toBeUndefined();
    }
  });
});
