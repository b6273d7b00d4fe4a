/**
 * OP-3, content-addressed writes: the key is the SHA-256 of the content, so writing the same content
 * twice is the same write, and a target that creates only-if-absent makes it idempotent by construction.
 */
import { createHash, randomBytes } from "node:crypto";
import { link, mkdir, open, unlink } from "node:fs/promises";
import { join } from "node:path";
import { canonicalJson } from "../core/canonical-json.js";
import { ErrorCode, IdempotencyError } from "../core/errors.js";

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
}

/**
 * A directory as a content target. Each object is written to a private temp file in its final
 * directory, flushed, then `link()`ed to its name: link fails with EEXIST when the name exists, so
 * the create is atomic, a reader never sees a partial file, and an existing file counts as success.
 *
 * @example
 * import { fileSystemTarget, writeContentOnce } from "idempotool/ops";
 *
 * const { key } = await writeContentOnce(fileSystemTarget({ directory: "/var/artifacts" }), "hello");
 */
export function fileSystemTarget(
  options: FileSystemTargetOptions,
): ContentTarget & { pathOf(key: string): string } {
  const fsync = options.fsync ?? true;
  const pathOf = (key: string) => {
    checkKey(key);
    return join(options.directory, key.slice(0, 2), key);
  };
  return {
    pathOf,
    async putIfAbsent(key, bytes) {
      const final = pathOf(key);
      const directory = join(options.directory, key.slice(0, 2));
      await mkdir(directory, { recursive: true });
      // Dot-prefixed and random: never mistaken for an object, never shared with a concurrent writer.
      const temp = join(directory, `.tmp-${key.slice(0, 16)}-${randomBytes(8).toString("hex")}`);
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
  };
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
