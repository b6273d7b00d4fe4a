/**
 * The two generations of the MCP protocol the proxy bridges. A client on the 2026-07-28 revision opens with
 * `server/discover` instead of `initialize`, and every request of its carries an envelope in `_meta`: the
 * revision, the client's identity and its capabilities. Its results carry `resultType`, and list results
 * say how long they may be cached. A server on a 2025 revision knows none of that, so the proxy answers
 * the discovery itself (from an `initialize` it sends on the client's behalf), takes the envelope off what
 * it relays to the server, and gives the server's results the fields a 2026 client requires.
 */

import { isObject } from "../mcp/mcp-types.js";

/** The first revision of the generation without sessions: discovery, envelopes, multi-round-trip calls. */
export const modernRevision = "2026-07-28";
/** The revision the proxy asks for when it initializes a server for a 2026-07-28 client. */
export const legacyRevision = "2025-11-25";

/** The keys of the request envelope a 2026-07-28 client puts in every request's `_meta`. */
const envelopeKeys = [
  "io.modelcontextprotocol/protocolVersion",
  "io.modelcontextprotocol/clientInfo",
  "io.modelcontextprotocol/clientCapabilities",
  "io.modelcontextprotocol/logLevel",
] as const;
const [protocolVersionKey, clientInfoKey, clientCapabilitiesKey, logLevelKey] = envelopeKeys;

/** Log levels, least severe first. */
const logLevels = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"];

/** Results a 2026-07-28 client expects cache fields on. */
const cacheableMethods = new Set([
  "tools/list",
  "prompts/list",
  "resources/list",
  "resources/templates/list",
  "resources/read",
  "server/discover",
]);

/** The request envelope of a message's params, or undefined when it carries none (a 2025 request). */
export function envelopeOf(params: unknown): Record<string, unknown> | undefined {
  const meta = isObject(params) ? params._meta : undefined;
  if (!isObject(meta) || typeof meta[protocolVersionKey] !== "string") return undefined;
  const envelope: Record<string, unknown> = {};
  for (const key of envelopeKeys) if (meta[key] !== undefined) envelope[key] = meta[key];
  return envelope;
}

/**
 * Whether a log line at `level` is one a 2026-07-28 request asked for with `asked` (the level in its
 * envelope): at or above it. A request that names no level gets no log lines at all.
 */
export function logLineWanted(level: unknown, asked: unknown): boolean {
  const least = logLevels.indexOf(String(asked));
  return least >= 0 && logLevels.indexOf(String(level)) >= least;
}

/** The log level a request's envelope asks for, if it names one. */
export function logLevelOf(params: unknown): unknown {
  return envelopeOf(params)?.[logLevelKey];
}

/** Params with the envelope in `_meta` (replacing any), for a request of the proxy's own. */
export function withEnvelope(
  params: Record<string, unknown>,
  envelope: Record<string, unknown>,
): Record<string, unknown> {
  const meta = isObject(params._meta) ? params._meta : {};
  return { ...params, _meta: { ...meta, ...envelope } };
}

/** Params without the envelope (and without `_meta` if nothing else was in it), for a 2025 server. */
export function withoutEnvelope(params: Record<string, unknown>): Record<string, unknown> {
  if (!isObject(params._meta)) return params;
  const meta = { ...params._meta };
  for (const key of envelopeKeys) delete meta[key];
  const { _meta: _, ...rest } = params;
  return Object.keys(meta).length === 0 ? rest : { ...rest, _meta: meta };
}

/**
 * A result in the shape a 2026-07-28 client requires: a `resultType` ("complete" unless it says
 * otherwise) and, on the results it may cache, `ttlMs` and `cacheScope` (not cached, private, unless the
 * server said more).
 */
export function asModernResult(method: string, result: Record<string, unknown>): Record<string, unknown> {
  const stamped = result.resultType === undefined ? { ...result, resultType: "complete" } : result;
  if (!cacheableMethods.has(method) || stamped.resultType !== "complete") return stamped;
  return {
    ...stamped,
    ttlMs: typeof stamped.ttlMs === "number" ? stamped.ttlMs : 0,
    cacheScope: stamped.cacheScope === "public" ? "public" : "private",
  };
}

/**
 * What the proxy initializes a 2025 server with, for a client whose envelope says who it is and what it
 * can do (the proxy names itself when the client gave no name).
 */
export function initializeParamsFor(envelope: Record<string, unknown> | undefined): Record<string, unknown> {
  const clientInfo = envelope?.[clientInfoKey];
  const capabilities = envelope?.[clientCapabilitiesKey];
  return {
    protocolVersion: legacyRevision,
    capabilities: isObject(capabilities) ? capabilities : {},
    clientInfo: isObject(clientInfo) ? clientInfo : { name: "idempotool-proxy", version: "0.0.0" },
  };
}

/** The answer to `server/discover` for a 2025 server, from its answer to `initialize`. */
export function discoveryFrom(initialized: Record<string, unknown>): Record<string, unknown> {
  const serverInfo = initialized.serverInfo;
  return asModernResult("server/discover", {
    supportedVersions: [modernRevision],
    capabilities: isObject(initialized.capabilities) ? initialized.capabilities : {},
    ...(typeof initialized.instructions === "string" ? { instructions: initialized.instructions } : {}),
    ...(isObject(serverInfo) ? { _meta: { "io.modelcontextprotocol/serverInfo": serverInfo } } : {}),
  });
}
