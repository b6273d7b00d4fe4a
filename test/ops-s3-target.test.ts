/**
 * s3ConditionalTarget through a real `S3Client` against s3rver, an S3-compatible server run here: the SDK
 * signs (SigV4; s3rver checks the access key, not the V4 signature itself) and s3rver stores the object.
 * s3rver predates S3's conditional
 * writes and ignores `If-None-Match` on `PUT`, so a gate in front of it answers what S3 answers there
 * (412 when the object exists, 409 while another conditional write of the key is in flight); the gate
 * only ever injects those answers, every write that passes it goes to s3rver.
 */
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { GetObjectCommand, S3Client } from "@aws-sdk/client-s3";
import S3rver from "s3rver";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorCode, IdempotencyError } from "../src/core/errors.js";
import { type S3ConditionalTargetOptions, s3ConditionalTarget, writeContentOnce } from "../src/ops/index.js";

const bucket = "artifacts";
let directory = "";
let server: Server;
let endpoint = "";
/** Conditional PUTs the gate saw, by path: what it answered. */
const answers = new Map<string, number[]>();
/** The Authorization header of every conditional PUT. */
const authorizations: string[] = [];
/** Paths whose next conditional PUTs the gate answers with 409, however many. */
const conflictsAhead = new Map<string, number>();

beforeAll(async () => {
  directory = mkdtempSync(join(tmpdir(), "idempotool-s3rver-"));
  const s3rver = new S3rver({ silent: true, directory, configureBuckets: [{ name: bucket }] });
  await s3rver.configureBuckets();
  const s3 = s3rver.callback();
  const present = new Set<string>();
  const inFlight = new Set<string>();
  server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const path = (req.url ?? "").split("?")[0] ?? "";
    if (req.method !== "PUT" || req.headers["if-none-match"] !== "*") return void s3(req, res);
    authorizations.push(req.headers.authorization ?? "");
    const answer = (status: number, code: string) => {
      answers.set(path, [...(answers.get(path) ?? []), status]);
      req.resume();
      res.writeHead(status, { "content-type": "application/xml" });
      res.end(
        `<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code><Message>${code}</Message></Error>`,
      );
    };
    const conflicts = conflictsAhead.get(path) ?? 0;
    if (conflicts > 0) {
      conflictsAhead.set(path, conflicts - 1);
      return answer(409, "ConditionalRequestConflict");
    }
    if (present.has(path)) return answer(412, "PreconditionFailed");
    if (inFlight.has(path)) return answer(409, "ConditionalRequestConflict");
    inFlight.add(path);
    res.on("finish", () => {
      inFlight.delete(path);
      if (res.statusCode === 200) present.add(path);
      answers.set(path, [...(answers.get(path) ?? []), res.statusCode]);
    });
    s3(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  rmSync(directory, { recursive: true, force: true });
});

function client(accessKeyId = "S3RVER"): S3Client {
  return new S3Client({
    endpoint,
    region: "us-east-1",
    forcePathStyle: true,
    credentials: { accessKeyId, secretAccessKey: "S3RVER" },
    maxAttempts: 1,
  });
}

async function read(key: string): Promise<Buffer> {
  const object = await client().send(new GetObjectCommand({ Bucket: bucket, Key: key }));
  return Buffer.from((await object.Body?.transformToByteArray()) ?? []);
}

describe("s3ConditionalTarget", () => {
  it("writes the object once through the signed client; the repeat is answered 412 and reports exists", async () => {
    const target = s3ConditionalTarget({ client: client(), bucket, prefix: "reports/" });
    const first = await writeContentOnce(target, { report: "Q3", total: 42 });
    const again = await writeContentOnce(target, { total: 42, report: "Q3" });
    expect(first.created).toBe(true);
    expect(again).toEqual({ key: first.key, created: false });
    expect(answers.get(`/${bucket}/reports/${first.key}`)).toEqual([200, 412]);
    expect(authorizations.at(-1)).toMatch(
      /^AWS4-HMAC-SHA256 Credential=S3RVER\/\d{8}\/us-east-1\/s3\/aws4_request/,
    );
    const stored = await read(`reports/${first.key}`);
    expect(createHash("sha256").update(stored).digest("hex")).toBe(first.key);
  });

  it("lets exactly one of many concurrent writes of the same content create it", async () => {
    const target = s3ConditionalTarget({ client: client(), bucket, conflictRetries: 10 });
    const results = await Promise.all(
      Array.from({ length: 12 }, () => writeContentOnce(target, "one object, twelve writers")),
    );
    expect(results.filter((r) => r.created)).toHaveLength(1);
    const seen = answers.get(`/${bucket}/${results[0]?.key}`) ?? [];
    expect(seen.filter((status) => status === 200)).toHaveLength(1);
  });

  it("retries a 409 (a concurrent conditional write in flight) and then creates", async () => {
    const content = "conflict then create";
    const key = createHash("sha256").update(content).digest("hex");
    conflictsAhead.set(`/${bucket}/${key}`, 2);
    const target = s3ConditionalTarget({ client: client(), bucket, conflictRetries: 2 });
    await expect(writeContentOnce(target, content)).resolves.toEqual({ key, created: true });
    expect(answers.get(`/${bucket}/${key}`)).toEqual([409, 409, 200]);
  });

  it("throws the client's error when the 409s outlast the retries; nothing was written", async () => {
    const content = "conflict forever";
    const key = createHash("sha256").update(content).digest("hex");
    conflictsAhead.set(`/${bucket}/${key}`, 5);
    const target = s3ConditionalTarget({ client: client(), bucket, conflictRetries: 1 });
    await expect(writeContentOnce(target, content)).rejects.toMatchObject({
      name: "ConditionalRequestConflict",
      $metadata: { httpStatusCode: 409 },
    });
    expect(answers.get(`/${bucket}/${key}`)).toEqual([409, 409]);
    await expect(read(key)).rejects.toMatchObject({ name: "NoSuchKey" });
  });

  it("surfaces refused credentials as the client's error, never as created or exists", async () => {
    const target = s3ConditionalTarget({ client: client("NOT-A-KEY"), bucket });
    await expect(writeContentOnce(target, "signed wrong")).rejects.toMatchObject({
      name: "InvalidAccessKeyId",
      $metadata: { httpStatusCode: 403 },
    });
  });

  it("refuses bad options with invalid_options before any request", () => {
    const cases: [unknown, RegExp][] = [
      [{ bucket }, /option `client` must be an S3Client/],
      [{ client: {}, bucket }, /option `client` must be an S3Client/],
      [{ client: client(), bucket: "" }, /option `bucket` must be a non-empty string/],
      [{ client: client(), bucket, prefix: 7 }, /option `prefix` must be a string/],
      [{ client: client(), bucket, conflictRetries: 11 }, /option `conflictRetries`/],
      [{ client: client(), bucket, conflictRetries: 1.5 }, /option `conflictRetries`/],
    ];
    for (const [options, message] of cases) {
      let thrown: unknown;
      try {
        s3ConditionalTarget(options as S3ConditionalTargetOptions);
      } catch (error) {
        thrown = error;
      }
      expect(thrown).toBeInstanceOf(IdempotencyError);
      expect((thrown as IdempotencyError).code).toBe(ErrorCode.invalidOptions);
      expect((thrown as Error).message).toMatch(message);
    }
  });
});
