#!/usr/bin/env bash
# The plans PostgreSQL runs for every job: the lease batch
# (coordinator/src/store/leases/lease.sql), the complete (leases/complete.rs,
# one lease), and the two in one statement as a runner asks for them
# (bench/complete_next.sql, which leases/complete_next.rs builds), as
# generic plans (sqlx prepares them, so after five calls PostgreSQL may keep
# a generic one: forced here), with
# EXPLAIN (ANALYZE, BUFFERS): on a queue of 5,000 and of 500,000 jobs, each
# beside a day of finished history (HISTORY jobs, default 2,000,000: a day
# at 23 jobs/s; every one leased once, so the lease indexes hold them).
# Each statement runs twice in one transaction that is rolled back (the
# first run of a cold cache reads from disk; the second is the steady
# state). Prints the plans; the database is dropped at the end.
# PostgreSQL is the tests' (tests/postgres.sh) unless DROVER_TEST_PG_URL
# is set; needs the release build (bench/run.sh makes it).
set -euo pipefail
cd "$(dirname "$0")/.."
. tests/postgres.sh
ensure_postgres
history=${HISTORY:-2000000}
bin=target/release/drover-coordinator
[ -x "$bin" ] || { echo "bench/plans.sh: build first: cargo build --release -p drover-coordinator" >&2; exit 1; }
lease_sql=$(cat coordinator/src/store/leases/lease.sql)
# One complete: the statement with its first VALUES row.
complete_sql=$(sed 's/{rows}/($2, $3, $4, $5, $6, $7, $8)/' coordinator/src/store/leases/complete.sql)
next_sql=$(cat bench/complete_next.sql)
for queue in 5000 500000; do
  db="drover_plans_$(date +%s)_$queue"
  url="${DROVER_TEST_PG_URL%/*}/$db"
  psql "$DROVER_TEST_PG_URL" -qc "CREATE DATABASE $db"
  "$bin" admin bootstrap --workspace acme --email plans@acme.test --database "$url" >/dev/null
  printf '\n## A queue of %s jobs, %s finished jobs of history\n\n' "$queue" "$history"
  started=$(date +%s)
  psql "$url" -q -v ON_ERROR_STOP=1 <<SQL
INSERT INTO runtimes (id, workspace_id, owner_member_id, name, created_at)
  SELECT 'rt_plan', id, NULL, 'plan', 0 FROM workspaces;
INSERT INTO runners (id, runtime_id, name, labels, detected, created_at, slots)
  VALUES ('rn_plan', 'rt_plan', 'plan', '[]', '{}', 0, 1);
INSERT INTO jobs (id, workspace_id, submitter_id, runtime_ref, runtime_id, state, priority,
                  requires, spec, attempt, max_attempts, lease_id, lease_runner_id, ran_by,
                  exit_code, created_at, started_at, finished_at)
  SELECT 'job_h' || g, w.id, m.id, 'self:ws:plan', 'rt_plan', 'succeeded', 0, '[]',
         '{"command":["true"]}', 1, 3, 'ls_h' || g, 'rn_plan', 'rn_plan', 0, g, g, g
  FROM workspaces w, members m, generate_series(1, $history) g;
INSERT INTO jobs (id, workspace_id, submitter_id, runtime_ref, runtime_id, state, priority,
                  requires, spec, max_attempts, created_at)
  SELECT 'job_q' || g, w.id, m.id, 'self:ws:plan', 'rt_plan', 'queued', 0, '[]',
         '{"command":["true"]}', 3, $history + g
  FROM workspaces w, members m, generate_series(1, $queue) g;
VACUUM ANALYZE;
SQL
  printf 'loaded in %s s\n\n```\n' "$(($(date +%s) - started))"
  psql "$url" -q -v ON_ERROR_STOP=1 <<SQL
SET plan_cache_mode = force_generic_plan;
PREPARE lease (text[], text[], text[], bigint, bigint) AS $lease_sql;
PREPARE complete (bigint, text, text, text, bigint, text, bigint, bigint) AS $complete_sql;
PREPARE next (text, text, bigint, bigint, text, text, text, bigint, text, bigint, bigint) AS $next_sql;
BEGIN;
\echo '-- lease, first run'
EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) EXECUTE lease('{rn_plan}', '{ls_p1}', '{rn_plan}', 1, 600000);
\echo '-- complete, first run'
EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) EXECUTE complete(2, 'ls_p1', 'rn_plan', 'succeeded', 0, NULL, 2, 202612);
\echo '-- lease, second run'
EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) EXECUTE lease('{rn_plan}', '{ls_p2}', '{rn_plan}', 3, 600000);
\echo '-- complete, second run'
EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) EXECUTE complete(4, 'ls_p2', 'rn_plan', 'succeeded', 0, NULL, 4, 202612);
\o /dev/null
EXECUTE lease('{rn_plan}', '{ls_p3}', '{rn_plan}', 5, 600000);
\o
\echo '-- complete with the next lease, first run'
EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) EXECUTE next('rn_plan', 'ls_p4', 6, 600000, 'ls_p3', 'rn_plan', 'succeeded', 0, NULL, 6, 202612);
\echo '-- complete with the next lease, second run'
EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) EXECUTE next('rn_plan', 'ls_p5', 7, 600000, 'ls_p4', 'rn_plan', 'succeeded', 0, NULL, 7, 202612);
ROLLBACK;
SQL
  echo '```'
  psql "$DROVER_TEST_PG_URL" -qc "DROP DATABASE $db WITH (FORCE)"
done
