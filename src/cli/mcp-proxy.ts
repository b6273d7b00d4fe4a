/**
 * The proxy itself: JSON-RPC messages relayed between an MCP client and an MCP server, as they are,
 * except `tools/list` results (guarded tools gain a required `idempotency_key`) and `tools/call`
 * requests for guarded tools, which go through `idempotent()` on the store. Relaying the raw messages
 * keeps everything else (initialize and capabilities, resources, prompts, notifications, progress,
 * cancellation, requests the server makes of the client, errors) exactly what the two sides said.
 * A client on the 2026-07-28 revision may sit in front of a server on a 2025 one: the proxy bridges the
 * two (proxy-revisions.ts).
 */
import { randomUUID } from "node:crypto";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { defaults, Effect } from "../core/options.js";
import { notExecuted } from "../core/outcomes.js";
import { isObject } from "../mcp/mcp-types.js";
import { type GuardedCallOptions, guardedCalls, UpstreamError } from "./guarded-calls.js";
import {
  asModernResult,
  discoveryFrom,
  envelopeOf,
  initializeParamsFor,
  logLevelOf,
  logLineWanted,
  withEnvelope,
  withoutEnvelope,
} from "./proxy-revisions.js";
import {
  type Guard,
  guardedTool,
  guardOf,
  type ListedTool,
  type ToolRules,
  unknownToolsIn,
} from "./proxy-tools.js";

export interface McpProxyOptions
  extends Pick<
    GuardedCallOptions,
    "store" | "ttlMs" | "leaseMs" | "waitMs" | "similarWindowMs" | "withoutKeyWindowMs"
  > {
  /** The connection to the MCP client (the proxy is its server). */
  readonly client: Transport;
  /** The connection to the real MCP server (the proxy is its client). */
  readonly server: Transport;
  /** The user's word on named tools; the others are classified. */
  readonly rules: ToolRules;
  /** The namespace this connection's keys live in; a function is asked at each call. */
  readonly scope: string | (() => string);
  /** One line for the operator (stderr). */
  readonly log: (line: string) => void;
  /**
   * How long the server may take to answer `server/discover` (for a 2026-07-28 client) before the proxy
   * takes it for a 2025 server that ignores methods it does not know, and initializes it. Default 5 s.
   */
  readonly discoveryTimeoutMs?: number | undefined;
  /**
   * The client side is shared by several clients (a relay): a server message is sent only where its
   * request is known for certain (progress, by its token); never to a guessed request.
   */
  readonly sharedByClients?: boolean | undefined;
  /**
   * Whether a client request's answer can still reach the client (over HTTP: its POST is still open); a
   * guessed message is related only to such a request. Default: every open request.
   */
  readonly reachable?: ((id: RequestId) => boolean) | undefined;
}

/** Why the proxy stopped. */
export interface ProxyEnd {
  /** Which side went away first, or `config` when the rules name a tool the server does not have. */
  readonly by: "client" | "server" | "config";
  readonly reason: string;
}

export interface McpProxy {
  /** Settles when either side has gone (the other is closed then), with why. */
  readonly ended: Promise<ProxyEnd>;
  /** Close both sides. */
  close(): Promise<void>;
}

type Message = Record<string, unknown> & { readonly jsonrpc: "2.0" };
type RequestId = string | number;

const maxPages = 100;
/** How often a tools list that changed while it was fetched is fetched again. */
const maxRelists = 3;
/** How long the server may take to finish its calls once the client has gone. */
const drainMs = 30_000;
const defaultDiscoveryTimeoutMs = 5_000;

/** The server did not answer a request of the proxy's own in time. */
class NoAnswer extends Error {
  override name = "NoAnswer";
  constructor(method: string, timeoutMs: number) {
    super(`the MCP server did not answer ${method} within ${timeoutMs} ms`);
  }
}

