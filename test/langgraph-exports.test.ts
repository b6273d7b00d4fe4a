/**
 * `idempotool/langgraph` as a user imports it: explicit exports, no LangGraph at runtime, and shapes
 * that LangGraph's own types fit.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { interrupt, LangGraphRunnableConfig } from "@langchain/langgraph";
import { describe, expect, expectTypeOf, it } from "vitest";
import type { Interrupt, NodeConfig } from "../src/langgraph/index.js";
import * as langgraph from "../src/langgraph/index.js";

const dir = join(import.meta.dirname, "../src/langgraph");

describe("idempotool/langgraph", () => {
  it("exports exactly its documented values", () => {
    expect(Object.keys(langgraph).sort()).toEqual(
      [
        "KeySource",
        "approve",
        "isApprovalRequest",
        "keyFromCheckpoint",
        "keyFromState",
        "mintKey",
        "nodeTool",
        "reject",
        "requestApproval",
        "runApproved",
      ].sort(),
    );
  });

  it("opens with a @module comment and re-exports by name, never with export *", () => {
    const entry = readFileSync(join(dir, "index.ts"), "utf8");
    expect(entry.trimStart().startsWith("/**")).toBe(true);
    expect(entry).toContain("@module");
    expect(entry).not.toMatch(/export \*/);
  });

  it("never imports LangGraph at runtime: its sources import only each other, the core and node:", () => {
    for (const file of readdirSync(dir).filter((f) => f.endsWith(".ts"))) {
      const source = readFileSync(join(dir, file), "utf8");
      const runtimeImports = [...source.matchAll(/^import (?!type )[^;]*? from "([^"]+)";/gms)].map(
        (m) => m[1],
      );
      for (const specifier of runtimeImports) expect(specifier, file).toMatch(/^(\.\.?\/|node:)/);
    }
  });

  it("takes LangGraph's node config and interrupt as they are", () => {
    expectTypeOf<LangGraphRunnableConfig>().toExtend<NodeConfig>();
    expectTypeOf<typeof interrupt<unknown, unknown>>().toExtend<Interrupt<{ to: string }>>();
  });
});
