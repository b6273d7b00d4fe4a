import { describe, expect, it } from "vitest";
import { type Judged, resolveRetryCall, retryCall } from "./retry-call.js";

const config = resolveRetryCall("test", {
  retry: { maxAttempts: 3, initialDelayMs: 1 },
  clock: { now: () => 0, sleep: async () => {} },
  random: () => 0,
});

class Lost extends Error {}
class Definite extends Error {}
const judge = (error: unknown): Judged =>
  error instanceof Definite ? "answer" : error instanceof Lost ? "connection_lost" : "no_answer";

describe("retryCall", () => {
  it("passes a definite answer from the first attempt on at once", async () => {
    let attempts = 0;
    const outcome = retryCall(
      config,
      async () => {
        attempts++;
        throw new Definite("Tool not found");
      },
      judge,
      undefined,
    );
    await expect(outcome).rejects.toBeInstanceOf(Definite);
    expect(attempts).toBe(1);
  });

  it("ends as unanswered when an error answer follows an attempt that got none: the first may have run", async () => {
    const errors = [new Error("timed out"), new Definite("Tool disabled")];
    const outcome = await retryCall(
      config,
      async () => {
        throw errors.shift();
      },
      judge,
      undefined,
    );
    expect(outcome).toMatchObject({ answered: false, attempts: 2 });
    expect(outcome.answered === false && outcome.lastError).toBeInstanceOf(Definite);
  });

  it("counts a reconnect that throws as one more unanswered attempt, whatever it throws", async () => {
    let reconnects = 0;
    let sent = 0;
    const outcome = await retryCall(
      config,
      async () => {
        sent++;
        throw new Lost("connection closed");
      },
      judge,
      undefined,
      async () => {
        reconnects++;
        throw new Definite("HTTP 503 while connecting");
      },
    );
    expect(outcome).toMatchObject({ answered: false, attempts: 3 });
    expect(sent).toBe(1);
    expect(reconnects).toBe(2);
  });

  it("sends again once a reconnect succeeds", async () => {
    const results = [new Lost("connection closed")];
    const outcome = await retryCall(
      config,
      async () => {
        const error = results.shift();
        if (error) throw error;
        return "sent";
      },
      judge,
      undefined,
      async () => {},
    );
    expect(outcome).toEqual({ answered: true, value: "sent", attempts: 2 });
  });
});
