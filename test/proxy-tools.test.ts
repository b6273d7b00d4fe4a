/** Which tools the proxy guards, how a guarded tool is listed, and the rules a user gives. */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { runCli } from "../src/cli/main.js";
import { guardedTool, guardOf, readToolRules, toolRuleFlag, unknownToolsIn } from "../src/cli/proxy-tools.js";
import { keyDescription } from "../src/mcp/key-description.js";
import { cli } from "./fixtures/cli-binary.js";

const none = new Map();
const schema = (properties: Record<string, unknown> = {}) => ({ type: "object", properties });

describe("guardOf", () => {
  it("guards side-effectful tools under irreversible, and passes read-only ones by hint or by name", () => {
    expect(guardOf({ name: "send_email", inputSchema: schema() }, none)).toMatchObject({
      guarded: true,
      effect: "irreversible",
    });
    expect(guardOf({ name: "get_weather", inputSchema: schema() }, none).guarded).toBe(false);
    expect(
      guardOf({ name: "send_digest", inputSchema: schema(), annotations: { readOnlyHint: true } }, none)
        .guarded,
    ).toBe(false);
  });

  it("guards a tool nothing says only reads", () => {
    expect(guardOf({ name: "frobnicate", inputSchema: schema() }, none)).toMatchObject({
      guarded: true,
      why: "nothing says it only reads",
    });
  });

  it("follows the user's rule over the classification", () => {
    const rules = new Map([
      ["send_email", "read-only" as const],
      ["get_weather", "native-key" as const],
    ]);
    expect(guardOf({ name: "send_email", inputSchema: schema() }, rules).guarded).toBe(false);
    expect(guardOf({ name: "get_weather", inputSchema: schema() }, rules)).toMatchObject({
      guarded: true,
      effect: "native-key",
    });
  });

  it("keeps guarding a tool guarded before when only its classification now says it reads", () => {
    const relabelled = { name: "send_digest", inputSchema: schema(), annotations: { readOnlyHint: true } };
    const before = new Set(["send_digest"]);
    expect(guardOf(relabelled, none, before)).toMatchObject({ guarded: true, effect: "irreversible" });
    expect(guardOf(relabelled, new Map([["send_digest", "read-only" as const]]), before).guarded).toBe(false);
  });

  it("leaves a tool that takes its own idempotency_key to the server", () => {
    const tool = { name: "charge_card", inputSchema: schema({ idempotency_key: { type: "string" } }) };
    expect(guardOf(tool, none)).toEqual({ guarded: false, why: "it takes its own idempotency_key" });
  });
});

describe("guardedTool", () => {
  it("adds a required idempotency_key described with the window, idempotentHint, and _idempotency to the output", () => {
    const tool = {
      name: "send_email",
      description: "Send an email.",
      inputSchema: { type: "object", properties: { to: { type: "string" } }, required: ["to"] },
      outputSchema: { type: "object", properties: { id: { type: "string" } }, additionalProperties: false },
      annotations: { destructiveHint: false },
    };
    const guarded = guardedTool(tool, 3_600_000);
    expect(guarded.description).toBe("Send an email.");
    expect(guarded.inputSchema).toEqual({
      type: "object",
      properties: {
        to: { type: "string" },
        idempotency_key: {
          type: "string",
          minLength: 1,
          maxLength: 255,
          description: keyDescription(3_600_000),
        },
      },
      required: ["to", "idempotency_key"],
    });
    expect(guarded.annotations).toEqual({ destructiveHint: false, idempotentHint: true });
    expect(Object.keys((guarded.outputSchema as { properties: object }).properties)).toEqual([
      "id",
      "_idempotency",
    ]);
    expect(tool.inputSchema.required).toEqual(["to"]);
  });
});

describe("tool rules", () => {
  let dir: string | undefined;
  afterEach(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });
  const file = (text: string) => {
    dir ??= mkdtempSync(join(tmpdir(), "idempotool-rules-"));
    const path = join(dir, "rules.json");
    writeFileSync(path, text);
    return path;
  };

  it("reads --tool name=effect, and refuses an effect it does not know", () => {
    expect(toolRuleFlag("a=read-only", toolRuleFlag("send=compensatable"))).toEqual(
      new Map([
        ["send", "compensatable"],
        ["a", "read-only"],
      ]),
    );
    expect(() => toolRuleFlag("send=maybe")).toThrow(
      "must be name=effect, the effect one of native-key, owned-store, compensatable, irreversible, read-only",
    );
    expect(() => toolRuleFlag("send")).toThrow("must be name=effect");
  });

  it("says what is wrong with a bad --tool on the command line, and starts nothing", async () => {
    let stderr = "";
    const io = {
      stdout: { write: () => true },
      stderr: {
        write: (text: string) => {
          stderr += text;
          return true;
        },
      },
    };
    const code = await runCli(
      ["node", "idempotool", "proxy", "--tool", "send=maybe", "--", "no-such-server"],
      io as never,
    );
    expect(code).toBe(2);
    expect(stderr).toBe(
      "idempotool: --tool must be name=effect, the effect one of native-key, owned-store, compensatable, " +
        'irreversible, read-only, not "send=maybe"; see idempotool proxy --help\n',
    );
  });

  it("reads the config file, and says what is wrong with a bad one", () => {
    expect(
      readToolRules(file('{ "tools": { "send_email": "irreversible", "lookup": "read-only" } }')),
    ).toEqual(
      new Map([
        ["send_email", "irreversible"],
        ["lookup", "read-only"],
      ]),
    );
    expect(() => readToolRules(file('{ "tools": { "send_email": "once" } }'))).toThrow(
      'tools.send_email must be one of native-key, owned-store, compensatable, irreversible, read-only (not "once")',
    );
    expect(() => readToolRules(file('{ "tool": {} }'))).toThrow('must be { "tools": {');
    expect(() => readToolRules(file("{"))).toThrow("is not JSON");
    expect(() => readToolRules(join(tmpdir(), "no-such-idempotool-rules.json"))).toThrow("no such file");
  });

  it("finds the tools a rule names that the server does not list", () => {
    const rules = new Map([
      ["send_email", "irreversible" as const],
      ["send_mail", "read-only" as const],
    ]);
    expect(unknownToolsIn(rules, [{ name: "send_email" }])).toEqual(["send_mail"]);
  });
});

describe("idempotool proxy --namespace", () => {
  it("refuses a --namespace with a space or a slash before starting anything", async () => {
    for (const bad of ["two words", "a/b", ""]) {
      const { code, stderr } = await cli(["proxy", "--namespace", bad, "--", "true"]);
      expect(code, bad).toBe(2);
      expect(stderr, bad).toContain("--namespace");
      expect(stderr, bad).not.toContain("records in");
    }
  });
});
