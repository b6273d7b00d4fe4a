/**
 * `idempotool chaos` as users run it: the built binary loads a TypeScript module (through tsx), runs
 * the tool under every repeat source with progress per source, and exits 1 on a double effect.
 */
import { beforeAll, describe, expect, it } from "vitest";
import type { ChaosReport } from "../src/chaos/index.js";
import { ensureBuilt, idempotool } from "./fixtures/cli-binary.js";

const tools = "test/fixtures/chaos-send-email.ts";
const args = ["--args", JSON.stringify({ to: "alice@example.com", subject: "Minutes" })];

beforeAll(ensureBuilt, 180_000);

describe("idempotool chaos <module>#<export>", () => {
  it("finds double effects in a plain send_email under every source and exits 1", async () => {
    const { code, stdout, stderr } = await idempotool(["chaos", `${tools}#unsafeSendEmail`, ...args]);
    expect(code, stderr).toBe(1);
    expect(stdout).toContain("idempotool chaos: sendEmail (a plain function)");
    for (const title of [
      "transport retry after success",
      "framework resume with the same key",
      "duplicate emission, two concurrent calls",
      "user retry while the first call runs",
      "SIGKILL after the effect, then a retry",
    ]) {
      expect(stdout).toMatch(new RegExp(`${title}\\s+2\\s+DOUBLE EFFECT`));
    }
    expect(stdout).toContain("5 of 5 repeat sources produced a double effect");
    expect(stdout).toContain("Wrap the tool with idempotent()");
    // Progress per source goes to stderr, one line each when not on a TTY.
    expect(stderr).toContain("[1/5] transport retry after success …");
    expect(stderr).toContain("[5/5] SIGKILL after the effect, then a retry …");
  }, 90_000);

  it("passes the same tool wrapped with idempotent() and exits 0", async () => {
    const { code, stdout, stderr } = await idempotool(["chaos", `${tools}#safeSendEmail`, ...args]);
    expect(code, stderr).toBe(0);
    expect(stdout).toContain("idempotool chaos: send_email (wrapped with idempotent())");
    expect(stdout).toMatch(
      /SIGKILL after the effect, then a retry\s+1\s+pass\s+killed after the effect, outcome_unknown/,
    );
    expect(stdout).not.toContain("DOUBLE EFFECT");
    expect(stdout).toContain("Every repeat source produced one effect for one intended call.");
  }, 90_000);

  it("prints the report as JSON, for the sources asked for", async () => {
    const { code, stdout } = await idempotool([
      "chaos",
      `${tools}#memorySendEmail`,
      ...args,
      "--only",
      "duplicate_emission,crash",
      "--json",
    ]);
    expect(code).toBe(1);
    const report = JSON.parse(stdout) as ChaosReport & { module: string };
    expect(report.module).toBe(`${tools}#memorySendEmail`);
    expect(report.sources.map((s) => [s.source, s.verdict])).toEqual([
      ["duplicate_emission", "pass"],
      ["crash", "double_effect"],
    ]);
  }, 90_000);

  it("exits 1 when a source proves nothing: the tool never calls its probe", async () => {
    const { code, stdout } = await idempotool(["chaos", `${tools}#silentTool`, "--only", "transport_retry"]);
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
    const { code, stderr } = await idempotool(["chaos", ...argv]);
    expect(code).toBe(2);
    expect(stderr).toMatch(message);
    expect(stderr.trim().split("\n")).toHaveLength(1);
  });

  it("an unknown source", async () => {
    const { code, stderr } = await idempotool(["chaos", `${tools}#safeSendEmail`, "--only", "solar_flare"]);
    expect(code).toBe(2);
    expect(stderr).toBe(
      'idempotool: --only must name sources from transport_retry, framework_resume, duplicate_emission, user_retry, crash, comma-separated, not "solar_flare"; see idempotool chaos --help\n',
    );
  });
});
