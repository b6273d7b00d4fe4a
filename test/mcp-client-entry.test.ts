/** The shape of `idempotool/mcp-client`: two wrappers, and no runtime import of either SDK or of server code. */
import { readdirSync, readFileSync } from "node:fs";
import ts from "typescript";
import { expect, it } from "vitest";
import { metaKeyFields } from "../src/mcp/call-key.js";
import { MetaKey } from "../src/mcp/index.js";
import { keyField } from "../src/mcp/register-idempotent-tool.js";
import * as mcpClient from "../src/mcp-client/index.js";
import { defaultMetaField, errorMetaKey, keyArgument } from "../src/mcp-client/retry-call.js";

const dir = new URL("../src/mcp-client/", import.meta.url);

it("exports the two wrappers, and nothing else at runtime", () => {
  expect(Object.keys(mcpClient).sort()).toEqual(["idempotentClient", "idempotentMcpTools"]);
});

it("imports the SDKs only as types, and nothing of the server (idempotool/mcp) at all", () => {
  const runtime = readdirSync(dir)
    .filter((file) => file.endsWith(".ts") && !file.endsWith(".test.ts"))
    .flatMap((file) => {
      const source = ts.createSourceFile(
        file,
        readFileSync(new URL(file, dir), "utf8"),
        ts.ScriptTarget.ES2022,
      );
      return source.statements.flatMap((statement) =>
        ts.isImportDeclaration(statement) && !statement.importClause?.isTypeOnly
          ? [(statement.moduleSpecifier as ts.StringLiteral).text]
          : [],
      );
    });
  expect(runtime.length).toBeGreaterThan(0);
  for (const specifier of runtime)
    expect(specifier).toMatch(/^\.\.?\/(core\/|http\/retry-policy|[a-z-]+\.js$)/);
});

it("speaks the server's names: the _meta field it reads, the argument it lists, the error info it writes", () => {
  expect(metaKeyFields).toContain(defaultMetaField);
  expect(keyArgument).toBe(keyField);
  expect(errorMetaKey).toBe(MetaKey.error);
});
