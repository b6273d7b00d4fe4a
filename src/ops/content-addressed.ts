/**
 * OP-3, content-addressed writes: the key is the SHA-256 of the content, so writing the same content
 * twice is the same write, and a target that creates only-if-absent makes it idempotent by construction.
 */
import { createHash, randomBytes } from "node:crypto";
import { link, mkdir, open, readdir, stat, unlink } from "node:fs/promises";
import { join } from "node:path";
import { canonicalJson } from "../core/canonical-json.js";
import { type Clock, systemClock } from "../core/clock.js";
import { ErrorCode, IdempotencyError } from "../core/errors.js";
import { durationOption, invalidOption, maxTtlMs, sizeOption } from "../core/option-checks.js";

/** Somewhere content can be created once under its key. An existing object counts as success. */
export interface ContentTarget {
  /** Create `key` with `bytes` unless it exists; never leave a partial object visible. */
  putIfAbsent(key: string, bytes: Uint8Array): Promise<"created" | "exists">;
}

/** What {@link writeContentOnce} did. */
export interface ContentWrite {
  /** SHA-256 (hex) of the bytes written. */
  readonly key: string;
  /** False when the content was already there (a repeat, or the same content from elsewhere). */
  readonly created: boolean;
}

/**
 * The bytes a piece of content is stored and addressed as: bytes as they are, a string as UTF-8,
 * anything else as its RFC 8785 canonical JSON (so `{a, b}` and `{b, a}` are one object).
 */
export function contentBytes(content: unknown): Uint8Array {
  if (content instanceof Uint8Array) return content;
  if (typeof content === "string") return Buffer.from(content, "utf8");
  return Buffer.from(canonicalJson(content), "utf8");
}

/** The content key: SHA-256 (hex) of {@link contentBytes}. */
export function contentKey(content: unknown): string {
  return createHash("sha256").update(contentBytes(content)).digest("hex");
}

/**
 * Write content once under its SHA-256: every repeat is a no-op that reports `created: false`.
 *
 * @example
 * import { fileSystemTarget, writeContentOnce } from "idempotool/ops";
 *
 * const target = fileSystemTarget({ directory: "./artifacts" });
 * const first = await writeContentOnce(target, { report: "Q3", total: 42 });
 * const again = await writeContentOnce(target, { total: 42, report: "Q3" });
 * // again.key === first.key, again.created === false: one file exists.
 */
export async function writeContentOnce(target: ContentTarget, content: unknown): Promise<ContentWrite> {
  const bytes = contentBytes(content);
  const key = createHash("sha256").update(bytes).digest("hex");
  const outcome = await target.putIfAbsent(key, bytes);
  return { key, created: outcome === "created" };
}

const keyPattern = /^[0-9a-f]{64}$/;

function checkKey(key: string): void {
  if (!keyPattern.test(key)) {
    throw new IdempotencyError(
      ErrorCode.keyInvalid,
      `content key ${JSON.stringify(key)} is not a SHA-256 hex digest.`,
    );
  }
}

/** Options of {@link fileSystemTarget}. */
export interface FileSystemTargetOptions {
  /** Where objects live, as `<directory>/<first two hex digits>/<key>`. Created if missing. */
  readonly directory: string;
  /** Flush file and data to disk before it becomes visible. Default true. */
  readonly fsync?: boolean | undefined;
  /**
   * A temp file not written to for this long (ms, by its modification time) is the leftover of a write
   * that crashed, and the next write into its directory, or {@link FileSystemTarget.sweep}, removes it.
   * A writer still writing touches its file with every write, so it is never taken for one. Whole ms
   * from 1 to ten years; default one hour.
   */
  readonly orphanAfterMs?: number | undefined;
  /** The clock the age of temp files is judged by; default the system clock. For tests. */
  readonly clock?: Clock | undefined;
}

/** A directory as a content target: {@link fileSystemTarget}. */
export interface FileSystemTarget extends ContentTarget {
  /** Where the object of `key` lives (or would live). */
  pathOf(key: string): string;
  /**
   * Remove the temp files that crashed writes left in every shard of the directory (those untouched for
   * `orphanAfterMs`); returns how many. Objects are never touched. Run it from a periodic job when
   * some shards may not be written again for a long time.
   */
  sweep(): Promise<number>;
}

