/**
 * `idempotool/ai-sdk` and `idempotool/loops` as a user imports them: explicit exports, and no AI SDK or
 * provider SDK at runtime (types only).
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import * as aiSdk from "../src/ai-sdk/index.js";
import * as loops from "../src/loops/index.js";
import { runtimeImportGraph } from "./fixtures/import-graph.js";

const src = join(import.meta.dirname, "../src");

describe.each([
  {
    entry: "ai-sdk",
    module: aiSdk as Record<string, unknown>,
    values: ["idempotentTool", "idempotentTools", "toolContextOf", "turnIdFromMessages"],
  },
  {
    entry: "loops",
    module: loops as Record<string, unknown>,
    values: [
      "OutputMode",
      "ToolCallError",
      "ToolCallErrorCode",
      "dispatchToolCalls",
      "intentKey",
      "loopTool",
      "runAnthropicToolUses",
      "runOpenAIResponsesCalls",
      "runOpenAIToolCalls",
    ],
  },
])("idempotool/$entry", ({ entry, module, values }) => {
  it("exports exactly its documented values", () => {
    expect(Object.keys(module).sort()).toEqual([...values].sort());
  });

  it("opens with a @module comment and re-exports by name, never with export *", () => {
    const source = readFileSync(join(src, entry, "index.ts"), "utf8");
    expect(source.trimStart().startsWith("/**")).toBe(true);
    expect(source).toContain("@module");
    expect(source).not.toMatch(/export \*/);
  });

  it("imports no framework or provider SDK at runtime: only its own files, the core and node:", () => {
    for (const file of readdirSync(join(src, entry)).filter((f) => f.endsWith(".ts"))) {
      const source = readFileSync(join(src, entry, file), "utf8");
      const runtimeImports = [...source.matchAll(/^import (?!type )[^;]*? from "([^"]+)";/gms)].map(
        (m) => m[1],
      );
      for (const specifier of runtimeImports) expect(specifier, file).toMatch(/^(\.\.?\/|node:)/);
    }
  });
});

describe("idempotool/ai-sdk and idempotool/loops", () => {
  it("load nothing of each other: what both need lives in a folder of its own", () => {
    const fromAiSdk = [...runtimeImportGraph(join(src, "ai-sdk/index.ts")).files];
    const fromLoops = [...runtimeImportGraph(join(src, "loops/index.ts")).files];
    expect(fromAiSdk.filter((file) => file.startsWith(join(src, "loops")))).toEqual([]);
    expect(fromLoops.filter((file) => file.startsWith(join(src, "ai-sdk")))).toEqual([]);
  });

  it("share no name: the tool-call helpers both use (ToolCallError, OutputMode, intentKey) are only in idempotool/loops", () => {
    expect(Object.keys(aiSdk).filter((name) => name in loops)).toEqual([]);
  });
});
