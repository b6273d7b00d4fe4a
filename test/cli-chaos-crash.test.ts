/**
 * `idempotool chaos` in this process under every repeat source, the crash source among them (it runs the
 * tool in a child process and SIGKILLs it after the effect): a wrapped tool passes and exits 0, a plain one
 * doubles its effect and exits 1.
 */
import { describe, expect, it } from "vitest";
import type { ChaosReport } from "../src/chaos/index.js";
import { cli } from "./fixtures/cli-binary.js";

const tools = "test/fixtures/chaos-send-email.ts";
const args = ["--args", JSON.stringify({ to: "alice@example.com", subject: "Minutes" })];

describe("idempotool chaos <module>#<export>, the crash source included", () => {
  it("passes the same tool wrapped with idempotent() and exits 0", async () => {
    const { code, stdout, stderr } = await cli(["chaos", `${tools}#safeSendEmail`, ...args]);
    expect(code, stderr).toBe(0);
    expect(stdout).toContain("idempotool chaos: send_email (wrapped with idempotent())");
    expect(stdout).toMatch(
      /SIGKILL after the effect, then a retry\s+1\s+pass\s+killed after the effect, outcome_unknown/,
    );
    expect(stdout).not.toContain("DOUBLE EFFECT");
    expect(stdout).toContain("Every repeat source produced one effect for one intended call.");
  }, 90_000);

  it("prints the report as JSON, for the sources asked for", async () => {
    const { code, stdout } = await cli([
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
});
