/** examples/otel-spans.ts runs as users would run it, checks itself, and exits 0. */
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { expect, it } from "vitest";

const run = promisify(execFile);
const root = join(import.meta.dirname, "..");

it("runs examples/otel-spans.ts: a span per call, and the counters", async () => {
  const { stdout } = await run(process.execPath, ["--import", "tsx", "examples/otel-spans.ts"], {
    cwd: root,
  });
  expect(stdout).toContain("idempotool send_email: completed, was_replay=false, events=run → completed");
  expect(stdout).toContain("events=in_flight_wait → replay");
  expect(stdout).toContain("runs=1 replays=2 waits=1");
}, 60_000);
