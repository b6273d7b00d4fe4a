/**
 * A response as the store keeps it, and back: the status, the allow-listed headers and the body. It is
 * the tool result of the core's record, so a store holds nothing else of an HTTP exchange.
 */
import { Buffer } from "node:buffer";
import { redactPaths } from "../core/result-codec.js";
import { HttpHeader } from "./idempotency-key-header.js";
import { isJson } from "./request-fingerprint.js";

/** What a replay needs of the original response. Never `Set-Cookie`, never a request header. */
export interface StoredResponse {
  readonly status: number;
  readonly statusText?: string;
  /** Allow-listed headers, lower-case names, in order. */
  readonly headers: readonly (readonly [string, string])[];
  /** The body as UTF-8 text, or base64 when it is not valid UTF-8. */
  readonly body: string;
  readonly encoding: "utf8" | "base64";
}

/** The headers a replay carries unless `replayHeaders` says otherwise: they describe the representation. */
export const defaultReplayHeaders: readonly string[] = [
  "content-type",
  "content-encoding",
  "content-language",
  "content-location",
  "content-disposition",
  "location",
  "etag",
  "last-modified",
  "link",
  "cache-control",
  "expires",
  "vary",
];

/**
 * Headers that are never stored, whatever the configuration: credentials and cookies (they belong to one
 * exchange and may be secret), and framing headers the replaying server recomputes.
 */
export const neverReplayedHeaders: ReadonlySet<string> = new Set([
  "set-cookie",
  "set-cookie2",
  "cookie",
  "authorization",
  "proxy-authorization",
  "www-authenticate",
  "proxy-authenticate",
  "content-length",
  "transfer-encoding",
  "connection",
  "keep-alive",
  "upgrade",
  "trailer",
  "te",
  HttpHeader.idempotentReplayed.toLowerCase(),
]);

const utf8 = new TextDecoder("utf-8", { fatal: true });

/** Statuses whose response has no body (the Response constructor refuses one). */
export function isNullBodyStatus(status: number): boolean {
  return status === 101 || status === 204 || status === 205 || status === 304;
}

/**
 * What the store keeps of a response: its status, its allow-listed headers, and its body, with the
 * `redact` paths of a JSON body replaced by `"[redacted]"`.
 */
export function storeResponse(
  response: Response,
  body: Uint8Array,
  replayHeaders: ReadonlySet<string>,
  redact: readonly (readonly string[])[] = [],
): StoredResponse {
  const headers: [string, string][] = [];
  for (const [name, value] of response.headers) {
    if (replayHeaders.has(name)) headers.push([name, value]);
  }
  let text: string | undefined;
  try {
    text = utf8.decode(body);
  } catch {
    text = undefined;
  }
  if (text !== undefined && redact.length > 0 && isJson(response.headers.get("content-type"))) {
    text = redactedJson(text, redact);
  }
  return {
    status: response.status,
    ...(response.statusText ? { statusText: response.statusText } : {}),
    headers,
    body: text ?? Buffer.from(body).toString("base64"),
    encoding: text === undefined ? "base64" : "utf8",
  };
}

/** A JSON body with the named fields redacted; a body that does not parse is kept as it is. */
function redactedJson(text: string, redact: readonly (readonly string[])[]): string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return text;
  }
  return JSON.stringify(redactPaths(parsed, redact));
}

/** The replay of a stored response, marked `Idempotent-Replayed: true`. */
export function replayResponse(stored: StoredResponse): Response {
  const headers = new Headers(stored.headers.map(([name, value]) => [name, value]));
  headers.set(HttpHeader.idempotentReplayed, "true");
  // Bytes, not a string: a string body would gain a text/plain Content-Type the original never had.
  const body =
    isNullBodyStatus(stored.status) || stored.body === ""
      ? null
      : Buffer.from(stored.body, stored.encoding === "base64" ? "base64" : "utf8");
  return new Response(body, {
    status: stored.status,
    ...(stored.statusText ? { statusText: stored.statusText } : {}),
    headers,
  });
}

/** A response with the same status and headers, over a body already read. */
export function rebuildResponse(response: Response, body: Uint8Array): Response {
  return new Response(isNullBodyStatus(response.status) || body.length === 0 ? null : body, {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
  });
}
