/** The OpenAI and Anthropic loop examples run as users would run them, check themselves, and exit 0. */
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { expect, it } from "vitest";

const run = promisify(execFile);
const root = join(import.meta.dirname, "..");

async function example(file: string): Promise<string> {
  // execFile rejects on a non-zero exit, so a returned stdout means the example exited 0.
  const { stdout } = await run(process.execPath, ["--import", "tsx", `examples/${file}`], { cwd: root });
  return stdout;
}

it("runs examples/openai-tool-loop.ts: one ticket per intent over Chat Completions and Responses, exit 0", async () => {
  const stdout = await example("openai-tool-loop.ts");
  expect(stdout).toContain("call_2 -> T-101 (was_replay: the tool did not run again)");
  expect(stdout).toContain("call_9 -> T-102\n");
  expect(stdout).toContain("fc_call_2 -> T-103 (was_replay: the tool did not run again)");
  expect(stdout).toContain("OK: 6 tool calls over 3 turns, 3 tickets, one per intent.");
}, 90_000);

it("runs examples/anthropic-tool-loop.ts: one email per intent across a restart, exit 0", async () => {
  const stdout = await example("anthropic-tool-loop.ts");
  expect(stdout).toContain("toolu_3 -> msg-1 to alice@example.com (was_replay)");
  expect(stdout).toContain("toolu_4 -> msg-2 to bob@example.com\n");
  expect(stdout).toContain("OK: 5 send_email calls over 2 turns and a restart, 3 emails, one per intent.");
}, 90_000);