/**
 * Relay between `client` and `server`, guarding side-effectful tools. Both transports are started here.
 * @example
 * const proxy = await startMcpProxy({ client, server, store, rules: new Map(), scope: "default", log: console.error });
 * console.error((await proxy.ended).reason);
 */
export async function startMcpProxy(options: McpProxyOptions): Promise<McpProxy> {
  const { client, server, store, rules, scope, log } = options;
  const discoveryTimeoutMs = options.discoveryTimeoutMs ?? defaultDiscoveryTimeoutMs;
  const scopeOf = typeof scope === "function" ? scope : () => scope;
  // Our own requests to the server carry ids no client picks, so their answers are never relayed.
  const idPrefix = `idempotool-proxy-${randomUUID()}-`;
  let nextId = 0;
  const pending = new Map<string, { resolve(result: unknown): void; reject(error: unknown): void }>();
  const clientListings = new Set<RequestId>();
  const clientInitializations = new Set<RequestId>();
  // Which client request a progress token belongs to, so a transport with one stream per request (HTTP)
  // sends the server's progress on that request's stream.
  const progressOwners = new Map<string | number, RequestId>();
  // The client's requests not yet answered, oldest first, with the log level a 2026-07-28 request asked
  // for. A server on stdio cannot say which request a log line, a sampling or an elicitation request
  // belongs to; over HTTP the proxy sends it on the stream of the newest, so a client that only POSTs (no
  // GET stream) still gets it.
  const openRequests = new Map<RequestId, unknown>();
  // The guarded call each client request id names now. A cancellation marks that call, not the id: a
  // client that reuses the id afterwards must get the new call's answer, never the cancelled one's.
  const guardedRequests = new Map<RequestId, { cancelled: boolean }>();
  const running = new Set<Promise<void>>();
  let guards: Map<string, Guard> | undefined;
  let listing: Promise<Map<string, Guard>> | undefined;
  // Every tool guarded so far, with the guard it was shown with: a later list that calls one read-only
  // does not unguard it, and a call is judged by what the client was shown, whatever the proxy's own
  // older list says (a server may relabel a tool without a list_changed notice).
  const guardedBefore = new Map<string, Guard>();
  // Counts the server's list_changed notices: a list fetched across one may already be stale.
  let listGeneration = 0;
  let checkedRules = false;
  // A client on the 2026-07-28 revision: its answers get that revision's shape. A client that initialized
  // is on a 2025 one, whatever its later requests carry in `_meta`.
  let modernClient = false;
  let clientInitialized = false;
  // The latest envelope it sent, which requests of the proxy's own carry to a 2026-07-28 server.
  let clientEnvelope: Record<string, unknown> = {};
  // What the server speaks, once a 2026-07-28 client needs to know: learned by discovering it, and on a
  // 2025 server by initializing it; the answer the client's own discovery gets.
  let server2026: boolean | undefined;
  let discovery: Promise<Record<string, unknown>> | undefined;
  // The method of each request a 2026-07-28 client sent a 2025 server, whose answer needs that shape.
  const bridged = new Map<RequestId, string>();

  let resolveEnded!: (end: ProxyEnd) => void;
  const ended = new Promise<ProxyEnd>((resolve) => {
    resolveEnded = resolve;
  });
  let ending: ProxyEnd | undefined;
  /** Give up on every request of ours the server has not answered: a guarded call settles as unknown. */
  const abandonPending = (reason: string) => {
    for (const { reject } of pending.values()) reject(new Error(reason));
    pending.clear();
  };
  const end = (why: ProxyEnd) => {
    if (ending) return;
    ending = why;
    let drain: NodeJS.Timeout | undefined;
    if (why.by === "client" && pending.size > 0) {
      // The server is still there: let it finish the calls it runs, so their outcomes are recorded and
      // the client's retry (after a reconnect) gets them back instead of an unknown outcome.
      log(
        `${why.reason}; waiting up to ${drainMs / 1000} s for the server to finish ${pending.size} call(s)`,
      );
      drain = setTimeout(() => abandonPending("the proxy stopped before the MCP server answered"), drainMs);
    } else {
      abandonPending("the MCP server exited before answering");
    }
    void Promise.allSettled([...running]).then(async () => {
      clearTimeout(drain);
      await Promise.allSettled([client.close(), server.close()]);
      resolveEnded(why);
    });
  };

  const sendToClient = (message: Message, relatedRequestId?: RequestId) => {
    if (message.method === undefined && message.id !== undefined)
      openRequests.delete(message.id as RequestId);
    return client
      .send(message as JSONRPCMessage, relatedRequestId === undefined ? undefined : { relatedRequestId })
      .catch((error: unknown) => {
        if (ending?.by !== "client") log(`could not answer the client: ${String(error)}`);
      });
  };
  /**
   * The client request a message of the server's own most likely belongs to: the newest still open whose
   * stream still reaches the client.
   */
  const newestOpen = (): RequestId | undefined => {
    let newest: RequestId | undefined;
    for (const id of openRequests.keys()) if (options.reachable?.(id) ?? true) newest = id;
    return newest;
  };
  const sendToServer = (message: Message) =>
    server
      .send(message as JSONRPCMessage)
      .catch((error: unknown) => log(`could not reach the server: ${String(error)}`));

  /**
   * A request of our own to the server, in the revision it speaks; with `timeoutMs`, given up on (and its
   * late answer ignored) when none came by then.
   */
  const request = (method: string, params: Record<string, unknown>, timeoutMs?: number): Promise<unknown> => {
    // Nothing was sent: a guarded call claimed before the client left frees its key for the retry.
    if (ending) return Promise.reject(notExecuted(new Error("the proxy is stopping")));
    const id = `${idPrefix}${nextId++}`;
    // A client's own request (a guarded call) keeps its envelope; the proxy's own gets the latest one.
    const sent =
      server2026 === true
        ? envelopeOf(params) === undefined
          ? withEnvelope(params, clientEnvelope)
          : params
        : server2026 === false
          ? withoutEnvelope(params)
          : params;
    return new Promise((resolve, reject) => {
      const timer =
        timeoutMs === undefined
          ? undefined
          : setTimeout(() => {
              if (pending.delete(id)) reject(new NoAnswer(method, timeoutMs));
            }, timeoutMs);
      pending.set(id, {
        resolve: (result) => {
          clearTimeout(timer);
          resolve(result);
        },
        reject: (error) => {
          clearTimeout(timer);
          reject(error);
        },
      });
      server.send({ jsonrpc: "2.0", id, method, params: sent } as JSONRPCMessage).catch((error: unknown) => {
        pending.delete(id);
        reject(error);
      });
    });
  };

  /** Every page of the server's `tools/list`. */
  const listTools = async (): Promise<ListedTool[]> => {
    const listed: ListedTool[] = [];
    let cursor: unknown;
    for (let page = 0; page < maxPages; page++) {
      const result = (await request("tools/list", cursor === undefined ? {} : { cursor })) as {
        tools?: unknown;
        nextCursor?: unknown;
      };
      if (Array.isArray(result.tools)) listed.push(...result.tools.filter(isListedTool));
      cursor = result.nextCursor;
      if (typeof cursor !== "string") break;
    }
    return listed;
  };

  /** Every tool the server lists, and how each is treated; the first full list checks the rules. */
  const knownGuards = (): Promise<Map<string, Guard>> => {
    if (guards) return Promise.resolve(guards);
    listing ??= (async () => {
      let listed: ListedTool[];
      let current = false;
      for (let attempt = 1; ; attempt++) {
        const generation = listGeneration;
        listed = await listTools();
        current = generation === listGeneration;
        // A tool may have turned side-effectful while the server answered: a guard decided on a stale
        // list would pass its calls through unguarded, so list again. A server that never stops
        // changing its list has its latest answer used, but not kept.
        if (current || attempt >= maxRelists) break;
      }
      const fresh = guardsOf(listed, rules, guardedBefore);
      for (const [name, guard] of fresh) if (guard.guarded) guardedBefore.set(name, guard);
      if (!checkedRules) {
        checkedRules = true;
        const unknown = unknownToolsIn(rules, listed);
        if (unknown.length > 0) {
          const reason =
            `the tool rules name ${unknown.join(", ")}, which the server does not have (its tools: ` +
            `${listed.map((tool) => tool.name).join(", ") || "none"})`;
          end({ by: "config", reason });
          throw new Error(reason);
        }
        log(summary(fresh));
      }
      if (current) guards = fresh;
      return fresh;
    })().finally(() => {
      listing = undefined;
    });
    return listing;
  };

  /**
   * The server's answer to discovery, asked once for a 2026-07-28 client. A server that does not know
   * `server/discover` speaks a 2025 revision: the proxy initializes it on the client's behalf and answers
   * the discovery from that. Either way the server's tools are listed next, as after an `initialize`.
   */
  const discover = (): Promise<Record<string, unknown>> => {
    discovery ??= (async () => {
      let answer: Record<string, unknown>;
      try {
        const discovered = await request(
          "server/discover",
          withEnvelope({}, clientEnvelope),
          discoveryTimeoutMs,
        );
        answer = asObject(discovered);
        server2026 = true;
      } catch (error) {
        // A 2025 server refuses the method, or (some) never answers a method it does not know.
        if (!(error instanceof UpstreamError || error instanceof NoAnswer)) throw error;
        const initialized = asObject(await request("initialize", initializeParamsFor(clientEnvelope)));
        await sendToServer({ jsonrpc: "2.0", method: "notifications/initialized" });
        server2026 = false;
        answer = discoveryFrom(initialized);
      }
      track(knownGuards().then(nothing, nothing));
      return answer;
    })();
    // A server that could not be reached is asked again by the next request.
    discovery.catch(() => {
      discovery = undefined;
    });
    return discovery;
  };

  /** Send the client an answer; a 2026-07-28 client's results get that revision's shape. */
  const answer = (id: RequestId, method: string, body: { result: unknown } | { error: unknown }) => {
    if (modernClient && "result" in body && isObject(body.result)) {
      return sendToClient({ jsonrpc: "2.0", id, result: asModernResult(method, body.result) });
    }
    return sendToClient({ jsonrpc: "2.0", id, ...body });
  };

  const answerGuarded = guardedCalls({
    store,
    ttlMs: options.ttlMs,
    leaseMs: options.leaseMs,
    waitMs: options.waitMs,
    similarWindowMs: options.similarWindowMs,
    withoutKeyWindowMs: options.withoutKeyWindowMs,
    forward: (params) => request("tools/call", params),
  });
  // The window a guarded tool's key description states is the one its records use; the key is optional
  // where a call without one is keyed by its arguments.
  const ttlMs = options.ttlMs ?? defaults.ttlMs;
  const shown = { ttlMs, keyRequired: options.withoutKeyWindowMs === undefined };

  const answerCall = async (message: Message, id: RequestId): Promise<void> => {
    const params = (isObject(message.params) ? message.params : {}) as Record<string, unknown>;
    const name = params.name;
    if (typeof name !== "string") {
      // No tool can be judged by a name that is not one; relayed, a lenient server might run something.
      await answer(id, "tools/call", {
        error: { code: -32602, message: "idempotool proxy: a tools/call needs a tool name (a string)." },
      });
      return;
    }
    let guard: Guard | undefined;
    try {
      guard = (await knownGuards()).get(name);
      if (guard === undefined) {
        // The server may have added it without a list_changed notice: ask once more.
        guards = undefined;
        guard = (await knownGuards()).get(name);
      }
      if (guard === undefined) {
        // The server does not have it: say so as a server would, before any key is read or recorded. A
        // server's own "not found" result would otherwise be kept as the key's outcome.
        await answer(id, "tools/call", { error: { code: -32602, message: `Tool ${name} not found` } });
        return;
      }
      // A tool the client was shown as taking a key stays guarded for it.
      if (!guard.guarded) guard = guardedBefore.get(name) ?? guard;
    } catch (error) {
      if (ending) return;
      await answer(id, "tools/call", {
        error: {
          code: -32603,
          message: `idempotool proxy: cannot list the server's tools: ${String(error)}`,
        },
      });
      return;
    }
    if (!guard.guarded) {
      await relay(message);
      return;
    }
    const ticket = { cancelled: false };
    guardedRequests.set(id, ticket);
    const multiRoundTrip = server2026 === true && envelopeOf(params) !== undefined;
    const outcome = await answerGuarded(name, guard.effect, params, scopeOf(), multiRoundTrip);
    if (guardedRequests.get(id) === ticket) guardedRequests.delete(id);
    forgetProgress(id);
    // A client that cancelled its request expects no answer to it.
    if (!ticket.cancelled) await answer(id, "tools/call", outcome);
  };

  /** Relay a client's message to the server; a 2026-07-28 request to a 2025 server loses its envelope. */
  const relay = (message: Message) => {
    if (!modernClient || server2026 !== false || envelopeOf(message.params) === undefined) {
      return sendToServer(message);
    }
    const id = message.id as RequestId | undefined;
    if (id !== undefined && typeof message.method === "string") bridged.set(id, message.method);
    return sendToServer({ ...message, params: withoutEnvelope(message.params as Record<string, unknown>) });
  };

  const forgetProgress = (id: RequestId) => {
    for (const [token, owner] of progressOwners) if (owner === id) progressOwners.delete(token);
  };

  const track = (work: Promise<void>) => {
    running.add(work);
    void work.finally(() => running.delete(work));
  };

  // A 2026-07-28 client's messages wait, in order, until the server's revision is known.
  let backlog: Promise<void> | undefined;
  client.onmessage = (raw) => {
    const message = raw as Message;
    if (message.method === "initialize") clientInitialized = true;
    const envelope = clientInitialized ? undefined : envelopeOf(message.params);
    if (!clientInitialized && (envelope !== undefined || message.method === "server/discover")) {
      modernClient = true;
      if (envelope !== undefined) clientEnvelope = envelope;
    }
    if (backlog === undefined && (!modernClient || server2026 !== undefined)) {
      receive(message);
      return;
    }
    const next = (backlog ?? Promise.resolve()).then(async () => {
      try {
        await discover();
      } catch (error) {
        const id = message.id as RequestId | undefined;
        if (id === undefined || message.method === undefined) return;
        const reason = `idempotool proxy: cannot reach the MCP server: ${String(error)}`;
        await answer(id, String(message.method), { error: { code: -32603, message: reason } });
        return;
      }
      receive(message);
    });
    backlog = next;
    void next.finally(() => {
      if (backlog === next) backlog = undefined;
    });
  };

  /** A client's message, once the server's revision is known where it matters. */
  const receive = (message: Message) => {
    const method = typeof message.method === "string" ? message.method : undefined;
    const id = message.id as RequestId | undefined;
    if (method === "server/discover" && id !== undefined) {
      track(
        discover().then((discovered) =>
          answer(id, method, { result: withIdempotencyCapability(discovered, ttlMs) }),
        ),
      );
      return;
    }
    if (method !== undefined && id !== undefined) {
      const token = (message.params as { _meta?: { progressToken?: unknown } } | undefined)?._meta
        ?.progressToken;
      if (typeof token === "string" || typeof token === "number") progressOwners.set(token, id);
      openRequests.set(id, logLevelOf(message.params));
      if (method === "tools/call") {
        track(answerCall(message, id));
        return;
      }
      if (method === "tools/list") clientListings.add(id);
      if (method === "initialize") clientInitializations.add(id);
    } else if (method === "tools/call") {
      // A call with no id expects no answer, so the guard has nothing to send back; relayed, it would
      // reach the server unguarded (a lenient server runs it). It goes nowhere.
      log("dropped a tools/call without an id: a call needs an id to be answered");
      return;
    } else if (method === "notifications/cancelled") {
      const cancelledId = (message.params as { requestId?: RequestId } | undefined)?.requestId;
      // A cancelled request may never be answered: what waits for its answer goes (a tools/list answer
      // that comes all the same is still guarded).
      if (cancelledId !== undefined) {
        bridged.delete(cancelledId);
        forgetProgress(cancelledId);
        openRequests.delete(cancelledId);
      }
      // A guarded call is never cut short: its outcome is recorded, and the client's retry gets it.
      const guarded = cancelledId === undefined ? undefined : guardedRequests.get(cancelledId);
      if (guarded) {
        guarded.cancelled = true;
        return;
      }
    }
    void relay(message);
    if (method === "notifications/initialized") {
      // Learn the tools now, so a rule naming a tool the server lacks stops the proxy at once.
      track(
        knownGuards().then(
          () => undefined,
          () => undefined,
        ),
      );
    }
  };

  server.onmessage = (raw) => {
    const message = raw as Message;
    const id = message.id as RequestId | undefined;
    if (message.method === undefined && typeof id === "string" && id.startsWith(idPrefix)) {
      // An answer to a request of ours; one given up on (the proxy is stopping) goes nowhere.
      const waiter = pending.get(id);
      pending.delete(id);
      if (isObject(message.error)) waiter?.reject(new UpstreamError(message.error as UpstreamError["error"]));
      else waiter?.resolve(message.result);
      return;
    }
    if (message.method === "notifications/tools/list_changed") {
      guards = undefined;
      listGeneration++;
    }
    if (message.method === "notifications/progress") {
      const token = (message.params as { progressToken?: string | number } | undefined)?.progressToken;
      const owner = token === undefined ? undefined : progressOwners.get(token);
      // A token names its request: one whose owner is gone (cancelled, answered) has nobody to tell.
      void sendToClient(message, owner);
      return;
    }
    if (message.method === undefined && id !== undefined) forgetProgress(id);
    const bridgedMethod = message.method === undefined && id !== undefined ? bridged.get(id) : undefined;
    if (bridgedMethod !== undefined && id !== undefined) {
      bridged.delete(id);
      const result =
        clientListings.delete(id) && isObject(message.result)
          ? withGuards(message.result, rules, guardedBefore, shown)
          : message.result;
      void answer(id, bridgedMethod, isObject(message.error) ? { error: message.error } : { result });
      return;
    }
    if (
      message.method === undefined &&
      id !== undefined &&
      clientInitializations.delete(id) &&
      isObject(message.result)
    ) {
      void sendToClient({ ...message, result: withIdempotencyCapability(message.result, ttlMs) });
      return;
    }
    if (
      message.method === undefined &&
      id !== undefined &&
      clientListings.delete(id) &&
      isObject(message.result)
    ) {
      void sendToClient({ ...message, result: withGuards(message.result, rules, guardedBefore, shown) });
      return;
    }
    // A log line, a list change, a sampling or elicitation request: most likely the newest open request's.
    const related = message.method === undefined || options.sharedByClients ? undefined : newestOpen();
    if (message.method === "notifications/message" && modernClient && !wanted(message, related)) return;
    void sendToClient(message, related);
  };

  /**
   * Whether a 2026-07-28 client asked for this log line: a request gets log lines only at or above the
   * level its `_meta` names, and one that names none gets none (a 2025 server logs to whoever listens).
   */
  const wanted = (message: Message, related: RequestId | undefined): boolean =>
    related !== undefined &&
    logLineWanted(isObject(message.params) ? message.params.level : undefined, openRequests.get(related));

  client.onclose = () => end({ by: "client", reason: "the client closed the connection" });
  server.onclose = () => {
    abandonPending("the MCP server exited before answering");
    end({ by: "server", reason: "the MCP server exited" });
  };
  client.onerror = (error) => log(`client connection: ${error.message}`);
  server.onerror = (error) => log(`server connection: ${error.message}`);

  await server.start();
  await client.start();
  return {
    ended,
    close: async () => {
      end({ by: "client", reason: "stopped" });
      await ended;
    },
  };
}

