/**
 * `idempotool/http/fastify`: the Idempotency-Key middleware as a Fastify plugin. Fastify works in hooks,
 * not around a `next`, so the web-standard core is driven from two: `preHandler` (after the body is
 * parsed) decides whether the handler runs, and `onSend` hands the handler's reply to the core and sends
 * back what it answers.
 * @module
 */
import type { OutgoingHttpHeaders } from "node:http";
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import { createIdempotencyHandler } from "./idempotency-middleware.js";
import { type SharedMiddlewareOptions, scopeOption } from "./middleware-options.js";
import { bytesOf, nodeHeadersOf, webHeadersOf, webRequestOf } from "./node-request.js";
import { isNullBodyStatus } from "./stored-response.js";

/** Options of {@link fastifyIdempotency}: the shared ones, with `scope` reading the Fastify request. */
export interface FastifyIdempotencyOptions extends SharedMiddlewareOptions {
  /**
   * The authenticated principal (`request.user?.id`, as your authentication left it); authenticate in an
   * earlier hook. A request for which it gives none is refused with 500 before the handler runs.
   */
  readonly scope: (request: FastifyRequest) => string | undefined | Promise<string | undefined>;
}

/** A request whose handler runs under the core: the core waits for its reply. */
interface Running {
  readonly deliver: (response: Response) => void;
  /** What the core answers once it has the reply; set as soon as the core is called. */
  outcome: Promise<Response> | undefined;
}

/**
 * Idempotency-Key plugin for Fastify (draft-ietf-httpapi-idempotency-key-header); see
 * `idempotencyMiddleware` in `idempotool/http` for what it answers. It applies to the routes of the scope
 * it is registered in (it is not encapsulated, like a plugin wrapped in fastify-plugin).
 * @example
 * import Fastify from "fastify";
 * import { memoryStore } from "idempotool";
 * import { fastifyIdempotency } from "idempotool/http/fastify";
 *
 * // What your authentication (@fastify/jwt, @fastify/auth, …) verified and left on the request.
 * declare module "fastify" {
 *   interface FastifyRequest { user?: { id: string } }
 * }
 * declare function userOf(authorization: string | undefined): Promise<{ id: string } | undefined>;
 *
 * const app = Fastify();
 * app.decorateRequest("user", undefined);
 * app.addHook("onRequest", async (request, reply) => {
 *   const user = await userOf(request.headers.authorization);
 *   if (user === undefined) return reply.code(401).send({ error: "unauthorized" });
 *   request.user = user;
 * });
 * await app.register(fastifyIdempotency({ store: memoryStore(), scope: (request) => request.user?.id }));
 * app.post("/payments", async (_request, reply) => reply.code(201).send({ id: "pay_1" }));
 */
export function fastifyIdempotency(options: FastifyIdempotencyOptions): FastifyPluginAsync {
  const scopeOf = scopeOption(options?.scope);
  const handle = createIdempotencyHandler(options);
  const running = new WeakMap<FastifyRequest, Running>();

  const plugin: FastifyPluginAsync = async (app) => {
    app.addHook("preHandler", async (request, reply) => {
      const webRequest = webRequestOf(request.method, request.url, request.headers);
      if (!handle.guards(webRequest)) return;
      let proceed!: () => void;
      const handlerMayRun = new Promise<"run">((resolve) => {
        proceed = () => resolve("run");
      });
      let deliver!: (response: Response) => void;
      const delivered = new Promise<Response>((resolve) => {
        deliver = resolve;
      });
      // `outcome` is filled in right after the call, before the handler can run and onSend read it.
      const run: Running = { deliver, outcome: undefined };
      const outcome = handle(
        webRequest,
        () => {
          running.set(request, run);
          proceed();
          return delivered;
        },
        { scope: () => scopeOf(request), body: () => request.body },
      );
      run.outcome = outcome;
      const first = await Promise.race([handlerMayRun, outcome]);
      if (first === "run") return;
      // Answered without the handler: a replay or a problem.
      await sendResponse(reply, first);
      return reply;
    });

    app.addHook("onSend", async (request, reply, payload) => {
      const run = running.get(request);
      if (run === undefined) return payload;
      running.delete(request);
      const status = reply.statusCode;
      const body = await bytesOf(payload);
      run.deliver(
        new Response(isNullBodyStatus(status) || body.length === 0 ? null : body, {
          status,
          headers: webHeadersOf(reply.getHeaders() as OutgoingHttpHeaders),
        }),
      );
      const response = await run.outcome!;
      for (const name of Object.keys(reply.getHeaders())) reply.removeHeader(name);
      return writeHead(reply, response);
    });
  };
  // Fastify's documented marker (what fastify-plugin sets): the hooks apply to the registering scope.
  Object.assign(plugin, {
    [Symbol.for("skip-override")]: true,
    [Symbol.for("fastify.display-name")]: "idempotool",
  });
  return plugin;
}

async function writeHead(reply: FastifyReply, response: Response): Promise<Buffer> {
  reply.code(response.status);
  for (const [name, value] of nodeHeadersOf(response.headers)) reply.header(name, value);
  return Buffer.from(await response.arrayBuffer());
}

async function sendResponse(reply: FastifyReply, response: Response): Promise<void> {
  const body = await writeHead(reply, response);
  void reply.send(response.body === null ? undefined : body);
}
