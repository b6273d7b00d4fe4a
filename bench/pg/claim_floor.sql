-- The floor's claim: INSERT … ON CONFLICT DO NOTHING of a new key (bench/lib/backends/postgres.ts).
--   pgbench -h 127.0.0.1 -U postgres -n -M prepared -r -c 16 -j 2 -T 10 -f bench/pg/claim_floor.sql test   (and -c 1 -j 1)
-- after scripts/node.sh 24 --import tsx bench/pg/setup.ts (schema pgcost; drop it with teardown.sql).
-- Constant strings (scope, tool, fingerprint, status, result) are literals; key, token and numbers are
-- pgbench variables, sent as parameters of the prepared statement as the store and the floor send them.
-- A new key per transaction: random in [1e8, 9e15], so it never meets the 10,000 seeded keys.
\set id random(100000000, 9000000000000000)
\set now 1796241000000
\set lexp :now + 60000
\set exp :now + 86400000
INSERT INTO pgcost.floor (scope, key, tool, fingerprint, status, token, created_at, updated_at,
        lease_expires_at, expires_at, attempts) VALUES ('default', :id, 'send_email', 'abababababababababababababababababababababababababababababababab', 'in_progress', :id, :now, :now, :lexp, :exp, 1)
      ON CONFLICT DO NOTHING;
