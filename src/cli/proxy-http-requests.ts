/**
 * The client side of a relay that serves requests instead of a session. A client on the 2026-07-28
 * revision has no session: each POST carries one message, and its answer (with the progress of the call,
 * as server-sent events) comes back on that POST's own response. Many clients share one relay, so each
 * request is given an id and a progress token of the relay's own, and gets its own back in the answer.
 */
import type { ServerResponse } from "node:http";
import type { Transport, TransportSendOptions } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { isObject } from "../mcp/mcp-types.js";

type Message = Record<string, unknown>;

/** A request waiting for its answer: where it goes, and the ids the client gave it. */
interface Waiting {
  readonly response: ServerResponse;
  readonly id: unknown;
  readonly progressToken: unknown;
}

export class RequestFront implements Transport {
  onmessage?: (message: JSONRPCMessage) => void;
  onclose?: () => void;
  onerror?: (error: Error) => void;
  #next = 0;
  readonly #waiting = new Map<string, Waiting>();
  /** When a request last came (ms since the epoch). */
  lastUsed = Date.now();

  /** No request is waiting for its answer. */
  idle(): boolean {
    return this.#waiting.size === 0;
  }

  async start(): Promise<void> {}

  async close(): Promise<void> {
    for (const { response } of this.#waiting.values()) response.end();
    this.#waiting.clear();
    this.onclose?.();
  }

  /**
   * One POSTed message for the relay; a request's answer goes to `response` as server-sent events, so
   * that its progress can come first.
   */
  deliver(message: Message, response: ServerResponse): void {
    this.lastUsed = Date.now();
    const method = message.method;
    // A notification is one by its method, whatever id it carries: no answer comes to it.
    if (message.id === undefined || typeof method !== "string" || method.startsWith("notifications/")) {
      response.writeHead(202).end();
      // A cancellation names the client's own id, which the relay never saw: a request is cancelled by
      // closing its response instead (below). A stray response has nothing to answer.
      if (typeof method === "string" && method !== "notifications/cancelled") {
        const { id: _, ...notification } = message;
        this.onmessage?.(notification as JSONRPCMessage);
      }
      return;
    }
    if (method === "initialize") {
      // A handshake has no place in a relay many clients share (it would turn the relay to a 2025 client's).
      response.writeHead(200, { "content-type": "application/json" });
      response.end(
        JSON.stringify({
          jsonrpc: "2.0",
          id: message.id,
          error: {
            code: -32600,
            message: "initialize opens a session: send it without the 2026-07-28 envelope",
          },
        }),
      );
      return;
    }
    const id = `request-${this.#next++}`;
    const params = isObject(message.params) ? message.params : undefined;
    const meta = isObject(params?._meta) ? params._meta : undefined;
    this.#waiting.set(id, { response, id: message.id, progressToken: meta?.progressToken });
    response.on("close", () => {
      // The client went away before its answer: to the relay, the request is cancelled.
      if (!this.#waiting.delete(id)) return;
      this.onmessage?.({
        jsonrpc: "2.0",
        method: "notifications/cancelled",
        params: { requestId: id, reason: "the client closed its HTTP request" },
      } as JSONRPCMessage);
    });
    const ownToken = meta?.progressToken === undefined ? {} : { _meta: { ...meta, progressToken: id } };
    this.onmessage?.({
      ...message,
      id,
      ...(params === undefined ? {} : { params: { ...params, ...ownToken } }),
    } as JSONRPCMessage);
  }

  async send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    const raw = message as Message;
    if (raw.method === undefined) {
      // An answer ends its request's response (one closed meanwhile has nobody to tell).
      const waiting = this.#waiting.get(String(raw.id));
      if (waiting === undefined) return;
      this.#waiting.delete(String(raw.id));
      write(waiting, { ...raw, id: waiting.id });
      waiting.response.end();
      return;
    }
    if (raw.id !== undefined) {
      // A request the server makes of the client: a 2026-07-28 client is reached only through the answer
      // to one of its own requests, and asks for input with input-required answers instead.
      this.onmessage?.({
        jsonrpc: "2.0",
        id: raw.id,
        error: {
          code: -32601,
          message: `the client (2026-07-28, over HTTP) cannot be sent ${String(raw.method)}`,
        },
      } as JSONRPCMessage);
      return;
    }
    // A notification goes on the stream of the request it belongs to, while that is open; others (a log
    // line, a list change) have no stream to go on.
    const waiting =
      options?.relatedRequestId === undefined
        ? undefined
        : this.#waiting.get(String(options.relatedRequestId));
    if (waiting === undefined) return;
    const params = isObject(raw.params) ? raw.params : {};
    // Progress is this request's only when it names the token the relay gave it.
    if (raw.method === "notifications/progress" && params.progressToken !== options?.relatedRequestId) return;
    const progress = raw.method === "notifications/progress" ? { progressToken: waiting.progressToken } : {};
    write(waiting, { ...raw, params: { ...params, ...progress } });
  }
}

function write({ response }: Waiting, message: Message): void {
  if (!response.headersSent) {
    response.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  }
  response.write(`event: message\ndata: ${JSON.stringify(message)}\n\n`);
}
