/**
 * `chaos()` from idempotool/chaos: a tool under every repeat source of DESIGN §1, effects counted by
 * a probe across processes. A plain function must show double effects; the same tool wrapped with
 * idempotent() must produce one effect per intended call under every source, the crash included.
 */
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  type ChaosContext,
  type ChaosProgress,
  chaos,
  chaosProbe,
  RepeatSource,
  type SourceResult,
} from "../src/chaos/index.js";
import { idempotent, isIdempotencyError } from "../src/index.js";

const tools = join(import.meta.dirname, "fixtures", "chaos-send-email.ts");
const args = { to: "alice@example.com", subject: "Minutes" };
const verdicts = (sources: readonly SourceResult[]) =>
  Object.fromEntries(sources.map((s) => [s.source, s.verdict]));
const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe("chaos() against a plain, non-idempotent send_email", () => {
  it("reports a double effect under every repeat source, the crash in a child process included", async () => {
    const report = await chaos(`${tools}#unsafeSendEmail`, { args });
    expect(report).toMatchObject({ tool: "sendEmail", kind: "plain", ok: false });
    expect(verdicts(report.sources)).toEqual({
      transport_retry: "double_effect",
      framework_resume: "double_effect",
      duplicate_emission: "double_effect",
      user_retry: "double_effect",
      crash: "double_effect",
    });
    for (const source of report.sources) expect(source.effects, source.source).toBe(2);
    const crash = report.sources.find((s) => s.source === "crash");
    expect(crash?.outcomes).toEqual(["killed after the effect", "returned"]);
    expect(crash?.detail).toContain("the retry after the crash ran the effect again");
  }, 60_000);
});

describe("chaos() against the same send_email wrapped with idempotent()", () => {
  it("counts one effect per intended call under every source", async () => {
    const report = await chaos(`${tools}#safeSendEmail`, { args });
    expect(report).toMatchObject({ tool: "send_email", kind: "idempotent", ok: true });
    for (const source of report.sources) {
      expect(source.verdict, `${source.source}: ${source.detail}`).toBe("pass");
      expect(source.effects).toBe(1);
    }
    const outcomes = Object.fromEntries(report.sources.map((s) => [s.source, s.outcomes]));
    expect(outcomes.transport_retry).toEqual(["ran", "replay"]);
    expect(outcomes.framework_resume).toEqual(["ran", "replay"]);
    expect([...(outcomes.duplicate_emission ?? [])].sort()).toEqual(["ran", "replay"]);
    expect(outcomes.user_retry).toEqual(["ran", "replay"]);
    // The crashed worker's email went out and nobody recorded it: the retry fails closed instead of resending.
    expect(outcomes.crash).toEqual(["killed after the effect", "outcome_unknown"]);
  }, 60_000);

  it("finds the one hole of an in-memory store: the record does not survive the crash", async () => {
    const report = await chaos(`${tools}#memorySendEmail`, { args });
    expect(report.kind).toBe("idempotent");
    expect(verdicts(report.sources)).toEqual({
      transport_retry: "pass",
      framework_resume: "pass",
      duplicate_emission: "pass",
      user_retry: "pass",
      crash: "double_effect",
    });
    expect(report.sources.find((s) => s.source === "framework_resume")?.detail).toContain("same instance");
  }, 60_000);
});

describe("chaos() given the tool itself", () => {
  const factory = ({ store, probe, leaseMs }: ChaosContext) =>
    idempotent(
      async (email: { to: string }) => {
        probe(email);
        return "sent";
      },
      { name: "send_email", store, leaseMs },
    );

  it("runs the in-process sources and skips the crash without a module to load in a child", async () => {
    const report = await chaos(factory, { args, sources: [RepeatSource.transportRetry, RepeatSource.crash] });
    expect(verdicts(report.sources)).toEqual({ transport_retry: "pass", crash: "skipped" });
    expect(report.ok).toBe(true);
    expect(report.sources[1]?.detail).toContain("options.module");
  });

  it("runs the crash too when told which module the child should load", async () => {
    const report = await chaos(factory, {
      args,
      sources: [RepeatSource.crash],
      module: `${tools}#safeSendEmail`,
    });
    expect(verdicts(report.sources)).toEqual({ crash: "pass" });
  }, 60_000);

  it("calls a tool that never reaches its probe inconclusive", async () => {
    const report = await chaos(`${tools}#silentTool`, { sources: [RepeatSource.transportRetry] });
    expect(report.ok).toBe(false);
    expect(report.sources[0]).toMatchObject({
      verdict: "inconclusive",
      effects: 0,
      outcomes: ["returned", "returned"],
    });
    expect(report.sources[0]?.detail).toContain("probe()");
  });

  it("reports progress as each source starts and ends", async () => {
    const seen: string[] = [];
    const onProgress = (p: ChaosProgress) => seen.push(`${p.phase} ${p.index + 1}/${p.total} ${p.source}`);
    await chaos(factory, { args, sources: ["transport_retry", "user_retry"], onProgress });
    expect(seen).toEqual([
      "start 1/2 transport_retry",
      "end 1/2 transport_retry",
      "start 2/2 user_retry",
      "end 2/2 user_retry",
    ]);
  });

  it("keeps the store and the probe file in dir, and removes its temporary folder otherwise", async () => {
    const dir = mkdtempSync(join(tmpdir(), "idempotool-chaos-kept-"));
    dirs.push(dir);
    const report = await chaos(factory, { args, sources: ["transport_retry"], dir });
    expect(report.dir).toBe(dir);
    const files = readdirSync(dir);
    expect(files.some((f) => f.endsWith(".db"))).toBe(true);
    expect(files.some((f) => f.endsWith("-effects.jsonl"))).toBe(true);
  });
});

describe("chaos() refuses what it cannot run", () => {
  const refused = async (run: () => Promise<unknown>, message: RegExp) => {
    const error = await run().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isIdempotencyError(error, "invalid_options"), String(error)).toBe(true);
    expect((error as Error).message).toMatch(message);
  };

  it("a missing module, a missing export, an export that is no tool", async () => {
    await refused(() => chaos("./no/such/module.ts#tool"), /no module at/);
    await refused(() => chaos(`${tools}#nope`), /no export "nope" \(it exports .*safeSendEmail/);
    await refused(() => chaos(`${tools}#notATool`), /is a number, not a wrapped tool or a factory/);
  });

  it("a factory that returns no function", async () => {
    await refused(
      () => chaos((() => 42) as never, { sources: ["transport_retry"] }),
      /factory returned number/,
    );
  });

  it("bad options, by name", async () => {
    await refused(
      () => chaos(`${tools}#safeSendEmail`, { sources: ["lunar_eclipse" as never] }),
      /`sources`/,
    );
    await refused(() => chaos(`${tools}#safeSendEmail`, { leaseMs: -1 }), /`leaseMs`/);
  });
});

describe("chaosProbe()", () => {
  it("does nothing outside a chaos run, so it may stay in the tool", async () => {
    await chaos(`${tools}#safeSendEmail`, { args, sources: ["transport_retry"] });
    // The run's probe file was set for the run only.
    expect(process.env.IDEMPOTOOL_CHAOS_PROBE).toBeUndefined();
    expect(() => chaosProbe({ to: "alice@example.com" })).not.toThrow();
  });
});
