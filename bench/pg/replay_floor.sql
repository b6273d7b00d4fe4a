-- The floor's replay: SELECT by primary key of one of the 10,000 completed records (setup.ts).
--   pgbench -h 127.0.0.1 -U postgres -n -M prepared -r -c 16 -j 2 -T 10 -f bench/pg/replay_floor.sql test   (and -c 1 -j 1)
-- after scripts/node.sh 24 --import tsx bench/pg/setup.ts (schema pgcost; drop it with teardown.sql).
-- Constant strings (scope, tool, fingerprint, status, result) are literals; key, token and numbers are
-- pgbench variables, sent as parameters of the prepared statement as the store and the floor send them.
-- A new key per transaction: random in [1e8, 9e15], so it never meets the 10,000 seeded keys.
\set id random(1, 10000)
\set now 1796241000000
SELECT status, fingerprint, result FROM pgcost.floor WHERE scope = 'default' AND key = :id AND expires_at > :now;
