/**
 * Replies lost after the store applied the command, on every store whose replies cross a network
 * (test/fixtures/stores.ts, `lossy`), with each client's usual settings: the link lets the claim, the
 * settle or the takeover through, then loses its answer. pg, node-redis and a Durable Object's stub fail
 * the command; ioredis, DynamoDB's SDK and @upstash/redis resend it; SQLite, in this process, throws after
 * it committed. Either way the tool runs once per logical call, the key is never left blocked for good, and
 * the caller is never told a recorded outcome was lost.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { StoreUnavailableError, systemClock } from "../src/index.js";
import { fakeClock } from "../src/testing/index.js";
import {
  type LossyLink,
  type OpenedTestStore,
  openStoreUrl,
  type StoreService,
  URL_STORES,
} from "./fixtures/stores.js";
import { emailTool, rejection } from "./fixtures/tools.js";

const alice = { to: "alice@example.com" };

const lossyStores = URL_STORES.flatMap((row) => (row.lossy ? [{ row, lossy: row.lossy }] : []));

for (const { row, lossy } of lossyStores) {
  describe(`${row.name}: a reply lost after the store applied the command`, () => {
    let service: StoreService;
    beforeAll(async () => {
      service = await row.start();
    }, 60_000);
    afterAll(() => service?.close());

    const opened: (LossyLink | OpenedTestStore)[] = [];
    afterEach(async () => {
      for (const store of opened.splice(0)) await store.close();
    });

    /** A fresh store through a lossy link, the same store reached directly, and a counted send_email. */
    async function behindLossyLink() {
      const url = (await service.fresh("lost-reply"))[0]!;
      const link = await lossy(url);
      opened.push(link);
      const direct = await openStoreUrl(url);
      opened.push(direct);
      // Waits for nobody, so a blocked key shows at once; the real clock, as the servers judge by theirs.
      const tool = emailTool({ store: link.store, clock: systemClock, waitMs: 0 });
      // Loads what a client loads on first use (Redis's scripts), so the command that loses its reply is the
      // operation itself.
      await tool.send({ to: "warm-up" }, { key: "warm-up" });
      tool.sent.length = 0;
      return { link, direct, ...tool };
    }

    it("a claim whose reply was lost: the tool runs once per logical call, and the key is not blocked", async () => {
      const { link, direct, send, sent } = await behindLossyLink();
      const lost = link.loseReplyTo("claim-lost");
      const id = { scope: "default", key: "claim-lost" };
      if (link.afterLoss === "resends") {
        // The resent claim finds its own record.
        const first = await send(alice, { key: id.key });
        await lost;
        expect(first.was_replay).toBe(false);
        expect(sent).toEqual([alice]);
        expect((await direct.get(id, Date.now()))?.status).toBe("completed");
        return;
      }
      // The claim failed: the core released it, and a retry runs the tool.
      const error = await rejection(send(alice, { key: id.key }));
      await lost;
      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect(sent).toEqual([]);
      expect(await direct.get(id, Date.now())).toBeUndefined();
      const retry = await send(alice, { key: id.key });
      expect(retry.was_replay).toBe(false);
      expect(sent).toEqual([alice]);
    });

    it("a settle whose reply was lost is read back: the caller gets its result, and a repeat replays it", async () => {
      const { link, send, sent } = await behindLossyLink();
      // The claim's commands come first (one on most stores), then the settle.
      const lost = link.loseReplyTo("settle-lost", (link.claimCommands ?? 1) + 1);
      const first = await send(alice, { key: "settle-lost" });
      await lost;
      expect(first).toMatchObject({ result: { messageId: "m-1" }, was_replay: false });
      expect(await send(alice, { key: "settle-lost" })).toMatchObject({
        result: { messageId: "m-1" },
        was_replay: true,
      });
      expect(sent).toEqual([alice]);
    });

    // Only where the call's `now` judges leases: a test moves past the dead worker's lease without sleeping.
    if (row.judgesByRequestTime) {
      it("a takeover whose reply was lost is read back: the call that sent it runs the tool, once", async () => {
        const { link, direct } = await behindLossyLink();
        const clock = fakeClock(Date.now());
        const leaseMs = 5_000;
        const { send, sent } = emailTool({ store: link.store, clock, effect: "native-key", leaseMs });
        await send(alice, { key: "earlier" });
        const id = { scope: "default", key: "takeover-lost" };
        // A worker claimed the key for the same email, and died.
        const fingerprint = (await direct.get({ scope: "default", key: "earlier" }, clock.now()))!
          .fingerprint;
        const dead = await direct.claim({
          ...id,
          tool: "send_email",
          fingerprint,
          token: "dead-worker",
          leaseMs,
          ttlMs: 86_400_000,
          now: clock.now(),
        });
        expect(dead.claimed).toBe(true);
        // Past its lease, and past DynamoDB's default clock-skew margin.
        await clock.advance(leaseMs + 2_001);
        // The claim finds the dead worker's record; the takeover is the second command naming the key.
        const lost = link.loseReplyTo(id.key, 2);
        const first = send(alice, { key: id.key });
        // Refused when resent, or failed: either way read back, and found to be this call's own.
        expect(await first).toMatchObject({ result: { messageId: "m-2" }, was_replay: false });
        await lost;
        expect(sent).toEqual([alice, alice]);
        expect(await send(alice, { key: id.key })).toMatchObject({
          result: { messageId: "m-2" },
          was_replay: true,
        });
        expect(await direct.get(id, clock.now())).toMatchObject({ status: "completed", tool: "send_email" });
        expect(sent).toEqual([alice, alice]);
      });
    }
  });
}
