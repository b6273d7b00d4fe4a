-- Diagnostic: the store's INSERT … ON CONFLICT DO UPDATE … WHERE of a new key inside the same PL/pgSQL function,
-- without the read before it (pgcost.diag_doupdate_only, setup.ts): what the read before the insert costs.
--   pgbench -h 127.0.0.1 -U postgres -n -M prepared -r -c 16 -j 2 -T 10 -f bench/pg/claim_diag_fn_doupdate.sql test   (and -c 1 -j 1)
-- after scripts/node.sh 24 --import tsx bench/pg/setup.ts (schema pgcost; drop it with teardown.sql).
-- Constant strings (scope, tool, fingerprint, status, result) are literals; key, token and numbers are
-- pgbench variables, sent as parameters of the prepared statement as the store and the floor send them.
-- A key per transaction: new ones random in [1e8, 9e15] (never one of the 10,000 seeded), replayed ones in [1, 10000].
\set id random(100000000, 9000000000000000)
\set off 0
\set lease 60000
\set ttl 86400000
SELECT "pgcost"."diag_doupdate_only"('default', :id, 'send_email', 'abababababababababababababababababababababababababababababababab', :id,
          (floor(extract(epoch FROM statement_timestamp()) * 1000)::bigint + :off::bigint), :lease::bigint, :ttl::bigint) AS claim;