// Dot-prefixed: never mistaken for an object; `<key prefix>-<random>` follows.
const tempPrefix = ".tmp-";
const shardPattern = /^[0-9a-f]{2}$/;

/**
 * A directory as a content target. Each object is written to a private temp file in its final
 * directory, flushed, then `link()`ed to its name: link fails with EEXIST when the name exists, so
 * the create is atomic, a reader never sees a partial file, and an existing file counts as success.
 * A write that crashed leaves its temp file behind; each write first removes the ones in its directory
 * that are older than `orphanAfterMs`, and `sweep()` removes them everywhere.
 *
 * @example
 * import { fileSystemTarget, writeContentOnce } from "idempotool/ops";
 *
 * const target = fileSystemTarget({ directory: "/var/artifacts" });
 * const { key } = await writeContentOnce(target, "hello");
 * await target.sweep(); // from a daily job: temp files of crashed writes, in shards nobody writes to
 */
export function fileSystemTarget(options: FileSystemTargetOptions): FileSystemTarget {
  const fsync = options.fsync ?? true;
  const orphanAfterMs = durationOption(
    "fileSystemTarget()",
    "orphanAfterMs",
    options.orphanAfterMs,
    3_600_000,
    {
      max: maxTtlMs,
    },
  );
  const clock = options.clock ?? systemClock;
  const pathOf = (key: string) => {
    checkKey(key);
    return join(options.directory, key.slice(0, 2), key);
  };
  const removeOrphans = (shard: string) => removeOrphanTemps(shard, clock.now() - orphanAfterMs);
  return {
    pathOf,
    async putIfAbsent(key, bytes) {
      const final = pathOf(key);
      const directory = join(options.directory, key.slice(0, 2));
      await mkdir(directory, { recursive: true });
      // Before our own temp file exists, so it can never be among them. Best effort: a sweep that
      // fails costs disk space, never the write.
      await removeOrphans(directory).catch(() => 0);
      // Random: never shared with a concurrent writer.
      const temp = join(directory, `${tempPrefix}${key.slice(0, 16)}-${randomBytes(8).toString("hex")}`);
      const handle = await open(temp, "wx", 0o644);
      try {
        try {
          await handle.writeFile(bytes);
          if (fsync) await handle.sync();
        } finally {
          await handle.close();
        }
        try {
          await link(temp, final);
          return "created";
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code === "EEXIST") return "exists";
          throw error;
        }
      } finally {
        await unlink(temp).catch(() => undefined);
      }
    },
    async sweep() {
      const shards = await readdir(options.directory).catch(missingAsEmpty);
      let removed = 0;
      for (const shard of shards) {
        if (shardPattern.test(shard)) removed += await removeOrphans(join(options.directory, shard));
      }
      return removed;
    },
  };
}

/**
 * Remove the temp files in `directory` last modified before `before` (epoch ms); returns how many.
 * Best effort: a file another sweeper removed first, or one that cannot be read, is skipped.
 */
async function removeOrphanTemps(directory: string, before: number): Promise<number> {
  const names = await readdir(directory).catch(missingAsEmpty);
  let removed = 0;
  for (const name of names) {
    if (!name.startsWith(tempPrefix)) continue;
    const path = join(directory, name);
    try {
      if ((await stat(path)).mtimeMs >= before) continue;
      await unlink(path);
      removed++;
    } catch {
      // Gone already (another writer swept it, or its own writer finished), or unreadable: leave it.
    }
  }
  return removed;
}

function missingAsEmpty(error: unknown): string[] {
  if ((error as NodeJS.ErrnoException).code === "ENOENT") return [];
  throw error;
}

/**
 * What {@link s3ConditionalTarget} needs of your `S3Client` from `@aws-sdk/client-s3`: its `send`. Any
 * endpoint that client reaches works the same way: AWS S3, Cloudflare R2, MinIO.
 */
export interface S3ClientLike {
  send(command: unknown): Promise<unknown>;
}

