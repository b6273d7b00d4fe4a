/**
 * Optional options accept `undefined`, and mean by it what leaving them out means: a project with
 * `exactOptionalPropertyTypes` can pass `{ scope: maybeTenant }` without spreading conditionally.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { tool } from "ai";
import type { Env } from "hono";
import { describe, expect, expectTypeOf, it } from "vitest";
import { z } from "zod";
import type {
  IdempotentToolOptions as AiSdkToolOptions,
  IdempotentToolsOptions,
  PerToolOptions,
} from "../src/ai-sdk/index.js";
import { idempotentTools } from "../src/ai-sdk/index.js";
import type { AuditOptions, ListMcpToolsOptions } from "../src/audit/index.js";
import type { ChaosOptions } from "../src/chaos/index.js";
import type { ExpressIdempotencyOptions, ExpressLikeRequest } from "../src/http/express.js";
import type { FastifyIdempotencyOptions } from "../src/http/fastify.js";
import type { HonoIdempotencyOptions } from "../src/http/hono.js";
import type { IdempotencyMiddlewareOptions, IdempotentFetchInit, RetryOptions } from "../src/http/index.js";
import {
  type CallOptions,
  type EncryptionOptions,
  type FingerprintKeyOptions,
  type IdempotentOptions,
  idempotent,
  type MemoryStoreOptions,
  memoryStore,
  type TieredStoreOptions,
  tieredStore,
} from "../src/index.js";
import type { NodeToolOptions, RequestApprovalOptions, RunApprovedOptions } from "../src/langgraph/index.js";
import type { DispatchOptions, LoopToolOptions, TurnOptions } from "../src/loops/index.js";
import type { IdempotentToolOptions as McpToolOptions } from "../src/mcp/index.js";
import type {
  CheckpointOptions,
  FileSystemTargetOptions,
  InsertOnceRequest,
  S3ConditionalTargetOptions,
  TransactionalOnceOptions,
} from "../src/ops/index.js";
import type { OtelEventsOptions } from "../src/otel/index.js";
import type { PostgresStoreOptions } from "../src/postgres/index.js";
import type { ReconcileOptions, ReconcileTool, StartReconcilerOptions } from "../src/reconcile/index.js";
import type { RedisStoreOptions } from "../src/redis/index.js";
import type { SagaOptions } from "../src/saga/index.js";
import { type SqliteStoreOptions, sqliteStore } from "../src/sqlite/index.js";
import type { ConformanceOptions } from "../src/testing/index.js";

type OptionalKeys<T> = { [K in keyof T]-?: Record<never, never> extends Pick<T, K> ? K : never }[keyof T];
/** The optional fields of T that refuse an explicit `undefined` under exactOptionalPropertyTypes. */
type RefusingUndefined<T> = {
  [K in OptionalKeys<T>]-?: { readonly [P in K]: undefined } extends Pick<T, K> ? never : K;
}[OptionalKeys<T>];

