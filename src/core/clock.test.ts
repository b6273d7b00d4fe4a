import { describe, expect, it } from "vitest";
import { systemClock } from "./clock.js";

describe("systemClock.sleep and the event loop", () => {
  const timeouts = () => process.getActiveResourcesInfo().filter((kind) => kind === "Timeout").length;

  it("keeps the process alive while it sleeps, unless asked not to (ref: false)", async () => {
    const stop = new AbortController();
    const idle = timeouts();
    const background = systemClock.sleep(60_000, stop.signal, { ref: false }).catch(() => "stopped");
    expect(timeouts()).toBe(idle);
    const foreground = systemClock.sleep(60_000, stop.signal).catch(() => "stopped");
    expect(timeouts()).toBe(idle + 1);
    stop.abort();
    expect(await Promise.all([background, foreground])).toEqual(["stopped", "stopped"]);
    expect(timeouts()).toBe(idle);
  });

  it("resolves after the time has passed, whether or not it keeps the process alive", async () => {
    await systemClock.sleep(1, undefined, { ref: false });
    await systemClock.sleep(1);
  });
});
