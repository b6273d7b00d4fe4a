/**
 * The shape of `idempotool/http`: explicit exports, and no framework loaded at runtime by any entry.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import * as http from "../src/http/index.js";

const dir = join(import.meta.dirname, "..", "src", "http");
const sources = readdirSync(dir)
  .filter((file) => file.endsWith(".ts") && !file.endsWith(".test.ts"))
  .map((file) => ({ file, text: readFileSync(join(dir, file), "utf8") }));

describe("idempotool/http", () => {
  it("exports exactly the documented runtime names", () => {
    expect(Object.keys(http).sort()).toEqual(
      [
        "HttpHeader",
        "IdempotentFetchError",
        "createIdempotencyHandler",
        "KeyFormat",
        "defaultReplayHeaders",
        "formatIdempotencyKey",
        "idempotencyKeyHeader",
        "idempotencyMiddleware",
        "idempotentFetch",
        "isIdempotentFetchError",
        "parseIdempotencyKey",
        "parseRetryAfter",
        "problemContentType",
        "readProblem",
        "recordsByDefault",
        "withIdempotencyKey",
      ].sort(),
    );
  });

  it("never re-exports with export *", () => {
    for (const { file, text } of sources) expect(text, file).not.toMatch(/export \*/);
  });

  it("imports no framework at runtime: the adapters import only their types", () => {
    for (const { file, text } of sources) {
      expect(text, file).not.toMatch(/^import (?!type )[^;]*from "(hono|express|fastify|@hono\/[^"]+)"/m);
    }
  });

  it("keeps the adapters out of the entry: they are their own subpaths", () => {
    const entry = sources.find((s) => s.file === "index.ts")!.text;
    for (const adapter of ["hono", "express", "fastify"]) expect(entry).not.toContain(`./${adapter}.js`);
  });
});
