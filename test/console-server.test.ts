/**
 * The console's server as any HTTP client meets it, without a browser: the one-time token and the session
 * it buys, the `Host` and `Origin` checks, the body limit, the security headers, and the JSON API over the
 * review module (fenced resolutions, errors with idempotool's codes, no secret in any message). The page
 * itself is driven in Chromium by test/console-browser.test.ts.
 */
import { request as httpRequest } from "node:http";
import { afterEach, describe, expect, it } from "vitest";
import { type ConsoleServer, startConsoleServer } from "../src/cli/console/console-server.js";
import { idempotent } from "../src/core/idempotent.js";
import { memoryStore } from "../src/core/memory-store.js";
import type { IdempotencyStore } from "../src/core/store.js";
import { readTrail, reviewQueue } from "../src/review/index.js";

const servers: ConsoleServer[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) await server.close();
});

async function seeded(options: { secrets?: string[]; maxBodyBytes?: number } = {}) {
  const store = memoryStore();
  const tool = idempotent(
    async (_args: { to: string }) => {
      throw new Error("socket hang up");
    },
    { name: "send_email", store, effect: "irreversible" },
  );
  await tool({ to: "ada@example.com" }, { key: "welcome-ada" }).catch(() => undefined);
  const server = await startConsoleServer({ store, storeLabel: "postgres://app:***@db/agents", ...options });
  servers.push(server);
  return { store, server };
}

/** Trade a link's token for a session; the cookie to send. */
async function session(server: ConsoleServer, link = server.url): Promise<string> {
  const token = new URL(link).searchParams.get("token");
  const response = await fetch(`${server.origin}/api/session`, {
    method: "POST",
    headers: { origin: server.origin, "content-type": "application/json" },
    body: JSON.stringify({ token }),
  });
  expect(response.status).toBe(200);
  return (response.headers.get("set-cookie") ?? "").split(";")[0]!;
}

async function answer(response: Response): Promise<{ status: number; code?: string; message?: string }> {
  const body = (await response.json()) as { error?: { code: string; message: string } };
  return {
    status: response.status,
    ...(body.error ? { code: body.error.code, message: body.error.message } : {}),
  };
}

/** A GET with headers fetch will not send (Host): its status and the error code it answers with. */
function rawGet(
  port: number,
  path: string,
  headers: Record<string, string>,
): Promise<{ status: number; code?: string }> {
  return new Promise((resolve, reject) => {
    const request = httpRequest({ host: "127.0.0.1", port, path, headers }, (response) => {
      let body = "";
      response.on("data", (chunk: Buffer) => {
        body += chunk.toString();
      });
      response.on("end", () => {
        const status = response.statusCode ?? 0;
        if (status < 400) return resolve({ status });
        resolve({ status, code: (JSON.parse(body) as { error: { code: string } }).error.code });
      });
    });
    request.on("error", reject);
    request.end();
  });
}

function resolveBody(version: string | undefined, extra: Record<string, unknown> = {}) {
  return JSON.stringify({
    scope: "default",
    key: "welcome-ada",
    as: "completed",
    result: { messageId: "m-81" },
    evidence: "provider log: m-81 delivered",
    by: "ops",
    ...(version !== undefined ? { expectVersion: version } : {}),
    ...extra,
  });
}

