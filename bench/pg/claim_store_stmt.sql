-- The store's claim of a new key as one plain statement (postgresStatements(…).claimStatement, exact text):
-- what it runs where the role could not create the claim function (and, as claimChecked, on its first claim).
--   pgbench -h 127.0.0.1 -U postgres -n -M prepared -r -c 16 -j 2 -T 10 -f bench/pg/claim_store_stmt.sql test   (and -c 1 -j 1)
-- after scripts/node.sh 24 --import tsx bench/pg/setup.ts (schema pgcost; drop it with teardown.sql).
-- Constant strings (scope, tool, fingerprint, status, result) are literals; key, token and numbers are
-- pgbench variables, sent as parameters of the prepared statement as the store and the floor send them.
-- A new key per transaction: random in [1e8, 9e15], so it never meets the 10,000 seeded keys.
\set id random(100000000, 9000000000000000)
\set off 0
\set lease 60000
\set ttl 86400000
WITH live AS MATERIALIZED (
      SELECT * FROM "pgcost"."idem" WHERE scope = 'default' AND key = :id AND expires_at > (floor(extract(epoch FROM statement_timestamp()) * 1000)::bigint + :off::bigint)),
    claimed AS (
      INSERT INTO "pgcost"."idem" AS held (scope, key, tool, fingerprint, status, token, created_at, updated_at,
        lease_expires_at, expires_at, attempts)
      SELECT 'default', :id, 'send_email', 'abababababababababababababababababababababababababababababababab', 'in_progress', :id, (floor(extract(epoch FROM statement_timestamp()) * 1000)::bigint + :off::bigint), (floor(extract(epoch FROM statement_timestamp()) * 1000)::bigint + :off::bigint),
        (floor(extract(epoch FROM statement_timestamp()) * 1000)::bigint + :off::bigint) + :lease::bigint, (floor(extract(epoch FROM statement_timestamp()) * 1000)::bigint + :off::bigint) + :lease::bigint + :ttl::bigint, 1
      WHERE NOT EXISTS (SELECT FROM live)
      ON CONFLICT (scope, key) DO UPDATE SET tool = excluded.tool, fingerprint = excluded.fingerprint,
        status = excluded.status, token = excluded.token, created_at = excluded.created_at,
        updated_at = excluded.updated_at, lease_expires_at = excluded.lease_expires_at,
        expires_at = excluded.expires_at, attempts = excluded.attempts, result = NULL, error = NULL
      WHERE held.expires_at <= excluded.created_at
      RETURNING 1)
    SELECT false AS claimed, (floor(extract(epoch FROM statement_timestamp()) * 1000)::bigint + :off::bigint)::float8 AS now, tool, fingerprint, status, token, created_at::float8 AS "createdAt", updated_at::float8 AS "updatedAt", lease_expires_at::float8 AS "leaseExpiresAt", expires_at::float8 AS "expiresAt", attempts, result, error
    FROM live
    UNION ALL
    SELECT true, (floor(extract(epoch FROM statement_timestamp()) * 1000)::bigint + :off::bigint)::float8, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
    FROM claimed;
