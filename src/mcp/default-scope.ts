import { ErrorCode, IdempotencyError } from "../core/errors.js";
import { authenticatedClient } from "./mcp-types.js";

/**
 * The namespace of a call made without a `scope` option, from what the framework passed the tool: the
 * core's `"default"` for a call without authentication, `client:<id>` for one the MCP SDK authenticated
 * (its `authInfo`), prefixed so that no client id, not even "default", names the anonymous namespace.
 * Authenticated with nobody in particular (no client id, or a fastmcp `session`) has no namespace of its
 * own: `owner` refuses the call, since "default" would mix it with every anonymous caller's.
 */
export function defaultScope(owner: string, context: unknown): string {
  if (typeof context !== "object" || context === null) return "default";
  const auth = authenticatedClient(context);
  if (auth !== undefined) {
    if (typeof auth.clientId === "string" && auth.clientId !== "") return `client:${auth.clientId}`;
    throw new IdempotencyError(
      ErrorCode.invalidOptions,
      `${owner}: the request is authenticated but its authInfo names no clientId, so it has no namespace ` +
        "of its own: pass the scope option (the user, tenant or client the token stands for).",
    );
  }
  const session = (context as { session?: unknown }).session;
  if (session === undefined || session === null) return "default";
  throw new IdempotencyError(
    ErrorCode.invalidOptions,
    `${owner}: the call is authenticated (context.session), and without a scope it would share the ` +
      "namespace of callers without authentication: pass the scope option (e.g. the session's user id).",
  );
}
