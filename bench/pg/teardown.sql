-- Drops the scratch schema the pgbench scripts in bench/pg/ use (made by setup.ts).
--   psql -h 127.0.0.1 -U postgres -d test -f bench/pg/teardown.sql
DROP SCHEMA IF EXISTS pgcost CASCADE;
