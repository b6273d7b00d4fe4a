import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import {
  decisionTableMarkdown,
  docPath,
  tableCells,
  withCurrentTable,
} from "../scripts/decision-table-doc.js";

describe("docs/concepts.md", () => {
  it("prints the decision table exactly as decide() reads it (regenerate: see scripts/decision-table-doc.ts)", () => {
    const doc = tableCells(readFileSync(docPath, "utf8"));
    expect(doc).toContain(tableCells(decisionTableMarkdown()));
    expect(tableCells(withCurrentTable(doc))).toBe(doc);
  });
});
