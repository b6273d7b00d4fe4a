/**
 * `idempotool/mysql`: the idempotency store a fleet of workers shares, on a MySQL 8 or MariaDB 10.6+
 * table. It takes the mysql2 pool you already have (its promise API), typed by the one method it uses, so
 * this entry imports no driver; mysql2 is an optional peer dependency. Leases are judged by the server's
 * clock.
 *
 * @example
 * import mysql from "mysql2/promise";
 * import { mysqlStore } from "idempotool/mysql";
 *
 * const store = mysqlStore({ client: mysql.createPool({ uri: process.env.MYSQL_URL ?? "mysql://root@127.0.0.1:3306/test" }) });
 * await store.migrate(); // optional: the table is created on first use anyway
 *
 * @module
 */
export type { MysqlQueryable, MysqlStore, MysqlStoreOptions } from "./mysql-store.js";
export { mysqlStore } from "./mysql-store.js";
