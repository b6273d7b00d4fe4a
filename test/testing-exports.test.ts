/**
 * `idempotool/testing` as a store author imports it for the conformance suite: store-neutral, loading
 * no concrete store and no driver. `chaos()`, which runs a tool on SQLite, is `idempotool/chaos`.
 */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import * as chaos from "../src/chaos/index.js";
import * as testing from "../src/testing/index.js";
import { runtimeImportGraph } from "./fixtures/import-graph.js";

const src = join(import.meta.dirname, "../src");

describe("idempotool/testing", () => {
  it("exports the conformance suite, the fake clock and the tool-call recorder, and no chaos", () => {
    expect(Object.keys(testing).sort()).toEqual(
      ["DuplicateToolCallsError", "fakeClock", "recordToolCalls", "storeConformanceCases"].sort(),
    );
  });

  it("loads no concrete store, no chaos harness and no driver", () => {
    const graph = runtimeImportGraph(join(src, "testing/index.ts"));
    const stores = ["sqlite", "postgres", "redis", "chaos"].map((folder) => join(src, folder));
    expect([...graph.files].filter((file) => stores.some((folder) => file.startsWith(`${folder}/`)))).toEqual(
      [],
    );
    expect([...graph.packages].filter((name) => /^(better-sqlite3|pg|ioredis)(\/|$)/.test(name))).toEqual([]);
  });
});

describe("idempotool/chaos", () => {
  it("exports the harness, its probe and its vocabulary", () => {
    expect(Object.keys(chaos).sort()).toEqual(
      ["RepeatSource", "SourceVerdict", "chaos", "chaosProbe"].sort(),
    );
  });
});
