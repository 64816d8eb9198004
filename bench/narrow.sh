#!/usr/bin/env bash
# Would a narrow queue table and a narrow table of live leases make a job
# cheaper for PostgreSQL? A job here is leased and completed in one
# transaction, by one client (pgbench, prepared statements), two ways:
#  - wide: as now, the job's row updated twice (leased, then finished),
#    never HOT (`state` is in the indexes' predicates);
#  - narrow: the job taken off a queue table (DELETE) into a table of live
#    leases (INSERT), then off it (DELETE), and the job's row updated once,
#    when it ends.
# Both are two statements and a commit a job, on Drover's own schema
# (migrations, indexes, triggers). ROUNDS rounds (default 3) of QUEUE jobs
# (default 5,000) each, alternating, with synchronous_commit on and then
# off (the commit's flush left out). Prints the mean latency per job; the
# database is dropped at the end. PostgreSQL is the tests'
# (tests/postgres.sh) unless DROVER_TEST_PG_URL is set; needs the release
# build (bench/run.sh makes it).
set -euo pipefail
cd "$(dirname "$0")/.."
. tests/postgres.sh
ensure_postgres
rounds=${ROUNDS:-3}
queue=${QUEUE:-5000}
bin=target/release/drover-coordinator
[ -x "$bin" ] || { echo "bench/narrow.sh: build first: cargo build --release -p drover-coordinator" >&2; exit 1; }
command -v pgbench >/dev/null || { echo "bench/narrow.sh: needs pgbench (apt-get install postgresql-contrib)" >&2; exit 1; }
db="drover_narrow_$(date +%s)"
url="${DROVER_TEST_PG_URL%/*}/$db"
work=$(mktemp -d)
trap 'rm -rf "$work"; psql "$DROVER_TEST_PG_URL" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)"' EXIT
psql "$DROVER_TEST_PG_URL" -qc "CREATE DATABASE $db"
"$bin" admin bootstrap --workspace acme --email narrow@acme.test --database "$url" >/dev/null
psql "$url" -q -v ON_ERROR_STOP=1 <<'SQL'
INSERT INTO runtimes (id, workspace_id, owner_member_id, name, created_at)
  SELECT 'rt_n', id, NULL, 'n', 0 FROM workspaces;
INSERT INTO runners (id, runtime_id, name, labels, detected, created_at, slots)
  VALUES ('rn_n', 'rt_n', 'n', '[]', '{}', 0, 1);
CREATE TABLE q (seq BIGINT PRIMARY KEY, runtime_id TEXT NOT NULL, priority BIGINT NOT NULL,
                queue_pos BIGINT NOT NULL);
CREATE INDEX q_pool ON q (runtime_id, priority DESC, queue_pos, seq);
CREATE TABLE live (seq BIGINT PRIMARY KEY, lease_id TEXT NOT NULL UNIQUE, runner_id TEXT NOT NULL,
                   expires BIGINT NOT NULL);
CREATE INDEX live_runner ON live (runner_id);
CREATE INDEX live_expires ON live (expires);
SQL
# A fresh queue: QUEUE queued jobs, in the jobs table and in q.
cat >"$work/seed.sql" <<SQL
TRUNCATE jobs CASCADE; TRUNCATE q; TRUNCATE live;
INSERT INTO jobs (id, workspace_id, submitter_id, runtime_ref, runtime_id, state, priority,
                  requires, spec, max_attempts, created_at)
  SELECT 'job_q' || g, w.id, m.id, 'self:ws:n', 'rt_n', 'queued', 0, '[]',
         '{"command":["true"]}', 3, g
  FROM workspaces w, members m, generate_series(1, $queue) g;
INSERT INTO q SELECT seq, runtime_id, priority, queue_pos FROM jobs;
VACUUM ANALYZE jobs; VACUUM ANALYZE q; VACUUM ANALYZE live;
SQL
cat >"$work/wide.sql" <<'SQL'
BEGIN;
UPDATE jobs SET state = 'leased', attempt = jobs.attempt + 1, lease_id = 'ls_' || c.seq,
       lease_runner_id = 'rn_n', started_at = 1, lease_expires_at = 20000
FROM (SELECT j.seq FROM jobs j
      WHERE j.state = 'queued' AND j.runtime_id = 'rt_n' AND j.pinned_runner_id IS NULL
      ORDER BY j.priority DESC, j.queue_pos, j.seq LIMIT 1 FOR UPDATE SKIP LOCKED) c
WHERE jobs.seq = c.seq RETURNING jobs.seq AS s \gset
UPDATE jobs SET state = 'succeeded', exit_code = 0, ran_by = 'rn_n', finished_at = 2,
       lease_expires_at = NULL
WHERE seq = :s;
COMMIT;
SQL
cat >"$work/narrow.sql" <<'SQL'
BEGIN;
WITH d AS (DELETE FROM q WHERE seq = (SELECT seq FROM q WHERE runtime_id = 'rt_n'
                                      ORDER BY priority DESC, queue_pos, seq
                                      LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING seq),
     i AS (INSERT INTO live SELECT seq, 'ls_' || seq, 'rn_n', 20000 FROM d)
SELECT seq AS s FROM d \gset
WITH x AS (DELETE FROM live WHERE seq = :s RETURNING seq, lease_id)
UPDATE jobs SET state = 'succeeded', attempt = jobs.attempt + 1, lease_id = x.lease_id,
       lease_runner_id = 'rn_n', started_at = 1, exit_code = 0, ran_by = 'rn_n', finished_at = 2
FROM x WHERE jobs.seq = x.seq;
COMMIT;
SQL
echo "| round | commit | wide, ms a job | narrow, ms a job |"
echo "|---|---|---|---|"
for round in $(seq "$rounds"); do
  for commit in on off; do
    row="| $round | synchronous_commit $commit |"
    for shape in wide narrow; do
      psql "$url" -q -v ON_ERROR_STOP=1 -f "$work/seed.sql" >/dev/null
      latency=$(PGOPTIONS="-c synchronous_commit=$commit" \
        pgbench -n -M prepared -c 1 -t $((queue - 100)) -f "$work/$shape.sql" "$url" 2>&1 |
        awk '/latency average/ {print $4}')
      row="$row $latency |"
    done
    echo "$row"
  done
done
