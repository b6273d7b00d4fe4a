/**
 * `idempotool chaos` in this process, on sources that run in it: a tool that proves nothing, and a module or
 * arguments it cannot use. The crash source starts a child, so the runs that include it are in
 * test/cli-chaos-crash.test.ts; test/cli-bin.test.ts spawns the built binary on a TypeScript module.
 */
import { describe, expect, it } from "vitest";
import { cli } from "./fixtures/cli-binary.js";

const tools = "test/fixtures/chaos-send-email.ts";

describe("idempotool chaos <module>#<export>", () => {
  it("exits 1 when a source proves nothing: the tool never calls its probe", async () => {
    const { code, stdout } = await cli(["chaos", `${tools}#silentTool`, "--only", "transport_retry"]);
    expect(code).toBe(1);
    expect(stdout).toContain("inconclusive");
  }, 60_000);
});

describe("idempotool chaos when it cannot run: one line, exit 2", () => {
  it.each([
    { what: "a missing export", argv: [`${tools}#nope`], message: /has no export "nope"/ },
    { what: "a missing module", argv: ["./no/such/tools.ts#send"], message: /there is no module at/ },
    {
      what: "an export that is no tool",
      argv: [`${tools}#notATool`],
      message: /is a number, not a wrapped tool/,
    },
    {
      what: "arguments that are not JSON",
      argv: [`${tools}#safeSendEmail`, "--args", "{to:"],
      message: /--args is not JSON/,
    },
  ])("$what", async ({ argv, message }) => {
    const { code, stderr } = await cli(["chaos", ...argv]);
    expect(code).toBe(2);
    expect(stderr).toMatch(message);
    expect(stderr.trim().split("\n")).toHaveLength(1);
  });

  it("an unknown source", async () => {
    const { code, stderr } = await cli(["chaos", `${tools}#safeSendEmail`, "--only", "solar_flare"]);
    expect(code).toBe(2);
    expect(stderr).toBe(
      'idempotool: --only must name sources from transport_retry, framework_resume, duplicate_emission, user_retry, crash, comma-separated, not "solar_flare"; see idempotool chaos --help\n',
    );
  });
});
