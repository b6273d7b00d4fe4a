/**
 * A Cloudflare Worker whose side effect, sending an email, runs once per `Idempotency-Key` however often a
 * client retries. The records live in Upstash Redis (or Vercel KV), reached over HTTPS through
 * `@upstash/redis/cloudflare`: a Worker cannot open a TCP connection to Redis.
 *
 * POST / with `Idempotency-Key: <key>` and `{ "to": "…", "subject": "…" }`: the first call sends the email
 * through the provider at MAILER_URL, and every repeat of the key answers the same envelope, marked as a
 * replay, without sending again.
 *
 * Run it: `wrangler dev` with wrangler.jsonc beside this file (and `wrangler secret put` for the two
 * UPSTASH_REDIS_REST_* variables), or `node --import tsx examples/upstash-worker.ts`, which runs it in
 * workerd and calls it twice.
 */
import { Redis } from "@upstash/redis/cloudflare";
import { idempotent, isIdempotencyError } from "idempotool";
import { type RedisStore, redisStore } from "idempotool/redis";

export interface Env {
  readonly UPSTASH_REDIS_REST_URL: string;
  readonly UPSTASH_REDIS_REST_TOKEN: string;
  /** The email provider's API (a fake one when the example runs itself). */
  readonly MAILER_URL: string;
}

interface Email {
  readonly to: string;
  readonly subject: string;
}

// One store per isolate, not per request: a store sends each script whole the first time it uses it, and
// by its SHA1 after that.
let store: RedisStore<Redis> | undefined;
const storeFor = (env: Env) => {
  store ??= redisStore({ client: Redis.fromEnv(env), prefix: "worker:idem:" });
  return store;
};

export default {
  async fetch(request, env): Promise<Response> {
    const key = request.headers.get("Idempotency-Key");
    if (request.method !== "POST" || key === null) {
      return Response.json({ error: "POST an email with an Idempotency-Key header" }, { status: 400 });
    }
    const sendEmail = idempotent(
      async (email: Email) => {
        const sent = await fetch(env.MAILER_URL, {
          method: "POST",
          headers: { "content-type": "application/json", "idempotency-key": key },
          body: JSON.stringify(email),
        });
        if (!sent.ok) throw new Error(`the email provider answered ${sent.status}`);
        return (await sent.json()) as { id: string };
      },
      { name: "send_email", store: storeFor(env) },
    );
    try {
      return Response.json(await sendEmail((await request.json()) as Email, { key }));
    } catch (error) {
      // Fails closed: a store that does not answer means the email was not sent (503), and says so.
      if (isIdempotencyError(error)) {
        return Response.json({ error: error.code, message: error.message }, { status: error.httpStatus });
      }
      throw error;
    }
  },
} satisfies ExportedHandler<Env>;
