-- The store's replay: its claim function (exact call text) on one of the 10,000 completed records (setup.ts):
-- finds the live holder and answers it as JSON, writing nothing.
--   pgbench -h 127.0.0.1 -U postgres -n -M prepared -r -c 16 -j 2 -T 10 -f bench/pg/replay_store.sql test   (and -c 1 -j 1)
-- after scripts/node.sh 24 --import tsx bench/pg/setup.ts (schema pgcost; drop it with teardown.sql).
-- Constant strings (scope, tool, fingerprint, status, result) are literals; key, token and numbers are
-- pgbench variables, sent as parameters of the prepared statement as the store and the floor send them.
-- A new key per transaction: random in [1e8, 9e15], so it never meets the 10,000 seeded keys.
\set id random(1, 10000)
\set off 0
\set lease 60000
\set ttl 86400000
SELECT "pgcost"."idem_claim_v1q"('default', :id, 'send_email', 'abababababababababababababababababababababababababababababababab', :id,
          (floor(extract(epoch FROM statement_timestamp()) * 1000)::bigint + :off::bigint), :lease::bigint, :ttl::bigint) AS claim;