describe("optional options", () => {
  it("accept undefined in every public options type", () => {
    expectTypeOf<RefusingUndefined<CallOptions>>().toEqualTypeOf<never>();
    expectTypeOf<RefusingUndefined<IdempotentOptions<{ to: string }, string>>>().toEqualTypeOf<never>();
    expectTypeOf<RefusingUndefined<MemoryStoreOptions>>().toEqualTypeOf<never>();
    expectTypeOf<RefusingUndefined<TieredStoreOptions>>().toEqualTypeOf<never>();
    expectTypeOf<RefusingUndefined<EncryptionOptions>>().toEqualTypeOf<never>();
    expectTypeOf<RefusingUndefined<FingerprintKeyOptions>>().toEqualTypeOf<never>();
    expectTypeOf<RefusingUndefined<SqliteStoreOptions>>().toEqualTypeOf<never>();
    expectTypeOf<RefusingUndefined<Extract<SqliteStoreOptions, { path: string }>>>().toEqualTypeOf<never>();
    expectTypeOf<
      RefusingUndefined<Extract<SqliteStoreOptions, { database: unknown }>>
    >().toEqualTypeOf<never>();
    expectTypeOf<RefusingUndefined<PostgresStoreOptions>>().toEqualTypeOf<never>();
    expectTypeOf<RefusingUndefined<RedisStoreOptions>>().toEqualTypeOf<never>();
    expectTypeOf<RefusingUndefined<IdempotencyMiddlewareOptions>>().toEqualTypeOf<never>();
    expectTypeOf<RefusingUndefined<ExpressIdempotencyOptions<ExpressLikeRequest>>>().toEqualTypeOf<never>();
    expectTypeOf<RefusingUndefined<FastifyIdempotencyOptions>>().toEqualTypeOf<never>();
    expectTypeOf<RefusingUndefined<HonoIdempotencyOptions<Env>>>().toEqualTypeOf<never>();
    expectTypeOf<RefusingUndefined<Omit<IdempotentFetchInit, keyof RequestInit>>>().toEqualTypeOf<never>();
    expectTypeOf<RefusingUndefined<RetryOptions>>().toEqualTypeOf<never>();
    expectTypeOf<RefusingUndefined<McpToolOptions<{ channel: string }>>>().toEqualTypeOf<never>();
    expectTypeOf<RefusingUndefined<AiSdkToolOptions<{ to: string }, string>>>().toEqualTypeOf<never>();
    expectTypeOf<RefusingUndefined<IdempotentToolsOptions<Record<never, never>>>>().toEqualTypeOf<never>();
    expectTypeOf<RefusingUndefined<PerToolOptions<{ to: string }, string>>>().toEqualTypeOf<never>();
    expectTypeOf<RefusingUndefined<LoopToolOptions<{ to: string }, string>>>().toEqualTypeOf<never>();
    expectTypeOf<RefusingUndefined<TurnOptions>>().toEqualTypeOf<never>();
    expectTypeOf<RefusingUndefined<DispatchOptions>>().toEqualTypeOf<never>();
    expectTypeOf<RefusingUndefined<NodeToolOptions<"state">>>().toEqualTypeOf<never>();
    expectTypeOf<RefusingUndefined<RequestApprovalOptions<{ to: string }>>>().toEqualTypeOf<never>();
    expectTypeOf<RefusingUndefined<RunApprovedOptions>>().toEqualTypeOf<never>();
    expectTypeOf<RefusingUndefined<ReconcileOptions>>().toEqualTypeOf<never>();
    expectTypeOf<RefusingUndefined<StartReconcilerOptions>>().toEqualTypeOf<never>();
    expectTypeOf<RefusingUndefined<ReconcileTool<string>>>().toEqualTypeOf<never>();
    expectTypeOf<
      RefusingUndefined<SagaOptions<{ id: string }, { externalId: string }>>
    >().toEqualTypeOf<never>();
    expectTypeOf<RefusingUndefined<CheckpointOptions>>().toEqualTypeOf<never>();
    expectTypeOf<RefusingUndefined<TransactionalOnceOptions>>().toEqualTypeOf<never>();
    expectTypeOf<RefusingUndefined<FileSystemTargetOptions>>().toEqualTypeOf<never>();
    expectTypeOf<RefusingUndefined<S3ConditionalTargetOptions>>().toEqualTypeOf<never>();
    expectTypeOf<RefusingUndefined<InsertOnceRequest>>().toEqualTypeOf<never>();
    expectTypeOf<RefusingUndefined<OtelEventsOptions>>().toEqualTypeOf<never>();
    expectTypeOf<RefusingUndefined<ConformanceOptions>>().toEqualTypeOf<never>();
    expectTypeOf<RefusingUndefined<ChaosOptions>>().toEqualTypeOf<never>();
    expectTypeOf<RefusingUndefined<AuditOptions>>().toEqualTypeOf<never>();
    expectTypeOf<RefusingUndefined<ListMcpToolsOptions>>().toEqualTypeOf<never>();
  });

  it("mean what leaving them out means: idempotent() and a call with every optional field undefined", async () => {
    const store = memoryStore({ maxRecords: undefined });
    let runs = 0;
    const send = idempotent(
      async (args: { to: string }) => {
        runs++;
        return `sent to ${args.to}`;
      },
      {
        name: "send_email",
        store,
        effect: undefined,
        ttlMs: undefined,
        leaseMs: undefined,
        waitMs: undefined,
        maxResultBytes: undefined,
        significant: undefined,
        bigint: undefined,
        key: undefined,
        verify: undefined,
        reconcile: undefined,
        redact: undefined,
        encryption: undefined,
        fingerprintKeys: undefined,
        similar: undefined,
        clock: undefined,
        onEvent: undefined,
      },
    );
    const maybeTenant: string | undefined = undefined;
    const first = await send(
      { to: "alice@example.com" },
      { key: "k-1", scope: maybeTenant, signal: undefined },
    );
    const again = await send({ to: "alice@example.com" }, { key: "k-1", scope: maybeTenant });
    expect(runs).toBe(1);
    expect(again.was_replay).toBe(true);
    // The default scope, and the default 24 h window.
    const record = await store.get({ scope: "default", key: "k-1" }, Date.now());
    expect(record?.tool).toBe("send_email");
    expect(Date.parse(first.expires_at) - Date.parse(first.original_called_at)).toBeGreaterThanOrEqual(
      86_400_000,
    );
  });

  it("leave a shared idempotentTools option in force when a per-tool one is undefined", async () => {
    const store = memoryStore();
    const sendEmail = tool({
      description: "Send an email.",
      inputSchema: z.object({ to: z.string() }),
      execute: async ({ to }: { to: string }) => `sent to ${to}`,
    });
    const tools = idempotentTools(
      { send_email: sendEmail },
      { store, scope: "tenant-a", perTool: { send_email: { scope: undefined, effect: undefined } } },
    );
    await tools.send_email.execute?.(
      { to: "alice@example.com" },
      { toolCallId: "call-1", messages: [{ role: "user", content: "Mail Alice" }], context: undefined },
    );
    const { records } = await store.list({ tool: "send_email" });
    expect(records.map((record) => record.scope)).toEqual(["tenant-a"]);
  });

  it("mean what leaving them out means for the stores", async () => {
    const dir = mkdtempSync(join(tmpdir(), "idempotool-undefined-"));
    try {
      const sqlite = sqliteStore({
        path: join(dir, "records.db"),
        table: undefined,
        synchronous: undefined,
        busyTimeoutMs: undefined,
      });
      const tiered = tieredStore({ store: sqlite, maxEntries: undefined, maxStalenessMs: undefined });
      const send = idempotent(async (args: { to: string }) => `sent to ${args.to}`, {
        name: "send",
        store: tiered,
      });
      await send({ to: "bob@example.com" }, { key: "k-2" });
      expect((await send({ to: "bob@example.com" }, { key: "k-2" })).was_replay).toBe(true);
      await sqlite.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
