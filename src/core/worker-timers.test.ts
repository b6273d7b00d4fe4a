/**
 * Timers as a Cloudflare Worker has them: on many compatibility dates `setTimeout` returns a number, with no
 * `ref()` or `unref()`. The core must run there, and a call whose claim landed but whose tool could not be
 * started must free the key rather than leave it claimed by nobody.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { idempotent } from "./idempotent.js";
import { memoryStore } from "./memory-store.js";

const realSetTimeout = globalThis.setTimeout as (...args: unknown[]) => NodeJS.Timeout;

afterEach(() => {
  vi.unstubAllGlobals();
});

describe("the core where timers are numbers", () => {
  it("runs the tool once and replays it when setTimeout returns a number", async () => {
    // Node's clearTimeout takes a timer's number as well as the timer, so only the returned value changes.
    vi.stubGlobal("setTimeout", (fn: () => void, ms?: number, ...args: unknown[]) =>
      Number(realSetTimeout(fn, ms, ...args)),
    );
    const store = memoryStore();
    let runs = 0;
    const send = idempotent(
      async (input: { to: string }) => {
        runs++;
        return `sent to ${input.to}`;
      },
      { name: "send", store, effect: "irreversible" },
    );
    const first = await send({ to: "ada" }, { key: "k1" });
    const again = await send({ to: "ada" }, { key: "k1" });
    expect(runs).toBe(1);
    expect(first).toMatchObject({ result: "sent to ada", was_replay: false });
    expect(again).toMatchObject({ result: "sent to ada", was_replay: true });
  });

  it("frees the key when the tool cannot be started after the claim landed, so a retry runs it", async () => {
    const store = memoryStore();
    let runs = 0;
    const send = idempotent(
      async () => {
        runs++;
        return "sent";
      },
      { name: "send", store, effect: "irreversible" },
    );
    vi.stubGlobal("setTimeout", () => {
      throw new Error("no timers here");
    });
    await expect(send({}, { key: "k2" })).rejects.toThrow("no timers here");
    expect(runs).toBe(0);
    expect(await store.get({ scope: "default", key: "k2" }, Date.now())).toBeUndefined();
    vi.unstubAllGlobals();
    await expect(send({}, { key: "k2" })).resolves.toMatchObject({ result: "sent", was_replay: false });
    expect(runs).toBe(1);
  });
});
