/**
 * What makes two requests "the same request" for one key: the method, the path with its query, and the
 * body. JSON bodies count by their canonical form (key order and whitespace do not matter), other bodies
 * byte for byte. Headers never count, so nothing secret (Authorization, cookies) goes into it.
 */
import { createHash } from "node:crypto";
import { canonicalJson } from "../core/canonical-json.js";
import { ErrorCode, IdempotencyError } from "../core/errors.js";
import { maxArgumentDepth } from "../core/option-checks.js";

/** The significant part of a request; the core fingerprints it. */
export interface RequestPrint {
  readonly method: string;
  /** Path and query string, as sent. */
  readonly path: string;
  /** `json:<sha256>`, `raw:<sha256>`, or null for no body. */
  readonly body: string | null;
}

/**
 * The print of `request`. Its body is read from a clone, so the handler can still read it; `parsedBody`,
 * when given, stands in for the body a framework already parsed (a Buffer or string counts as raw bytes,
 * anything else as JSON; `undefined` means no body).
 */
export async function requestPrint(request: Request, parsedBody?: () => unknown): Promise<RequestPrint> {
  const url = new URL(request.url);
  const contentType = request.headers.get("content-type");
  let body: string | null;
  if (parsedBody) {
    body = valueDigest(await parsedBody(), contentType);
  } else if (request.body === null) {
    body = null;
  } else {
    body = bytesDigest(new Uint8Array(await request.clone().arrayBuffer()), contentType);
  }
  return { method: request.method.toUpperCase(), path: url.pathname + url.search, body };
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

function bytesDigest(bytes: Uint8Array, contentType: string | null): string | null {
  if (bytes.length === 0) return null;
  if (isJson(contentType)) {
    const canonical = canonicalText(() => JSON.parse(utf8.decode(bytes)));
    if (canonical !== undefined) return `json:${sha256(canonical)}`;
  }
  // Not JSON, or JSON the handler will reject anyway: the exact bytes decide.
  return `raw:${sha256(bytes)}`;
}

function valueDigest(value: unknown, contentType: string | null): string | null {
  if (value === undefined) return null;
  if (value instanceof Uint8Array) return bytesDigest(value, contentType);
  if (typeof value === "string") return bytesDigest(new TextEncoder().encode(value), contentType);
  const canonical = canonicalText(() => value);
  return canonical === undefined ? `raw:${sha256(plainJson(value))}` : `json:${sha256(canonical)}`;
}

/** A parsed body with no canonical form still counts by its JSON text; one with none at all is refused. */
function plainJson(value: unknown): string {
  try {
    return JSON.stringify(value) ?? "";
  } catch (error) {
    // Nested too deep for the stack, or a cycle: no text to compare, so no request can be told from another.
    throw new IdempotencyError(
      ErrorCode.invalidArguments,
      `The request body cannot be fingerprinted (${error instanceof Error ? error.message : String(error)}); ` +
        `send JSON nested at most ${maxArgumentDepth} levels deep.`,
      { cause: error },
    );
  }
}

function canonicalText(read: () => unknown): string | undefined {
  try {
    return canonicalJson(read());
  } catch {
    return undefined;
  }
}

/** `application/json`, `application/problem+json`, `text/json`, with or without parameters. */
export function isJson(contentType: string | null): boolean {
  if (contentType === null) return false;
  const essence = contentType.split(";")[0]!.trim().toLowerCase();
  return essence === "application/json" || essence === "text/json" || essence.endsWith("+json");
}

function sha256(data: string | Uint8Array): string {
  return createHash("sha256").update(data).digest("hex");
}
