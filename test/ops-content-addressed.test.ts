import { createHash } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { contentKey, fileSystemTarget, s3ConditionalTarget, writeContentOnce } from "../src/ops/index.js";

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

/** A tiny S3-compatible bucket: PUT with If-None-Match: * creates once, 412 when present; bodies arrive slowly. */
function fakeS3(): Promise<{ server: Server; url: string; objects: Map<string, Buffer>; puts: number[] }> {
  const objects = new Map<string, Buffer>();
  const puts: number[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      setTimeout(() => {
        const body = Buffer.concat(chunks);
        const path = req.url ?? "";
        if (req.method !== "PUT") return void res.writeHead(405).end();
        const checksum = req.headers["x-amz-checksum-sha256"];
        if (checksum !== createHash("sha256").update(body).digest("base64"))
          return void res.writeHead(400).end("BadDigest");
        // The check and the store are one synchronous step: atomic, as S3's conditional write is.
        if (req.headers["if-none-match"] === "*" && objects.has(path)) {
          puts.push(412);
          return void res.writeHead(412).end("PreconditionFailed");
        }
        objects.set(path, body);
        puts.push(200);
        res.writeHead(200).end();
      }, Math.random() * 20);
    });
  });
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () =>
      resolve({ server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, objects, puts }),
    ),
  );
}

describe("s3ConditionalTarget", () => {
  it("creates once; 412 on a repeat means the object is there", async () => {
    const s3 = await fakeS3();
    try {
      const target = s3ConditionalTarget({ endpoint: s3.url, bucket: "artifacts", prefix: "reports/" });
      const first = await writeContentOnce(target, "hello");
      const again = await writeContentOnce(target, "hello");
      expect(first.created).toBe(true);
      expect(again).toEqual({ key: first.key, created: false });
      expect([...s3.objects.keys()]).toEqual([`/artifacts/reports/${first.key}`]);
      expect(s3.puts).toEqual([200, 412]);
    } finally {
      s3.server.close();
    }
  });

  it("lets exactly one of many concurrent puts create", async () => {
    const s3 = await fakeS3();
    try {
      const target = s3ConditionalTarget({ endpoint: s3.url, bucket: "b" });
      const results = await Promise.all(Array.from({ length: 12 }, () => writeContentOnce(target, { n: 1 })));
      expect(results.filter((r) => r.created)).toHaveLength(1);
      expect(s3.objects.size).toBe(1);
    } finally {
      s3.server.close();
    }
  });

  it("signs requests through the hook and surfaces other statuses as errors", async () => {
    const seen: string[] = [];
    const target = s3ConditionalTarget({
      endpoint: "http://s3.invalid",
      bucket: "b",
      sign: (request) => {
        seen.push(request.headers.get("if-none-match") ?? "");
        return request;
      },
      fetch: async () => new Response("denied", { status: 403, statusText: "Forbidden" }),
    });
    await expect(writeContentOnce(target, "x")).rejects.toThrow(/403/);
    expect(seen).toEqual(["*"]);
  });
});
