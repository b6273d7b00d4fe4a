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
import { durationOption, maxTtlMs } from "../core/option-checks.js";

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

/** Options of {@link s3ConditionalTarget}. */
export interface S3ConditionalTargetOptions {
  /** The endpoint, e.g. `https://s3.eu-west-1.amazonaws.com` or a MinIO / R2 URL. */
  readonly endpoint: string;
  readonly bucket: string;
  /** Prepended to each key, e.g. `"artifacts/"`. */
  readonly prefix?: string | undefined;
  /** Your fetch; default the global one. */
  readonly fetch?: typeof fetch | undefined;
  /**
   * Sign or decorate each request (AWS SigV4, a bearer token); return the request to send.
   * The request already carries `If-None-Match: *` and `x-amz-checksum-sha256`.
   */
  readonly sign?: ((request: Request) => Request | Promise<Request>) | undefined;
  /** Retries of a 409 (another conditional write of the same key in progress). Default 3. */
  readonly conflictRetries?: number | undefined;
}

/**
 * An S3-compatible bucket as a content target: `PUT` with `If-None-Match: *`, where 412 means the
 * object is already there. S3 answers 409 while a concurrent conditional write of the same key is in
 * flight; that is retried, and a later 412 then reports `exists`.
 *
 * @example
 * import { s3ConditionalTarget, writeContentOnce } from "idempotool/ops";
 *
 * const target = s3ConditionalTarget({ endpoint: "http://127.0.0.1:9000", bucket: "artifacts" });
 * const { key, created } = await writeContentOnce(target, new Uint8Array([1, 2, 3]));
 */
export function s3ConditionalTarget(options: S3ConditionalTargetOptions): ContentTarget {
  const send = options.fetch ?? fetch;
  const retries = options.conflictRetries ?? 3;
  const base = options.endpoint.replace(/\/+$/, "");
  return {
    async putIfAbsent(key, bytes) {
      checkKey(key);
      const url = `${base}/${encodeURIComponent(options.bucket)}/${(options.prefix ?? "")
        .split("/")
        .map(encodeURIComponent)
        .join("/")}${key}`;
      const checksum = createHash("sha256").update(bytes).digest("base64");
      for (let attempt = 0; ; attempt++) {
        const request = new Request(url, {
          method: "PUT",
          headers: {
            "If-None-Match": "*",
            "Content-Type": "application/octet-stream",
            "x-amz-checksum-sha256": checksum,
          },
          body: bytes,
        });
        const response = await send(options.sign ? await options.sign(request) : request);
        await response.body?.cancel();
        if (response.ok) return "created";
        if (response.status === 412) return "exists";
        if (response.status === 409 && attempt < retries) {
          await new Promise((resolve) => setTimeout(resolve, 50 * 2 ** attempt));
          continue;
        }
        throw new Error(`PUT ${url} answered ${response.status} ${response.statusText}`);
      }
    },
  };
}
