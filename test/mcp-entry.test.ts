/** The shape of the `idempotool/mcp` entry: it works with the user's MCP SDK and zod without importing them. */
import { readdirSync, readFileSync } from "node:fs";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import ts from "typescript";
import { expect, it } from "vitest";
import { z } from "zod";
import { z as z3 } from "zod/v3";
import { z as z4 } from "zod/v4";
import { memoryStore } from "../src/index.js";
import * as mcp from "../src/mcp/index.js";
import { registerIdempotentTool, type ZodNamespace } from "../src/mcp/index.js";

const dir = new URL("../src/mcp/", import.meta.url);

it("exports the tool wrappers, the transport wrapper and the constants, nothing else at runtime", () => {
  expect(Object.keys(mcp).sort()).toEqual(
    [
      "MetaKey",
      "acceptParamsKey",
      "idempotentExecute",
      "keyDescription",
      "keyField",
      "registerIdempotentTool",
      "structuredField",
    ].sort(),
  );
});

it("imports the MCP SDK and zod only as types, so loading it loads neither", () => {
  const sources = readdirSync(dir).filter((file) => file.endsWith(".ts"));
  expect(sources).toContain("index.ts");
  let checked = 0;
  for (const file of sources) {
    const source = ts.createSourceFile(
      file,
      readFileSync(new URL(file, dir), "utf8"),
      ts.ScriptTarget.ES2022,
    );
    // With verbatimModuleSyntax, a type-only import or export (and only that) is erased from the JavaScript.
    const runtime = source.statements.flatMap((statement) => {
      if (ts.isImportDeclaration(statement) && !statement.importClause?.isTypeOnly) {
        return [(statement.moduleSpecifier as ts.StringLiteral).text];
      }
      if (ts.isExportDeclaration(statement) && !statement.isTypeOnly && statement.moduleSpecifier) {
        return [(statement.moduleSpecifier as ts.StringLiteral).text];
      }
      return [];
    });
    checked += runtime.length;
    const external = runtime.filter(
      (specifier) => !specifier.startsWith(".") && !specifier.startsWith("node:"),
    );
    expect(external, `${file} imports at runtime`).toEqual([]);
  }
  expect(checked).toBeGreaterThan(0);
});

it("re-exports by name, never with export *", () => {
  const index = readFileSync(new URL("index.ts", dir), "utf8");
  expect(index).toContain("@module");
  expect(index).not.toMatch(/export \*/);
});

it("takes zod 3 and zod 4 shapes and namespaces as users write them, without casts", () => {
  const server = new McpServer({ name: "types", version: "1.0.0" });
  const store = memoryStore();
  // Each call type-checks the handler's arguments against the shape: `to` is a string in all three.
  registerIdempotentTool(
    server,
    "v3",
    { inputSchema: { to: z3.string(), n: z3.number().optional() }, outputSchema: { id: z3.string() } },
    ({ to, n }) => ({ content: [{ type: "text", text: to.toUpperCase() + String(n ?? 0) }] }),
    { store, z: z3 },
  );
  registerIdempotentTool(
    server,
    "v4",
    { inputSchema: { to: z4.string() } },
    ({ to }) => ({ content: [{ type: "text", text: to.toUpperCase() }] }),
    { store, z: z4 },
  );
  registerIdempotentTool(
    server,
    "root",
    { inputSchema: { to: z.string() } },
    ({ to }) => ({ content: [{ type: "text", text: to.toUpperCase() }] }),
    { store, z },
  );
  const namespaces: ZodNamespace[] = [z, z3, z4];
  expect(namespaces).toHaveLength(3);
});
