/**
 * OP-2 inside the transaction an ORM already opened (Kysely, knex, Drizzle): the dedup row goes through
 * the ORM's own transaction object, so it commits or rolls back with the business write. The ORM is never
 * imported: the object is recognised by the methods and marks it carries.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { ErrorCode, IdempotencyError } from "../core/errors.js";
import {
  numbered,
  onceInTransaction,
  type Row,
  type SqlDialect,
  type TransactionStatements,
} from "./in-transaction.js";
import {
  resolveTransactional,
  type TransactionalOnceOptions,
  type TransactionalOutcome,
} from "./transactional-once.js";

/**
 * Run `write` once per key inside a transaction you already opened with Kysely, knex or Drizzle, on
 * PostgreSQL, SQLite or MySQL/MariaDB (the database is told from `tx`). The dedup row is written through
 * `tx`, so it commits with your writes or rolls back with them, and a rollback frees the key. A repeat
 * of the same tool with the same key and arguments returns the committed result and never runs `write`;
 * other arguments, or another tool, under the same key throw `idempotency_key_conflict`. A repeat in a
 * concurrent transaction waits on the key until the first commits (then replays) or rolls back (then
 * runs).
 *
 * `tx` must be the transaction (Kysely's `trx`, knex's `trx`, Drizzle's `tx`), never the database
 * object: outside a transaction the dedup row and the write would not be atomic, so that is refused with
 * `invalid_options` before anything is written. `write` and the dedup row run in a savepoint: if `write`
 * throws, both are undone, even if you catch the error and commit the rest. When the database itself
 * ends the transaction (a MySQL or PostgreSQL deadlock, a serialization failure) the call throws
 * `store_unavailable`: retry the whole transaction. Create the table once with `postgresDedupTableSql`,
 * `sqliteDedupTableSql` or `mysqlDedupTableSql`.
 *
 * @example
 * import { type Generated, Kysely, PostgresDialect } from "kysely";
 * import pg from "pg";
 * import { transactionalOnce } from "idempotool/ops";
 *
 * interface Tables { orders: { id: Generated<number>; item: string } }
 * const db = new Kysely<Tables>({ dialect: new PostgresDialect({ pool: new pg.Pool() }) });
 * const args = { item: "book" };
 * const outcome = await db.transaction().execute((trx) =>
 *   transactionalOnce(trx, { table: "order_dedup", tool: "place_order", key: "turn-7-order", args }, async () => {
 *     const order = await trx.insertInto("orders").values({ item: args.item }).returning("id").executeTakeFirstOrThrow();
 *     return { orderId: order.id };
 *   }),
 * );
 * // outcome.was_replay is true on every repeat, and one order exists.
 */
export async function transactionalOnce<T extends object, R>(
  tx: T,
  options: TransactionalOnceOptions,
  write: (tx: T) => R | Promise<R>,
): Promise<TransactionalOutcome<Awaited<R>>> {
  const statements = transactionStatements(tx);
  const o = resolveTransactional(options, true);
  const id = `${o.table}\u0000${o.scope}\u0000${o.key}`;
  const chain = enclosing.getStore() ?? [];
  // A call nested in its own write under the same key (through this transaction object or another on the
  // same connection) would find its own row, not yet settled, and read it as a committed one.
  if (chain.some((call) => call.id === id)) {
    throw new IdempotencyError(
      ErrorCode.keyInUse,
      `${owner}: key "${o.key}" is being written by the call this one is nested in; nothing ran. Give ` +
        "the nested call a key of its own.",
    );
  }
  // Two calls at once on one transaction would interleave their savepoints on its one connection: one's
  // RELEASE or ROLLBACK TO would end the other's, and a write reported done could be undone, or one
  // reported undone committed. A call nested in a running write is not concurrent with it.
  const active = running.get(tx) ?? 0;
  if (active > chain.filter((call) => call.tx === tx).length) {
    refuse(
      "another call is running on this transaction; nothing ran. Await each call before starting the " +
        "next on one transaction (not Promise.all): their savepoints share its one connection",
    );
  }
  running.set(tx, active + 1);
  try {
    const inside = [...chain, { tx, id }];
    return await onceInTransaction(statements, o, () => enclosing.run(inside, () => write(tx)), true);
  } finally {
    running.set(tx, (running.get(tx) ?? 1) - 1);
  }
}

/** The calls whose write is running on this async path, outermost first: what a new call is nested in. */
const enclosing = new AsyncLocalStorage<readonly { readonly tx: object; readonly id: string }[]>();
/** How many calls are running on each transaction object, nested ones included. */
const running = new WeakMap<object, number>();

