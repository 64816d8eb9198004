#!/usr/bin/env bash
# Where PostgreSQL's CPU goes in a one-runner drain: the drain of
# drover-bench's fleet section (JOBS jobs, default 20,000, one runner),
# with `perf record --call-graph dwarf` on every PostgreSQL process for
# SECONDS (default 3) in its middle, then the share of PostgreSQL's
# on-CPU samples under each stage of a statement's life (perf report
# --children: a stage's own time and everything it calls). Needs root,
# perf (Debian's linux-perf) and the release build (bench/run.sh makes it);
# PostgreSQL is the tests' (tests/postgres.sh) unless DROVER_TEST_PG_URL
# is set. PEER=graphile-worker profiles graphile-worker's one-worker drain
# instead, on a database of its own (bench/peers/setup.sh installs it).
set -euo pipefail
cd "$(dirname "$0")/.."
. tests/postgres.sh
step() { echo "$*" >&2; }
ensure_postgres
command -v perf >/dev/null || { echo "bench/pg_profile.sh: needs perf (apt-get install linux-perf)" >&2; exit 1; }
bench=target/release/drover-bench
[ -x "$bench" ] || { echo "bench/pg_profile.sh: build first: bench/run.sh, or cargo build --release -p drover-tests --bins" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
jobs=${JOBS:-20000}
if [ "${PEER:-}" = graphile-worker ]; then
  peer_db=drover_peer_profile
  psql "$DROVER_TEST_PG_URL" -qc "DROP DATABASE IF EXISTS $peer_db WITH (FORCE)" -qc "CREATE DATABASE $peer_db" 2>/dev/null
  trap 'rm -rf "$out"; psql "$DROVER_TEST_PG_URL" -qc "DROP DATABASE IF EXISTS $peer_db WITH (FORCE)"' EXIT
  PEER_PG_URL="${DROVER_TEST_PG_URL%/*}/$peer_db" node bench/peers/graphile_bench.cjs drain 1 "$jobs" >"$out/drain.md" 2>&1 &
  # Jobs flow once the queue, filled first, has begun to shrink.
  flowing() { [ "$(psql "${DROVER_TEST_PG_URL%/*}/$peer_db" -Atc "SELECT count(*) BETWEEN 1 AND $jobs - 100
    FROM graphile_worker._private_jobs" 2>/dev/null)" = t ]; }
else
  BENCH_SECTION=fleet BENCH_BACKENDS=pg BENCH_DRAIN_RUNNERS=1 BENCH_DRAIN_JOBS="$jobs" \
    BENCH_OPEN_RATES= BENCH_FLEETS= BENCH_RECONNECT= "$bench" >"$out/drain.md" 2>&1 &
  # Jobs flow once a backend has run the complete with the next lease.
  flowing() { [ "$(psql "$DROVER_TEST_PG_URL" -Atc "SELECT count(*) FROM pg_stat_activity WHERE
    pid <> pg_backend_pid() AND query LIKE '%complete with the runner''s next lease%'" 2>/dev/null)" != 0 ]; }
fi
drain=$!
# The drain's setup (a fresh database, the coordinator and its pool) takes
# a few seconds; the profile is taken once jobs flow.
deadline=$((SECONDS + 60))
until flowing; do
  [ $SECONDS -lt $deadline ] || { echo "bench/pg_profile.sh: the drain did not start" >&2; exit 1; }
  kill -0 $drain 2>/dev/null || { cat "$out/drain.md" >&2; exit 1; }
  sleep 0.2
done
# PostgreSQL's processes as jobs flow (its clients' connections are open
# by then), sampled on their own clocks: the time a backend spends being
# switched out and in is its own, as /proc counts it.
perf record -q -p "$(pgrep -d, -x postgres)" --call-graph dwarf,16384 -F 2000 \
  -o "$out/perf.data" -- sleep "${SECONDS_PROFILED:-3}" 2>/dev/null
wait $drain
# PostgreSQL's CPU-ms a job in this (profiled) drain, as the drain reports it.
pg_ms=$(grep -oE 'PostgreSQL [0-9.]+ CPU-s per 1,000|"pgCpuSecondsPer1000":[0-9.]+' "$out/drain.md" | grep -oE '[0-9]+\.[0-9]+' | head -1)
jps=$(grep -oE '[0-9]+ jobs/s|"jobsPerSecond":[0-9]+' "$out/drain.md" | grep -oE '[0-9]+$|^[0-9]+' | head -1)
echo "${PEER:-Drover}, one worker, $jobs jobs: $jps jobs/s under the profiler; PostgreSQL $pg_ms CPU-ms a job"
perf report -i "$out/perf.data" --children --sort sym -g none -q 2>/dev/null >"$out/report.txt"
share() {
  awk -v s="$1" -v ms="$pg_ms" '$NF == s && !f { p = $1; sub("%", "", p); printf "%.1f %% | %.3f", p, p * ms / 100; f = 1 }
    END { if (!f) print "0 % | 0" }' "$out/report.txt"
}
echo
echo "| stage of a statement (PostgreSQL's own processes) | share of its on-CPU samples | CPU-ms a job |"
echo "|---|---|---|"
while IFS='|' read -r sym what; do
  echo "| $what (\`$sym\`) | $(share "$sym") |"
done <<'EOF'
secure_read|reading the next request, with the sleep and wake-up before it
secure_write|sending the answer (on loopback, the receiver's side too)
GetCachedPlan|checking the cached plan (locking every table and index in it)
standard_ExecutorStart|setting up the plan's nodes
standard_ExecutorRun|running the plan
AfterTriggerEndQuery|the statement's triggers (metering: the month's spend stripe)
standard_ExecutorEnd|tearing the plan down
CommitTransactionCommand|the commit
XLogFlush|of which the WAL flush
EOF