describe("the console's server", () => {
  it("listens on 127.0.0.1 and prints a link with 32 random bytes, base64url", async () => {
    const { server } = await seeded();
    expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/\?token=[A-Za-z0-9_-]{43}$/);
    expect(server.issueLink()).not.toBe(server.url);
  });

  it("refuses to listen anywhere but loopback", async () => {
    await expect(
      startConsoleServer({ store: memoryStore(), storeLabel: "x", host: "0.0.0.0" }),
    ).rejects.toThrow(/loopback only/);
  });

  it("trades a token for an HttpOnly, SameSite=Strict session once, and refuses it the second time", async () => {
    const { server } = await seeded();
    const first = await fetch(`${server.origin}/api/session`, {
      method: "POST",
      headers: { origin: server.origin, "content-type": "application/json" },
      body: JSON.stringify({ token: new URL(server.url).searchParams.get("token") }),
    });
    expect(first.status).toBe(200);
    expect(first.headers.get("set-cookie")).toMatch(
      /^idempotool_console_\d+=[\w-]{43}; HttpOnly; SameSite=Strict; Path=\/$/,
    );
    const again = await fetch(`${server.origin}/api/session`, {
      method: "POST",
      headers: { origin: server.origin, "content-type": "application/json" },
      body: JSON.stringify({ token: new URL(server.url).searchParams.get("token") }),
    });
    expect(await answer(again)).toMatchObject({ status: 403, code: "token_refused" });
    const wrong = await fetch(`${server.origin}/api/session`, {
      method: "POST",
      headers: { origin: server.origin, "content-type": "application/json" },
      body: JSON.stringify({ token: "A".repeat(43) }),
    });
    expect(await answer(wrong)).toMatchObject({ status: 403, code: "token_refused" });
  });

  it("answers the API only with a session", async () => {
    const { server } = await seeded();
    const cookie = await session(server);
    for (const path of [
      "/api/info",
      "/api/queue",
      "/api/counts",
      "/api/record?scope=default&key=welcome-ada",
    ]) {
      expect(await answer(await fetch(`${server.origin}${path}`))).toMatchObject({
        status: 401,
        code: "session_required",
      });
      expect((await fetch(`${server.origin}${path}`, { headers: { cookie } })).status).toBe(200);
    }
    const forged = cookie.replace(/=.*/, "=forged");
    expect((await fetch(`${server.origin}/api/queue`, { headers: { cookie: forged } })).status).toBe(401);
  });

  it("refuses another host name (DNS rebinding) and another origin, even with a session", async () => {
    const { server } = await seeded();
    const cookie = await session(server);
    expect(await rawGet(server.port, "/api/queue", { cookie, host: `evil.example:${server.port}` })).toEqual({
      status: 403,
      code: "host_refused",
    });
    expect(await rawGet(server.port, "/", { host: `evil.example:${server.port}` })).toEqual({
      status: 403,
      code: "host_refused",
    });
    expect(await rawGet(server.port, "/", { host: `localhost:${server.port}` })).toEqual({ status: 200 });
    const foreign = await fetch(`${server.origin}/api/queue`, {
      headers: { cookie, origin: "http://evil.example" },
    });
    expect(await answer(foreign)).toMatchObject({ status: 403, code: "origin_refused" });
    const crossSite = await fetch(`${server.origin}/api/queue`, {
      headers: { cookie, "sec-fetch-site": "cross-site" },
    });
    expect(crossSite.status).toBe(403);
    // Another port of this machine is the same site, to a SameSite cookie: refused all the same.
    const sameSite = await fetch(`${server.origin}/api/queue`, {
      headers: { cookie, "sec-fetch-site": "same-site" },
    });
    expect(sameSite.status).toBe(403);
    const ownPage = await fetch(`${server.origin}/api/queue`, {
      headers: { cookie, "sec-fetch-site": "same-origin" },
    });
    expect(ownPage.status).toBe(200);
  });

  it("resolves only from its own origin, with JSON, and never without the version the operator saw", async () => {
    const { store, server } = await seeded();
    const cookie = await session(server);
    const version = (await reviewQueue({ store })).items[0]?.version;
    const post = (headers: Record<string, string>, body: string) =>
      fetch(`${server.origin}/api/resolve`, {
        method: "POST",
        headers: { cookie, "content-type": "application/json", ...headers },
        body,
      });
    expect((await post({ origin: "http://evil.example" }, resolveBody(version))).status).toBe(403);
    expect((await post({ origin: `http://127.0.0.1:${server.port + 1}` }, resolveBody(version))).status).toBe(
      403,
    );
    expect((await post({}, resolveBody(version))).status).toBe(403);
    expect(
      (await post({ origin: server.origin, "content-type": "text/plain" }, resolveBody(version))).status,
    ).toBe(415);
    expect(await answer(await post({ origin: server.origin }, resolveBody(undefined)))).toMatchObject({
      status: 409,
      code: "record_changed",
    });
    expect(await readTrail({ store, scope: "default", key: "welcome-ada" })).toEqual([]);

    const done = await post({ origin: server.origin }, resolveBody(version));
    expect(done.status).toBe(200);
    const { entry } = (await done.json()) as { entry: { via: string; by: string } };
    expect([entry.via, entry.by]).toEqual(["console", "ops"]);
    // The same version again: the record changed (it is completed now), and nothing is overwritten.
    const late = await answer(await post({ origin: server.origin }, resolveBody(version, { by: "late" })));
    expect(late).toMatchObject({ status: 409, code: "record_changed" });
    expect((await readTrail({ store, scope: "default", key: "welcome-ada" })).map((e) => e.by)).toEqual([
      "ops",
    ]);
  });

  it("refuses a body over the limit, bad JSON and bad input with JSON errors", async () => {
    const { store, server } = await seeded({ maxBodyBytes: 1000 });
    const cookie = await session(server);
    const version = (await reviewQueue({ store })).items[0]?.version;
    const post = (body: string) =>
      fetch(`${server.origin}/api/resolve`, {
        method: "POST",
        headers: { cookie, origin: server.origin, "content-type": "application/json" },
        body,
      });
    expect(await answer(await post(resolveBody(version, { evidence: "x".repeat(5000) })))).toMatchObject({
      status: 413,
      code: "body_too_large",
    });
    expect(await answer(await post("{not json"))).toMatchObject({ status: 400, code: "invalid_arguments" });
    expect(await answer(await post(resolveBody(version, { evidence: "" })))).toMatchObject({
      status: 400,
      code: "invalid_arguments",
    });
    const badAge = await fetch(`${server.origin}/api/queue?olderThan=soon`, { headers: { cookie } });
    expect(await answer(badAge)).toMatchObject({ status: 400, code: "invalid_arguments" });
  });

  it("sends no CORS headers, a strict Content-Security-Policy, and no secret in its messages", async () => {
    const store = memoryStore();
    const failing: IdempotencyStore = {
      ...store,
      list: async () => {
        throw new Error("connect to postgres://app:s3cret-pw@db/agents refused");
      },
    };
    const server = await startConsoleServer({
      store: failing,
      storeLabel: "postgres://app:***@db/agents",
      secrets: ["s3cret-pw"],
    });
    servers.push(server);
    const cookie = await session(server);
    const page = await fetch(`${server.origin}/`);
    expect(page.headers.get("content-security-policy")).toMatch(/^default-src 'self'; script-src 'self';/);
    expect(page.headers.get("access-control-allow-origin")).toBeNull();
    expect(await page.text()).not.toMatch(/<script>|<script [^>]*>[^<]/);
    const info = (await (await fetch(`${server.origin}/api/info`, { headers: { cookie } })).json()) as {
      store: string;
    };
    expect(info.store).toBe("postgres://app:***@db/agents");
    const failed = await answer(await fetch(`${server.origin}/api/queue`, { headers: { cookie } }));
    expect(failed).toMatchObject({ status: 503, code: "store_unavailable" });
    expect(JSON.stringify(failed)).not.toContain("s3cret-pw");
  });
});

