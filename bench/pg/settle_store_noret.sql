-- settle_store.sql with the settle's RETURNING cut to one constant column (RETURNING 1): what the 9 returned
-- columns cost the server. Same WHERE (fenced by token and status), same SET.
--   pgbench -h 127.0.0.1 -U postgres -n -M prepared -r -c 16 -j 2 -T 10 -f bench/pg/settle_store_noret.sql test   (and -c 1 -j 1)
-- after scripts/node.sh 24 --import tsx bench/pg/setup.ts (schema pgcost; drop it with teardown.sql).
-- Constant strings (scope, tool, fingerprint, status, result) are literals (the result's colons escaped as \x3a,
-- else pgbench reads ":true" as a variable); key, token and numbers are
-- pgbench variables, sent as parameters of the prepared statement as the store and the floor send them.
-- A new key per transaction: random in [1e8, 9e15], so it never meets the 10,000 seeded keys.
\set id random(100000000, 9000000000000000)
\set now 1796241000000
\set lexp :now + 60000
\set exp :now + 86400000
\set off 0
\set ttl 86400000
INSERT INTO pgcost.idem (scope, key, tool, fingerprint, status, token, created_at, updated_at,
        lease_expires_at, expires_at, attempts) VALUES ('default', :id, 'send_email', 'abababababababababababababababababababababababababababababababab', 'in_progress', :id, :now, :now, :lexp, :exp, 1)
      ON CONFLICT DO NOTHING;
UPDATE "pgcost"."idem" SET status = 'completed', result = E'{"queued"\x3atrue,"to"\x3a"alice@example.com","messageId"\x3a"m-1"}', error = NULL,
          updated_at = (floor(extract(epoch FROM statement_timestamp()) * 1000)::bigint + :off::bigint), lease_expires_at = (floor(extract(epoch FROM statement_timestamp()) * 1000)::bigint + :off::bigint), expires_at = (floor(extract(epoch FROM statement_timestamp()) * 1000)::bigint + :off::bigint) + :ttl::bigint
        WHERE scope = 'default' AND key = :id AND token = :id
          AND status IN ('in_progress', 'unknown')
        RETURNING 1 AS settled;
