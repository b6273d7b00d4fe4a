/**
 * `audit` measured on a labelled set of tool definitions written after public MCP servers' tool lists:
 * in its default mode it must flag the side-effectful ones (precision and recall at least 0.95), and its
 * advice for a tool that changes someone else's store must be one that works without owning that store.
 */
import { describe, expect, it } from "vitest";
import { auditTools, type ToolAudit, ToolLayer } from "../src/audit/index.js";
import { type LabelledTool, labelledTools } from "./fixtures/audit-labelled-tools.js";

/** Operation models that need the store the tool writes to: its transaction, its constraint, its naming. */
const needsOwnedStore = new Set(["OP-2", "OP-3", "OP-4"]);

const auditOne = (labelled: LabelledTool, layer?: ToolLayer): ToolAudit =>
  auditTools([labelled.tool], layer ? { layer } : {}).tools[0]!;

const describeTool = ({ tool, server }: LabelledTool) => `${tool.name} (${server})`;

describe("audit on the labelled set", () => {
  it("holds at least 100 tools, both kinds, each side-effectful one saying whose store it changes", () => {
    expect(labelledTools.length).toBeGreaterThanOrEqual(100);
    const sideEffectful = labelledTools.filter((l) => l.sideEffectful);
    expect(sideEffectful.length).toBeGreaterThanOrEqual(40);
    expect(labelledTools.length - sideEffectful.length).toBeGreaterThanOrEqual(40);
    for (const l of sideEffectful) expect(l.downstream, describeTool(l)).toBeDefined();
    expect(new Set(labelledTools.map((l) => l.server)).size).toBeGreaterThanOrEqual(10);
  });

  it("flags the side-effectful tools in its default mode with precision and recall of at least 0.95", () => {
    const report = auditTools(labelledTools.map((l) => l.tool));
    const flagged = (i: number) => report.tools[i]?.class === "side-effectful";
    const missed = labelledTools.filter((l, i) => l.sideEffectful && !flagged(i));
    const wronglyFlagged = labelledTools.filter((l, i) => !l.sideEffectful && flagged(i));
    const truePositives = labelledTools.filter((l, i) => l.sideEffectful && flagged(i)).length;
    const precision = truePositives / (truePositives + wronglyFlagged.length);
    const recall = truePositives / (truePositives + missed.length);
    console.log(
      `audit (default mode) on ${labelledTools.length} labelled tools: precision ${precision.toFixed(3)}, ` +
        `recall ${recall.toFixed(3)}` +
        (missed.length > 0 ? `; missed ${missed.map(describeTool).join(", ")}` : "") +
        (wronglyFlagged.length > 0 ? `; wrongly flagged ${wronglyFlagged.map(describeTool).join(", ")}` : ""),
    );
    expect(
      precision,
      `wrongly flagged: ${wronglyFlagged.map(describeTool).join(", ")}`,
    ).toBeGreaterThanOrEqual(0.95);
    expect(recall, `missed: ${missed.map(describeTool).join(", ")}`).toBeGreaterThanOrEqual(0.95);
  });

  it.each(["place_order", "order_pizza", "set_thermostat", "unlock_door", "check_out", "fetch_and_archive"])(
    "fails %s, which takes no key, instead of passing it as unclear",
    (name) => {
      const named = labelledTools.filter((l) => l.tool.name === name);
      expect(named.length).toBeGreaterThan(0);
      for (const labelled of named) {
        expect(auditOne(labelled), labelled.tool.description).toMatchObject({
          class: "side-effectful",
          verdict: "fail",
        });
      }
    },
  );

  it.each(Object.values(ToolLayer))(
    "advises, at the %s layer, only mechanisms that work without owning a third party's store",
    (layer) => {
      const thirdParty = labelledTools.filter((l) => l.downstream === "third-party");
      expect(thirdParty.length).toBeGreaterThanOrEqual(40);
      for (const labelled of thirdParty) {
        const audit = auditOne(labelled, layer);
        const mechanisms = audit.recommendations.map((r) => r.mechanism);
        expect(
          mechanisms.filter((m) => needsOwnedStore.has(m)),
          `${describeTool(labelled)} is advised ${mechanisms.join(" + ")}`,
        ).toEqual([]);
        expect(audit.effect, describeTool(labelled)).not.toBe("owned-store");
      }
    },
  );

  it("never advises merge_pull_request to keep a dedup row in GitHub's transaction", () => {
    for (const labelled of labelledTools.filter((l) => l.tool.name === "merge_pull_request")) {
      for (const layer of Object.values(ToolLayer)) {
        const mechanisms = auditOne(labelled, layer).recommendations.map((r) => r.mechanism);
        expect(mechanisms, `${labelled.tool.description} at ${layer}`).not.toContain("OP-2");
        expect(mechanisms.length).toBeGreaterThan(0);
      }
    }
  });

  it("still advises the owner's own store its transaction: the memory server's knowledge graph", () => {
    const createEntities = labelledTools.find((l) => l.tool.name === "create_entities")!;
    expect(auditOne(createEntities).recommendations.map((r) => r.mechanism)).toEqual(["OP-7", "OP-2"]);
  });
});
