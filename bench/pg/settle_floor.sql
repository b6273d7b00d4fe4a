-- The floor's settle: its UPDATE, after the floor's INSERT of a new key (the INSERT is the same in every settle_*
-- script, so tps differences are the settle's; pgbench -r gives each statement's own latency).
--   pgbench -h 127.0.0.1 -U postgres -n -M prepared -r -c 16 -j 2 -T 10 -f bench/pg/settle_floor.sql test   (and -c 1 -j 1)
-- after scripts/node.sh 24 --import tsx bench/pg/setup.ts (schema pgcost; drop it with teardown.sql).
-- Constant strings (scope, tool, fingerprint, status, result) are literals (the result's colons escaped as \x3a,
-- else pgbench reads ":true" as a variable); key, token and numbers are
-- pgbench variables, sent as parameters of the prepared statement as the store and the floor send them.
-- A new key per transaction: random in [1e8, 9e15], so it never meets the 10,000 seeded keys.
\set id random(100000000, 9000000000000000)
\set now 1796241000000
\set lexp :now + 60000
\set exp :now + 86400000
INSERT INTO pgcost.floor (scope, key, tool, fingerprint, status, token, created_at, updated_at,
        lease_expires_at, expires_at, attempts) VALUES ('default', :id, 'send_email', 'abababababababababababababababababababababababababababababababab', 'in_progress', :id, :now, :now, :lexp, :exp, 1)
      ON CONFLICT DO NOTHING;
UPDATE pgcost.floor SET status = 'completed', result = E'{"queued"\x3atrue,"to"\x3a"alice@example.com","messageId"\x3a"m-1"}', updated_at = :now, lease_expires_at = :now,
        expires_at = :exp WHERE scope = 'default' AND key = :id AND token = :id;
