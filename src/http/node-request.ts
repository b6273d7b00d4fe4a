/**
 * Between Node's http objects (which Express and Fastify build on) and the web-standard Request/Response
 * the middleware core speaks.
 */
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from "node:http";

/**
 * A body-less web Request for a Node request: the method, URL and headers are all the core reads (the
 * body comes from the framework, already parsed). The host is a placeholder; only path and query count.
 */
export function webRequestOf(method: string, url: string, headers: IncomingHttpHeaders): Request {
  return new Request(new URL(url, "http://localhost"), { method, headers: webHeadersOf(headers) });
}

/** Node's header object as web Headers; repeated headers (Set-Cookie) stay separate. */
export function webHeadersOf(headers: IncomingHttpHeaders | OutgoingHttpHeaders): Headers {
  const result = new Headers();
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    if (Array.isArray(value)) for (const item of value) result.append(name, String(item));
    else result.append(name, String(value));
  }
  return result;
}

/** Node-style header values for a web Response's headers: Set-Cookie as a list, the rest as they are. */
export function nodeHeadersOf(headers: Headers): [string, string | string[]][] {
  const result: [string, string | string[]][] = [];
  for (const [name, value] of headers) if (name !== "set-cookie") result.push([name, value]);
  const cookies = headers.getSetCookie();
  if (cookies.length > 0) result.push(["set-cookie", cookies]);
  return result;
}

/** The bytes of a framework's payload (a string, a Buffer, a stream, or nothing). */
export async function bytesOf(payload: unknown): Promise<Uint8Array> {
  if (payload === undefined || payload === null) return new Uint8Array(0);
  if (typeof payload === "string") return Buffer.from(payload, "utf8");
  if (payload instanceof Uint8Array) return payload;
  if (typeof (payload as AsyncIterable<unknown>)[Symbol.asyncIterator] === "function") {
    const chunks: Buffer[] = [];
    for await (const chunk of payload as AsyncIterable<unknown>) {
      chunks.push(typeof chunk === "string" ? Buffer.from(chunk, "utf8") : Buffer.from(chunk as Uint8Array));
    }
    return Buffer.concat(chunks);
  }
  return Buffer.from(String(payload), "utf8");
}
