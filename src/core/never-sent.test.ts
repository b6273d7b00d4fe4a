import { createServer as createHttpServer, type RequestOptions, request } from "node:http";
import { type AddressInfo, createServer, type Server, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { gate, rejection } from "../../test/fixtures/tools.js";
import { isIdempotencyError } from "./errors.js";
import { idempotent } from "./idempotent.js";
import { memoryStore } from "./memory-store.js";
import { neverSent, notExecuted } from "./outcomes.js";

const servers: Server[] = [];

afterEach(async () => {
  for (const server of servers.splice(0)) {
    if ("closeAllConnections" in server) (server as { closeAllConnections(): void }).closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

async function listen(server: Server, port = 0): Promise<number> {
  servers.push(server);
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", resolve);
  });
  return (server.address() as AddressInfo).port;
}

/** A loopback port nothing listens on: bound, then closed. */
async function unusedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** An HTTP server that answers every request with `status`, counting the requests it got. */
async function httpServer(status = 200, port = 0): Promise<{ port: number; requests: () => number }> {
  let requests = 0;
  const server = createHttpServer((req, res) => {
    requests++;
    req.resume();
    req.on("end", () => res.writeHead(status, { "content-type": "application/json" }).end('{"sid":"SM1"}'));
  });
  return { port: await listen(server, port), requests: () => requests };
}

/** A TCP server that reads the first bytes of a request, then resets the connection (or just closes it). */
async function breakingServer(how: "reset" | "close"): Promise<{ port: number; received: () => number }> {
  let received = 0;
  const server = createServer((socket: Socket) => {
    socket.once("data", () => {
      received++;
      if (how === "reset") socket.resetAndDestroy();
      else socket.end();
    });
  });
  return { port: await listen(server), received: () => received };
}

const post = (url: string, init: RequestInit = {}) =>
  fetch(url, { method: "POST", body: '{"to":"+15550100"}', ...init });

/** node:http's own error for a POST: no fetch wrapper around it. */
function httpPost(options: RequestOptions): Promise<unknown> {
  return new Promise((resolve) => {
    const req = request({ method: "POST", ...options }, (res) => resolve(res.statusCode));
    req.on("error", resolve);
    req.end("{}");
  });
}

/** `error` under `depth` wrappers without a code of their own, each with it as its `cause`. */
function wrapped(error: unknown, depth: number): unknown {
  let outer = error;
  for (let i = 0; i < depth; i++) outer = new Error(`wrapper ${i}`, { cause: outer });
  return outer;
}

/** An error shaped as Node makes a system error. */
function systemError(code: string, syscall: string | undefined): Error {
  return Object.assign(new Error(`${syscall ?? ""} ${code}`), { code, errno: -1, syscall });
}

describe("neverSent: errors that prove the request never left", () => {
  it("a refused connection, through fetch (ECONNREFUSED under TypeError: fetch failed)", async () => {
    const error = await rejection(post(`http://127.0.0.1:${await unusedPort()}/messages`));
    expect(error).toBeInstanceOf(TypeError);
    expect((error as Error).cause).toMatchObject({ code: "ECONNREFUSED", syscall: "connect" });
    expect(neverSent(error)).toBe(true);
  });

  it("a refused connection, through node:http", async () => {
    const error = await httpPost({ host: "127.0.0.1", port: await unusedPort() });
    expect(error).toMatchObject({ code: "ECONNREFUSED", syscall: "connect" });
    expect(neverSent(error)).toBe(true);
  });

  it("every address of a host refused (Node's AggregateError, trying each in turn)", async () => {
    const port = await unusedPort();
    const error = await httpPost({
      host: "two-addresses.test",
      port,
      lookup: (_host, _options, callback) =>
        (callback as (e: null, addresses: { address: string; family: number }[]) => void)(null, [
          { address: "127.0.0.1", family: 4 },
          { address: "127.0.0.2", family: 4 },
        ]),
    });
    expect(error).toBeInstanceOf(AggregateError);
    expect((error as AggregateError).errors).toHaveLength(2);
    expect(neverSent(error)).toBe(true);
  });

  it("a host name that does not resolve (.invalid never does: ENOTFOUND, or EAI_AGAIN with no resolver)", async () => {
    const error = await rejection(post("http://idempotool-never-sent.invalid/messages"));
    expect((error as Error).cause).toMatchObject({ syscall: "getaddrinfo" });
    expect(["ENOTFOUND", "EAI_AGAIN"]).toContain(((error as Error).cause as { code: string }).code);
    expect(neverSent(error)).toBe(true);
    const direct = await httpPost({ host: "idempotool-never-sent.invalid" });
    expect(neverSent(direct)).toBe(true);
  });

  it("a lookup that got no answer in time (EAI_AGAIN from getaddrinfo; built by hand, as no test can make a resolver time out)", () => {
    expect(neverSent(systemError("EAI_AGAIN", "getaddrinfo"))).toBe(true);
    expect(neverSent(new TypeError("fetch failed", { cause: systemError("EAI_AGAIN", "getaddrinfo") }))).toBe(
      true,
    );
  });

  it("under wrappers without a code, within the bound", async () => {
    const refused = await rejection(post(`http://127.0.0.1:${await unusedPort()}/messages`));
    expect(neverSent(wrapped(refused, 7))).toBe(true);
    expect(neverSent(notExecuted(refused))).toBe(true);
  });
});

describe("neverSent: everything else is false", () => {
  it("a connection reset once the request was on its way (ECONNRESET): bytes left", async () => {
    const server = await breakingServer("reset");
    const viaFetch = await rejection(post(`http://127.0.0.1:${server.port}/messages`));
    expect((viaFetch as Error).cause).toMatchObject({ code: "ECONNRESET" });
    expect(neverSent(viaFetch)).toBe(false);
    const viaHttp = await httpPost({ host: "127.0.0.1", port: server.port });
    expect(viaHttp).toMatchObject({ code: "ECONNRESET" });
    expect(neverSent(viaHttp)).toBe(false);
    expect(server.received()).toBe(2);
  });

  it("a connection closed with no answer (undici's UND_ERR_SOCKET, node:http's socket hang up)", async () => {
    const server = await breakingServer("close");
    const viaFetch = await rejection(post(`http://127.0.0.1:${server.port}/messages`));
    expect((viaFetch as Error).cause).toMatchObject({ code: "UND_ERR_SOCKET" });
    expect(neverSent(viaFetch)).toBe(false);
    const viaHttp = await httpPost({ host: "127.0.0.1", port: server.port });
    expect(viaHttp).toMatchObject({ message: "socket hang up", code: "ECONNRESET" });
    expect(neverSent(viaHttp)).toBe(false);
  });

  it("an HTTP 500: the server had the request", async () => {
    const server = await httpServer(500);
    const response = await post(`http://127.0.0.1:${server.port}/messages`);
    expect(neverSent(new Error(`sms gateway answered ${response.status}`))).toBe(false);
    expect(server.requests()).toBe(1);
  });

  it("an abort: fetch rejects with the signal's reason itself, before the request was sent as after", async () => {
    const server = await httpServer();
    const before = AbortSignal.abort();
    const early = await rejection(post(`http://127.0.0.1:${server.port}/messages`, { signal: before }));
    expect(early).toBe(before.reason);
    expect(neverSent(early)).toBe(false);

    // The same kind of object once the request had reached the server: nothing tells the two apart.
    const controller = new AbortController();
    const { opened: reached, open: arrived } = gate();
    const slow = createHttpServer((req) => {
      req.resume();
      arrived();
    });
    const slowPort = await listen(slow);
    const late = rejection(post(`http://127.0.0.1:${slowPort}/messages`, { signal: controller.signal }));
    await reached;
    controller.abort();
    expect(await late).toBe(controller.signal.reason);
    expect((await late) as Error).toMatchObject({ name: (early as Error).name });
    expect(neverSent(await late)).toBe(false);
    expect(server.requests()).toBe(0);
  });

  it("a timeout signal (TimeoutError)", async () => {
    const signal = AbortSignal.timeout(1);
    await new Promise((resolve) => setTimeout(resolve, 20));
    const error = await rejection(post(`http://127.0.0.1:${await unusedPort()}/messages`, { signal }));
    expect(error).toMatchObject({ name: "TimeoutError" });
    expect(neverSent(error)).toBe(false);
  });

  it("a redirect fetch followed cannot be seen, so the docs ask for redirect: 'error'", async () => {
    // POST, then 303 to a host that does not resolve: the POST reached the server, yet the error is the
    // one a first request that never left gives. neverSent cannot tell: it answers true here.
    let posts = 0;
    const redirecting = createHttpServer((req, res) => {
      posts++;
      req.resume();
      req.on("end", () =>
        res.writeHead(303, { location: "http://idempotool-never-sent.invalid/done" }).end(),
      );
    });
    const port = await listen(redirecting);
    const followed = await rejection(post(`http://127.0.0.1:${port}/messages`));
    expect(neverSent(followed)).toBe(true);
    expect(posts).toBe(1);
    // With redirect: "error", the 303 itself is the error, and it is not "never sent".
    const refused = await rejection(post(`http://127.0.0.1:${port}/messages`, { redirect: "error" }));
    expect(neverSent(refused)).toBe(false);
    expect(posts).toBe(2);
  });

  it("a code without Node's syscall (copied by a library, or an API's error body), or with another syscall", () => {
    expect(neverSent(Object.assign(new Error("upstream refused"), { code: "ECONNREFUSED" }))).toBe(false);
    expect(neverSent(Object.assign(new Error("no such host"), { code: "ENOTFOUND" }))).toBe(false);
    expect(neverSent(systemError("ECONNREFUSED", "queryA"))).toBe(false);
    expect(neverSent(systemError("ENOTFOUND", "connect"))).toBe(false);
    expect(neverSent(systemError("ETIMEDOUT", "connect"))).toBe(false);
    expect(neverSent(systemError("EPIPE", "write"))).toBe(false);
    expect(neverSent({ code: 404, cause: systemError("ECONNREFUSED", "connect") })).toBe(false);
  });

  it("a wrapper with a code of its own, whatever its cause: the outermost code decides", () => {
    const reset = Object.assign(new Error("request failed"), {
      code: "ECONNRESET",
      cause: systemError("ECONNREFUSED", "connect"),
    });
    expect(neverSent(reset)).toBe(false);
  });

  it("an AggregateError that is not Node's for one host: an attempt that is not proof, none, a hole, or a list of its own", () => {
    const refused = systemError("ECONNREFUSED", "connect");
    const nodes = (errors: unknown[]) => Object.assign(new AggregateError(errors), { code: "ECONNREFUSED" });
    expect(neverSent(nodes([refused, refused]))).toBe(true);
    expect(neverSent(nodes([refused, systemError("ECONNRESET", "read")]))).toBe(false);
    expect(neverSent(nodes([]))).toBe(false);
    expect(neverSent(nodes(new Array(2)))).toBe(false);
    // A tool's own AggregateError over several requests (Promise.allSettled to two recipients): one of
    // them may have gone out, whatever the others say.
    expect(neverSent(new AggregateError([refused, refused]))).toBe(false);
    // A wrapper with a code of its own is never looked past, even with a list of refusals.
    expect(neverSent(Object.assign(new AggregateError([refused]), { code: "UND_ERR_SOCKET" }))).toBe(false);
  });

  it("a proof buried deeper than the bound (20 wrappers), or a cause that loops", () => {
    const dns = systemError("ENOTFOUND", "getaddrinfo");
    expect(neverSent(wrapped(dns, 8))).toBe(true);
    expect(neverSent(wrapped(dns, 9))).toBe(false);
    expect(neverSent(wrapped(dns, 20))).toBe(false);
    const loop = new Error("loop");
    loop.cause = loop;
    expect(neverSent(loop)).toBe(false);
  });

  it("what is not an error, and an error that throws when read", () => {
    for (const value of [undefined, null, "ECONNREFUSED", 111, { code: "ECONNREFUSED" }]) {
      expect(neverSent(value)).toBe(false);
    }
    const hostile = new Proxy(
      {},
      {
        get() {
          throw new Error("read me not");
        },
      },
    );
    expect(neverSent(hostile)).toBe(false);
  });
});

describe("neverSent with idempotent(): notExecuted when it proves nothing left, else outcome unknown", () => {
  /** An irreversible tool that posts to `port`, as the docs show it. */
  function smsTool(port: number) {
    return idempotent(
      async (args: { to: string; text: string }, context) => {
        let response: Response;
        try {
          response = await fetch(`http://127.0.0.1:${port}/messages`, {
            method: "POST",
            body: JSON.stringify(args),
            redirect: "error",
            signal: context.signal,
          });
        } catch (error) {
          throw neverSent(error) ? notExecuted(error) : error;
        }
        if (!response.ok) throw new Error(`sms gateway answered ${response.status}`);
        return (await response.json()) as { sid: string };
      },
      { name: "send_sms", store: memoryStore() },
    );
  }
  const sms = { to: "+15550100", text: "Your code is 123456" };

  it("releases the key after a refused connection, so the retry runs once the gateway is up", async () => {
    const port = await unusedPort();
    const sendSms = smsTool(port);
    const refused = await rejection(sendSms(sms, { key: "turn-7-sms" }));
    expect(refused).toBeInstanceOf(TypeError);
    expect(neverSent(refused)).toBe(true);

    const gateway = await httpServer(200, port);
    const retry = await sendSms(sms, { key: "turn-7-sms" });
    expect(retry).toMatchObject({ result: { sid: "SM1" }, was_replay: false });
    expect((await sendSms(sms, { key: "turn-7-sms" })).was_replay).toBe(true);
    expect(gateway.requests()).toBe(1);
  });

  it("keeps the outcome unknown after a reset connection: the retry does not send again", async () => {
    const server = await breakingServer("reset");
    const sendSms = smsTool(server.port);
    const first = await rejection(sendSms(sms, { key: "turn-7-sms" }));
    expect(isIdempotencyError(first, "outcome_unknown")).toBe(true);
    const retry = await rejection(sendSms(sms, { key: "turn-7-sms" }));
    expect(isIdempotencyError(retry, "outcome_unknown")).toBe(true);
    expect(server.received()).toBe(1);
  });
});