/**
 * How each listed tool is treated. A name listed twice is guarded: which copy the server runs is its
 * own choice, and a client may have been shown either.
 */
function guardsOf(
  listed: readonly ListedTool[],
  rules: ToolRules,
  guardedBefore: ReadonlyMap<string, Guard>,
): Map<string, Guard> {
  const guards = new Map<string, Guard>();
  const before = new Set(guardedBefore.keys());
  for (const tool of listed) {
    const guard = guardOf(tool, rules, before);
    const other = guards.get(tool.name);
    guards.set(tool.name, other === undefined ? guard : listedTwice(other, guard));
  }
  return guards;
}

function listedTwice(first: Guard, second: Guard): Guard {
  const guarded = first.guarded ? first : second.guarded ? second : undefined;
  return {
    guarded: true,
    effect: guarded?.effect ?? Effect.irreversible,
    why: "the server lists it twice",
  };
}

/**
 * The server's `initialize` result, saying that its tools take idempotency keys (experimental: the field
 * the MCP spec discussion proposes), and for how long a key's outcome is kept. A server that declares no
 * tools is left as it is: a `tools` capability would tell the client to list tools it does not have.
 */
function withIdempotencyCapability(result: Record<string, unknown>, ttlMs: number): Record<string, unknown> {
  const capabilities = isObject(result.capabilities) ? result.capabilities : {};
  const tools = capabilities.tools;
  if (!isObject(tools)) return result;
  return {
    ...result,
    capabilities: {
      ...capabilities,
      tools: { ...tools, idempotency: { retentionSeconds: Math.floor(ttlMs / 1000) } },
    },
  };
}

