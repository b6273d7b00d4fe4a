/**
 * `idempotool/http/hono`: the Idempotency-Key middleware for Hono. Hono speaks Request/Response already,
 * so this is the web-standard core with the principal read from Hono's context.
 * @module
 */
import type { Context, Env, MiddlewareHandler } from "hono";
import { createIdempotencyHandler } from "./idempotency-middleware.js";
import { type SharedMiddlewareOptions, scopeOption } from "./middleware-options.js";

/** Options of {@link honoIdempotency}: the shared ones, with `scope` reading Hono's context. */
export interface HonoIdempotencyOptions<E extends Env> extends SharedMiddlewareOptions {
  /**
   * The authenticated principal (`c.get("user")?.id`, `c.get("jwtPayload")?.sub`, …); put the auth
   * middleware first. A request for which it gives none is refused with 500 before the handler runs.
   */
  readonly scope: (c: Context<E>) => string | undefined | Promise<string | undefined>;
}

/**
 * Idempotency-Key middleware for Hono (draft-ietf-httpapi-idempotency-key-header); see
 * `idempotencyMiddleware` in `idempotool/http` for what it answers.
 * @example
 * import { Hono } from "hono";
 * import { memoryStore } from "idempotool";
 * import { honoIdempotency } from "idempotool/http/hono";
 *
 * type AppEnv = { Variables: { user: { id: string } } };
 * declare function userOf(authorization: string | undefined): Promise<{ id: string } | undefined>; // your token check
 *
 * const app = new Hono<AppEnv>();
 * app.use("*", async (c, next) => {
 *   const user = await userOf(c.req.header("authorization"));
 *   if (user === undefined) return c.json({ error: "unauthorized" }, 401);
 *   c.set("user", user);
 *   await next();
 * });
 * // The type argument lets `scope` read what the auth middleware set.
 * app.use("/payments/*", honoIdempotency<AppEnv>({ store: memoryStore(), scope: (c) => c.get("user")?.id }));
 * app.post("/payments", (c) => c.json({ id: "pay_1" }, 201));
 */
export function honoIdempotency<E extends Env = Env>(
  options: HonoIdempotencyOptions<E>,
): MiddlewareHandler<E> {
  const scopeOf = scopeOption(options?.scope);
  const handle = createIdempotencyHandler(options);
  return async (c, next) => {
    if (!handle.guards(c.req.raw)) {
      await next();
      return;
    }
    let ranHandler = false;
    const response = await handle(
      c.req.raw,
      async () => {
        ranHandler = true;
        await next();
        return c.res;
      },
      { scope: () => scopeOf(c) },
    );
    if (!ranHandler) return response;
    if (response !== c.res) {
      // Clear first: Hono's setter would otherwise copy the handler's headers onto ours.
      c.res = undefined;
      c.res = response;
    }
  };
}
