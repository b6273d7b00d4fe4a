import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { sameLengthDeadlines } from "./deadlines.js";

describe("sameLengthDeadlines", () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "performance", "Date"] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("fires each deadline at its own time, in order, never early, on one timer", async () => {
    const deadline = sameLengthDeadlines(100);
    const fired: string[] = [];
    deadline(() => fired.push("a"));
    await vi.advanceTimersByTimeAsync(30);
    deadline(() => fired.push("b"));
    await vi.advanceTimersByTimeAsync(30);
    deadline(() => fired.push("c"));
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(39);
    expect(fired).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(fired).toEqual(["a"]);
    await vi.advanceTimersByTimeAsync(29);
    expect(fired).toEqual(["a"]);
    await vi.advanceTimersByTimeAsync(1);
    expect(fired).toEqual(["a", "b"]);
    await vi.advanceTimersByTimeAsync(30);
    expect(fired).toEqual(["a", "b", "c"]);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("a deadline whose onExpire throws leaves the ones behind it on a timer", async () => {
    const deadline = sameLengthDeadlines(100);
    const fired: string[] = [];
    deadline(() => {
      throw new Error("onExpire failed");
    });
    deadline(() => fired.push("same time"));
    await vi.advanceTimersByTimeAsync(10);
    deadline(() => fired.push("later"));
    await expect(vi.advanceTimersByTimeAsync(90)).rejects.toThrow("onExpire failed");
    await vi.advanceTimersByTimeAsync(1);
    expect(fired).toEqual(["same time"]);
    await vi.advanceTimersByTimeAsync(9);
    expect(fired).toEqual(["same time", "later"]);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("a cleared deadline never fires; clear() tells whether the work beat it", async () => {
    const deadline = sameLengthDeadlines(100);
    const fired: string[] = [];
    const early = deadline(() => fired.push("early"));
    const late = deadline(() => fired.push("late"));
    await vi.advanceTimersByTimeAsync(50);
    expect(early.clear()).toBe(true);
    expect(early.clear()).toBe(true);
    await vi.advanceTimersByTimeAsync(50);
    expect(fired).toEqual(["late"]);
    expect(late.clear()).toBe(false);
  });

  it("clearing the oldest leaves the others on time", async () => {
    const deadline = sameLengthDeadlines(100);
    const fired: number[] = [];
    const first = deadline(() => fired.push(1));
    await vi.advanceTimersByTimeAsync(10);
    deadline(() => fired.push(2));
    await vi.advanceTimersByTimeAsync(10);
    deadline(() => fired.push(3));
    first.clear();
    await vi.advanceTimersByTimeAsync(89);
    expect(fired).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(fired).toEqual([2]);
    await vi.advanceTimersByTimeAsync(10);
    expect(fired).toEqual([2, 3]);
  });

  it("starts again after going idle", async () => {
    const deadline = sameLengthDeadlines(100);
    const fired: number[] = [];
    deadline(() => fired.push(1)).clear();
    await vi.advanceTimersByTimeAsync(500);
    deadline(() => fired.push(2));
    await vi.advanceTimersByTimeAsync(99);
    expect(fired).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(fired).toEqual([2]);
  });
});
