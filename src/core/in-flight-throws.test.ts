/**
 * The in-process registry failing under a call (a Map that can hold no more entries throws a RangeError):
 * the call fails, the tool does not run, and the key is free for a repeat, never left claimed by nobody.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { fakeClock } from "../testing/fake-clock.js";
import { StoreUnavailableError } from "./errors.js";
import { idempotent } from "./idempotent.js";
import { memoryStore } from "./memory-store.js";
import type { IdempotencyStore } from "./store.js";

const broken = vi.hoisted(() => ({ beginFlight: false, markClaim: false }));

vi.mock("./in-flight.js", async (importOriginal) => {
  const real = await importOriginal<typeof import("./in-flight.js")>();
  const full = () => new RangeError("Map maximum size exceeded");
  return {
    ...real,
    beginFlight: (...args: Parameters<typeof real.beginFlight>) => {
      if (broken.beginFlight) throw full();
      return real.beginFlight(...args);
    },
    markClaim: (...args: Parameters<typeof real.markClaim>) => {
      if (broken.markClaim) throw full();
      return real.markClaim(...args);
    },
  };
});

afterEach(() => {
  broken.beginFlight = false;
  broken.markClaim = false;
});

function sendTool(store: IdempotencyStore) {
  let runs = 0;
  const tool = idempotent(
    async (args: { to: string }) => {
      runs++;
      return `sent to ${args.to}`;
    },
    { name: "send", store, clock: fakeClock(), effect: "irreversible" },
  );
  return { tool, runs: () => runs };
}

describe("a call whose in-process bookkeeping throws", () => {
  it("frees its claim when registering its flight throws, so a repeat runs the tool", async () => {
    const store = memoryStore();
    const { tool, runs } = sendTool(store);
    broken.beginFlight = true;
    await expect(tool({ to: "a" }, { key: "k" })).rejects.toThrow("Map maximum size exceeded");
    expect(runs()).toBe(0);
    expect(await store.get({ scope: "default", key: "k" }, 0)).toBeUndefined();
    broken.beginFlight = false;
    const again = await tool({ to: "a" }, { key: "k" });
    expect(again.was_replay).toBe(false);
    expect(runs()).toBe(1);
  });

  it("releases its claim only once it is answered when marking it throws", async () => {
    const inner = memoryStore();
    // A store whose claim lands a moment after it is sent, as over a network: a release sent before it
    // lands finds nothing to free.
    const store: IdempotencyStore = {
      ...inner,
      claim: async (request) => {
        await new Promise<void>((resolve) => setImmediate(resolve));
        return inner.claim(request);
      },
    };
    const { tool, runs } = sendTool(store);
    broken.markClaim = true;
    const error = await tool({ to: "a" }, { key: "k" }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect(runs()).toBe(0);
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(await inner.get({ scope: "default", key: "k" }, 0)).toBeUndefined();
    broken.markClaim = false;
    const again = await tool({ to: "a" }, { key: "k" });
    expect(again.was_replay).toBe(false);
    expect(runs()).toBe(1);
  });
});