const owner = "transactionalOnce()";

function refuse(problem: string): never {
  throw new IdempotencyError(ErrorCode.invalidOptions, `${owner}: ${problem}.`);
}

/** Only a transaction makes the dedup row and the write atomic. */
function outsideTransaction(what: string, how: string): never {
  refuse(
    `got ${what}, not a transaction: the dedup row and your write would commit separately, so nothing ` +
      `was written. Pass the transaction object (${how})`,
  );
}

/** The statements of the transaction `tx`, or `invalid_options` when `tx` is none the helper knows. */
function transactionStatements(tx: unknown): TransactionStatements {
  const drizzle = drizzleKinds(tx);
  if (drizzle.length > 0) return drizzleStatements(tx as DrizzleTransactionLike, drizzle);
  if (isKysely(tx)) return kyselyStatements(tx);
  if (isKnex(tx)) return knexStatements(tx);
  if (typeof tx === "object" && tx !== null && "$queryRawUnsafe" in tx) {
    refuse(
      "Prisma clients are not supported yet; use Kysely, knex or Drizzle on the same database, or " +
        "postgresTransactionalOnce / mysqlTransactionalOnce / sqliteTransactionalOnce on the driver",
    );
  }
  refuse(
    `takes a transaction of Kysely, knex or Drizzle, got ${tx === null ? "null" : typeof tx}` +
      (typeof tx === "object" && tx !== null ? ` (${tx.constructor?.name ?? "no constructor"})` : ""),
  );
}

// --- Kysely ---------------------------------------------------------------------------------------

/**
 * The part of a Kysely `Transaction` used: its mark, a copy without plugins (one that parses JSON or
 * renames columns must not touch the dedup row), a compiled probe that shows the SQL family, raw SQL.
 */
interface KyselyLike {
  readonly isTransaction: boolean;
  withoutPlugins(): KyselyLike;
  selectFrom(table: string): {
    select(column: string): {
      where(column: string, op: string, value: unknown): { compile(): { readonly sql: string } };
    };
  };
  executeQuery(query: {
    readonly sql: string;
    readonly parameters: readonly unknown[];
    readonly query: {
      readonly kind: "RawNode";
      readonly sqlFragments: readonly string[];
      readonly parameters: readonly [];
    };
    readonly queryId: { readonly queryId: string };
  }): Promise<{ readonly rows: readonly unknown[] }>;
}

function isKysely(tx: unknown): tx is KyselyLike {
  const k = tx as Partial<KyselyLike> | null;
  return (
    typeof k === "object" &&
    k !== null &&
    typeof k.isTransaction === "boolean" &&
    typeof k.executeQuery === "function" &&
    typeof k.selectFrom === "function" &&
    typeof k.withoutPlugins === "function"
  );
}

function kyselyStatements(pluggedTrx: KyselyLike): TransactionStatements {
  if (!pluggedTrx.isTransaction) {
    outsideTransaction("a Kysely instance", "`db.transaction().execute((trx) => …)`");
  }
  // The same transaction and connection, without the caller's plugins.
  const trx = pluggedTrx.withoutPlugins();
  // The query compiler tells the family: `$1` placeholders (PostgreSQL), backticks (MySQL), or `"c" = ?`.
  const probe = trx.selectFrom("t").select("c").where("c", "=", 0).compile().sql;
  const dialect: SqlDialect | undefined = probe.includes("$1")
    ? "postgres"
    : probe.includes("`")
      ? "mysql"
      : probe.includes('"c" = ?')
        ? "sqlite"
        : undefined;
  if (dialect === undefined) refuse(`cannot tell this Kysely dialect's database from its SQL (${probe})`);
  return {
    dialect,
    query: async (sql, values) => {
      const text = dialect === "postgres" ? numbered(sql) : sql;
      const { rows } = await trx.executeQuery({
        sql: text,
        parameters: values,
        query: { kind: "RawNode", sqlFragments: [text], parameters: [] },
        queryId: { queryId: "idempotool-op2" },
      });
      return rows as Row[];
    },
  };
}

// --- knex -----------------------------------------------------------------------------------------

/** The part of a knex transaction used: its mark, its client's dialect, and `raw` with `?` bindings. */
interface KnexLike {
  readonly isTransaction?: boolean;
  isCompleted?(): boolean;
  readonly client: { readonly dialect?: unknown };
  raw(sql: string, bindings: readonly unknown[]): PromiseLike<unknown>;
}

function isKnex(tx: unknown): tx is KnexLike {
  // A knex instance, and each of its transactions, is a function (the query builder) with methods on it.
  if (typeof tx !== "function") return false;
  const k = tx as unknown as Partial<KnexLike>;
  return typeof k.raw === "function" && typeof k.client === "object" && k.client !== null;
}