describe("the console with the tools' storage options", () => {
  it("opens a sealed note and seals its resolution, tells onResolution, and without the keys refuses", async () => {
    const { randomBytes } = await import("node:crypto");
    const encryption = { keys: { k1: randomBytes(32) }, current: "k1" };
    const store = memoryStore();
    const tool = idempotent(
      async (_args: { to: string }) => {
        throw new Error("socket hang up");
      },
      { name: "send_email", store, effect: "irreversible", encryption },
    );
    await tool({ to: "ada@example.com" }, { key: "welcome-ada" }).catch(() => undefined);
    const heard: string[] = [];
    const plain = await startConsoleServer({ store, storeLabel: "memory" });
    const keyed = await startConsoleServer({
      store,
      storeLabel: "memory",
      tools: { send_email: { encryption } },
      onResolution: (entry) => heard.push(entry.via),
    });
    servers.push(plain, keyed);
    const [item] = (await reviewQueue({ store, tools: { send_email: { encryption } } })).items;
    expect(item?.failure?.message).toBe("socket hang up");
    const post = async (server: ConsoleServer) =>
      answer(
        await fetch(`${server.origin}/api/resolve`, {
          method: "POST",
          headers: {
            origin: server.origin,
            "content-type": "application/json",
            cookie: await session(server),
          },
          body: resolveBody(item!.version),
        }),
      );
    expect(await post(plain)).toMatchObject({ status: 500, code: "invalid_options" });
    expect((await post(keyed)).status).toBe(200);
    expect(heard).toEqual(["console"]);
    const replay = await tool({ to: "ada@example.com" }, { key: "welcome-ada" });
    expect(replay.resolved_by_operator?.evidence).toBeTruthy();
  });
});