/** A `tools/list` result with each guarded tool given its key. */
function withGuards(
  result: Record<string, unknown>,
  rules: ToolRules,
  guardedBefore: Map<string, Guard>,
  shown: { ttlMs: number; keyRequired: boolean },
): Record<string, unknown> {
  if (!Array.isArray(result.tools)) return result;
  const guards = guardsOf(result.tools.filter(isListedTool), rules, guardedBefore);
  return {
    ...result,
    tools: result.tools.map((tool: unknown) => {
      const guard = isListedTool(tool) ? guards.get(tool.name) : undefined;
      if (!isListedTool(tool) || !guard?.guarded) return tool;
      // A client told a tool takes a key keeps sending one: keep guarding it.
      guardedBefore.set(tool.name, guard);
      return guardedTool(tool, shown.ttlMs, shown.keyRequired);
    }),
  };
}

function summary(guards: Map<string, Guard>): string {
  const guarded = [...guards].filter(([, guard]) => guard.guarded).map(([name]) => name);
  const passed = [...guards].filter(([, guard]) => !guard.guarded).map(([name]) => name);
  return (
    `guarding ${guarded.length} of ${guards.size} tools (${guarded.join(", ") || "none"}); ` +
    `passing through ${passed.join(", ") || "none"}`
  );
}

function isListedTool(value: unknown): value is ListedTool {
  return isObject(value) && typeof value.name === "string";
}

function nothing(): void {}

/** An answer the proxy reads as an object; anything else is a server that does not speak MCP. */
function asObject(value: unknown): Record<string, unknown> {
  if (!isObject(value)) throw new Error(`the MCP server answered ${JSON.stringify(value)}, not an object`);
  return value;
}