const knexDialects: Record<string, SqlDialect> = {
  postgresql: "postgres",
  mysql: "mysql",
  sqlite3: "sqlite",
};

function knexStatements(trx: KnexLike): TransactionStatements {
  if (trx.isTransaction !== true)
    outsideTransaction("a knex instance", "`knex.transaction(async (trx) => …)`");
  if (trx.isCompleted?.() === true)
    refuse("got a knex transaction that has already committed or rolled back");
  const dialect = knexDialects[String(trx.client.dialect)];
  if (dialect === undefined) refuse(`does not support knex's ${String(trx.client.dialect)} dialect`);
  return {
    dialect,
    query: async (sql, values) => {
      const result = (await trx.raw(sql, values)) as unknown;
      // pg answers { rows }, mysql2 [rows, fields] ([header, …] for a write), SQLite the rows.
      if (dialect === "postgres") return ((result as { rows?: unknown }).rows ?? []) as Row[];
      const rows = dialect === "mysql" ? (result as unknown[])[0] : result;
      return Array.isArray(rows) ? (rows as Row[]) : [];
    },
  };
}

// --- Drizzle --------------------------------------------------------------------------------------

// Drizzle marks its classes with this registered symbol (what its `is()` reads).
const entityKind = Symbol.for("drizzle:entityKind");

/** The entity kinds along the class chain of `value` (empty for anything that is not Drizzle's). */
function drizzleKinds(value: unknown): string[] {
  const kinds: string[] = [];
  if (typeof value !== "object" || value === null) return kinds;
  for (let c: unknown = value.constructor; typeof c === "function"; c = Object.getPrototypeOf(c)) {
    const kind = (c as unknown as Record<symbol, unknown>)[entityKind];
    if (typeof kind === "string") kinds.push(kind);
  }
  return kinds;
}

/** A query as Drizzle's `execute`/`all`/`run` take it: Drizzle puts in its own placeholders. */
interface DrizzleQuery {
  getSQL(): DrizzleQuery;
  toQuery(config: { escapeParam(index: number, value: unknown): string }): {
    sql: string;
    params: unknown[];
  };
}

/** The part of a Drizzle transaction used, per database. */
interface DrizzleTransactionLike {
  execute?(query: DrizzleQuery): PromiseLike<unknown>;
  all?(query: DrizzleQuery): unknown;
  run?(query: DrizzleQuery): unknown;
  readonly resultKind?: unknown;
}

const drizzleTransactions: Record<string, SqlDialect> = {
  PgTransaction: "postgres",
  MySqlTransaction: "mysql",
  SQLiteTransaction: "sqlite",
};

function drizzleStatements(tx: DrizzleTransactionLike, kinds: readonly string[]): TransactionStatements {
  const dialect = kinds.map((kind) => drizzleTransactions[kind]).find((d) => d !== undefined);
  if (dialect === undefined) {
    outsideTransaction(`Drizzle's ${kinds[0]}`, "`db.transaction(async (tx) => …)`");
  }
  if (dialect === "sqlite" && tx.resultKind !== "async") {
    // better-sqlite3 and bun:sqlite run Drizzle's transaction callback synchronously: an async step
    // would run after that transaction had ended.
    refuse(
      "Drizzle's transactions on a synchronous SQLite driver cannot wait for an async write; use " +
        "sqliteTransactionalOnce on the driver's database and run Drizzle on that same database inside it",
    );
  }
  return {
    dialect,
    query: async (sql, values) => {
      const query: DrizzleQuery = {
        getSQL: () => query,
        toQuery: (config) => {
          let next = 0;
          const placed = sql.replace(/\?/g, () => {
            const index = next++;
            return config.escapeParam(index, values[index]);
          });
          return { sql: placed, params: [...values] };
        },
      };
      if (dialect === "sqlite") {
        // Drizzle asks which statements answer rows: `all` for them, `run` for the rest.
        const rows = /^\s*SELECT\b|\bRETURNING\b/i.test(sql) ? await tx.all?.(query) : await tx.run?.(query);
        return Array.isArray(rows) ? (rows as Row[]) : [];
      }
      const result = (await tx.execute?.(query)) as unknown;
      // node-postgres answers { rows }, postgres.js the rows; mysql2 [rows, fields] ([header, …] for a write).
      const rows =
        dialect === "mysql"
          ? (result as unknown[])[0]
          : Array.isArray(result)
            ? result
            : (result as { rows?: unknown }).rows;
      return Array.isArray(rows) ? (rows as Row[]) : [];
    },
  };
}