/** Options of {@link s3ConditionalTarget}. */
export interface S3ConditionalTargetOptions {
  /**
   * Your `S3Client` (`@aws-sdk/client-s3` v3), set up with its region, credentials and endpoint: signing
   * is its job. For MinIO and other path-style servers give it `forcePathStyle: true`.
   */
  readonly client: S3ClientLike;
  readonly bucket: string;
  /** Prepended to each key, e.g. `"artifacts/"`. */
  readonly prefix?: string | undefined;
  /**
   * Retries of a 409 (another conditional write of the same key in flight), 50 ms, 100 ms, 200 ms … apart.
   * Whole number from 0 to 10; default 3.
   */
  readonly conflictRetries?: number | undefined;
}

/**
 * An S3 bucket as a content target: `PutObject` with `IfNoneMatch: "*"` and the content's SHA-256 as
 * its checksum, through your `S3Client`. S3 answers 412 when the object is already there (`exists`),
 * and 409 while a concurrent conditional write of the same key is in flight; that is retried, and the
 * 412 that follows reports `exists`. Any other error is thrown as the client threw it.
 *
 * A server that ignores `If-None-Match` on `PUT` (some older S3-compatible servers do) overwrites the
 * object with the same bytes and answers `created` again: harmless for content addressed by its hash,
 * but then `created` no longer tells a first write from a repeat.
 *
 * @example
 * import { S3Client } from "@aws-sdk/client-s3";
 * import { s3ConditionalTarget, writeContentOnce } from "idempotool/ops";
 *
 * const target = s3ConditionalTarget({ client: new S3Client({ region: "eu-west-1" }), bucket: "artifacts" });
 * const { key, created } = await writeContentOnce(target, new Uint8Array([1, 2, 3]));
 */
export function s3ConditionalTarget(options: S3ConditionalTargetOptions): ContentTarget {
  const owner = "s3ConditionalTarget()";
  if (typeof options?.client?.send !== "function") {
    invalidOption(owner, "client", "must be an S3Client from @aws-sdk/client-s3 (an object with send())");
  }
  if (typeof options.bucket !== "string" || options.bucket === "") {
    invalidOption(owner, "bucket", "must be a non-empty string");
  }
  if (options.prefix !== undefined && typeof options.prefix !== "string") {
    invalidOption(owner, "prefix", "must be a string");
  }
  const { client, bucket } = options;
  const prefix = options.prefix ?? "";
  const retries = sizeOption(owner, "conflictRetries", options.conflictRetries, 3, { min: 0, max: 10 });
  let sdk: Promise<S3Commands> | undefined;
  return {
    async putIfAbsent(key, bytes) {
      checkKey(key);
      sdk ??= loadS3Commands();
      const { PutObjectCommand } = await sdk;
      const checksum = createHash("sha256").update(bytes).digest("base64");
      for (let attempt = 0; ; attempt++) {
        try {
          await client.send(
            new PutObjectCommand({
              Bucket: bucket,
              Key: `${prefix}${key}`,
              Body: bytes,
              ContentType: "application/octet-stream",
              ChecksumSHA256: checksum,
              IfNoneMatch: "*",
            }),
          );
          return "created";
        } catch (error) {
          const status = httpStatusOf(error);
          if (status === 412) return "exists";
          if (status === 409 && attempt < retries) {
            await new Promise((resolve) => setTimeout(resolve, 50 * 2 ** attempt));
            continue;
          }
          throw error;
        }
      }
    },
  };
}

type S3Commands = Pick<typeof import("@aws-sdk/client-s3"), "PutObjectCommand">;

async function loadS3Commands(): Promise<S3Commands> {
  try {
    return await import("@aws-sdk/client-s3");
  } catch (error) {
    throw new IdempotencyError(
      ErrorCode.invalidOptions,
      "s3ConditionalTarget() needs @aws-sdk/client-s3 beside idempotool: npm install @aws-sdk/client-s3",
      { cause: error },
    );
  }
}

/** The HTTP status an AWS SDK v3 error carries (`$metadata.httpStatusCode`), if any. */
function httpStatusOf(error: unknown): number | undefined {
  const metadata = (error as { $metadata?: { httpStatusCode?: unknown } } | null)?.$metadata;
  return typeof metadata?.httpStatusCode === "number" ? metadata.httpStatusCode : undefined;
}
