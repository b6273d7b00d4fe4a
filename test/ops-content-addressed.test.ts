import { createHash } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { contentKey, fileSystemTarget, writeContentOnce } from "../src/ops/index.js";

describe("writeContentOnce (OP-3)", () => {
  it("keys content by the SHA-256 of its canonical form", () => {
    expect(contentKey("hello")).toBe(createHash("sha256").update("hello").digest("hex"));
    expect(contentKey({ a: 1, b: [2] })).toBe(contentKey({ b: [2], a: 1 }));
    expect(contentKey(new Uint8Array([1, 2]))).not.toBe(contentKey(new Uint8Array([2, 1])));
  });
});

describe("fileSystemTarget", () => {
  let dir = "";
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "idempotool-op3-"));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("creates the file once; a repeat is a no-op that counts as success", async () => {
    const target = fileSystemTarget({ directory: dir });
    const first = await writeContentOnce(target, { report: "Q3" });
    const again = await writeContentOnce(target, { report: "Q3" });
    expect(first.created).toBe(true);
    expect(again).toEqual({ key: first.key, created: false });
    expect(readFileSync(target.pathOf(first.key), "utf8")).toBe('{"report":"Q3"}');
  });

  it("lets exactly one of many concurrent writers create, and leaves no temp files", async () => {
    const target = fileSystemTarget({ directory: dir });
    const content = Buffer.alloc(256 * 1024, 7);
    const results = await Promise.all(Array.from({ length: 20 }, () => writeContentOnce(target, content)));
    expect(results.filter((r) => r.created)).toHaveLength(1);
    const key = results[0]?.key ?? "";
    expect(readFileSync(target.pathOf(key)).equals(content)).toBe(true);
    expect(readdirSync(join(dir, key.slice(0, 2)))).toEqual([key]);
  });

  it("rejects a key that is not a SHA-256 digest (no path traversal)", async () => {
    await expect(
      fileSystemTarget({ directory: dir }).putIfAbsent("../../etc/passwd", new Uint8Array()),
    ).rejects.toMatchObject({
      code: "idempotency_key_invalid",
    });
  });

  it("refuses an orphanAfterMs that is not a whole number of ms, naming the option", () => {
    for (const orphanAfterMs of [0, -1, 1.5, Number.NaN]) {
      expect(() => fileSystemTarget({ directory: dir, orphanAfterMs })).toThrow(/orphanAfterMs/);
    }
  });

  it("sweeps a directory that does not exist yet as empty", async () => {
    expect(await fileSystemTarget({ directory: join(dir, "not-yet") }).sweep()).toBe(0);
  });
});
