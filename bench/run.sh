#!/usr/bin/env bash
# Every benchmark figure, in one run: builds in release, then
#  1. drover-bench: enqueue→lease, a drain by real runner processes, the cost
#     of a lease with a big history, idle footprints (SQLite FULL and NORMAL,
#     PostgreSQL with one and three replicas);
#  2. drover-bench BENCH_SECTION=fleet: drains by 1/8/64 protocol-level
#     runners (on PostgreSQL with what it executed per job, and the
#     statements that took most, from pg_stat_statements, which
#     ensure_pg_stat_statements loads, and PostgreSQL's own CPU per job,
#     from its processes), open-loop arrivals at 200 and 1,000
#     jobs/s, idle fleets of 1,000 and 10,000 runners, 1,000 runners
#     reconnecting after a 10 s outage (SQLite NORMAL and FULL, PostgreSQL);
#     then drover-retention-bench: 1/6/24 h of finished history purged
#     under an open loop at 200 jobs/s (database size, purge rate, latency);
#     then bench/burst.py: memory during and after stalled uploads, and
#     bench/storm.py: runner latency under a storm of member reads, and
#     bench/cli.py: `drover submit --wait -- true` from command to exit;
#     then drover-actions-bench: GitHub Actions on demand, from the
#     `workflow_job queued` webhook to the JIT runner's process started on a
#     waiting runner (SQLite, PostgreSQL; the fake GitHub's runner tarball);
#  3. the peers on the same workloads (bench/peers/run.sh: Celery + Redis,
#     graphile-worker, Temporal; installed from the registries), and the
#     ratios Drover ÷ peer (bench/compare.py), and the README's tables
#     rewritten from this run (bench/readme.py).
# Output: bench/results/<time>.md (tables and JSON) and peers-<time>.jsonl.
# PostgreSQL is started (or installed) as for the tests unless
# DROVER_TEST_PG_URL is set. BENCH_PEERS=0 skips the peers; the BENCH_*
# variables of drover-bench (see tests/src/bin/drover-bench.rs) pass through.
set -euo pipefail
cd "$(dirname "$0")/.."
step() { printf '\n==> %s\n' "$*" >&2; }
missing() { echo "bench/run.sh: $*" >&2; exit 1; }
. tests/postgres.sh
ensure_postgres
ensure_pg_stat_statements
step "building in release"
cargo build --release --quiet -p drover-coordinator -p drover -p drover-tests --bins
mkdir -p bench/results
stamp=$(date -u +%Y-%m-%dT%H%M%SZ)
out="bench/results/$stamp.md"
{
  echo "# drover-bench $stamp"
  echo
  echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -sr)"
  echo
  echo "## Dispatch, process drain, lease cost, idle footprint"
  echo
  target/release/drover-bench
  echo
  echo "## Fleet: protocol-level drains, open loop, idle fleets"
  echo
  BENCH_SECTION=fleet target/release/drover-bench
  echo
  printf '## Retention: a day of history at 200 jobs/s, purged while an open loop runs\n\n'; target/release/drover-retention-bench; echo
  echo "## Memory under a burst of stalled uploads (bench/burst.py)"
  echo
  python3 bench/burst.py
  echo
  echo "## A storm of member reads while a runner leases (bench/storm.py)"
  echo
  python3 bench/storm.py
  echo
  storm_db="drover_storm_$(date +%s)"
  psql "$DROVER_TEST_PG_URL" -qc "CREATE DATABASE $storm_db" >&2
  DROVER_BENCH_PG="${DROVER_TEST_PG_URL%/*}/$storm_db" python3 bench/storm.py
  psql "$DROVER_TEST_PG_URL" -qc "DROP DATABASE $storm_db WITH (FORCE)" >&2
  echo
  echo "## drover submit --wait -- true, submit to exit, a runner waiting (bench/cli.py)"
  echo
  HARNESS=0 python3 bench/cli.py
  cli_db="drover_cli_$(date +%s)"
  psql "$DROVER_TEST_PG_URL" -qc "CREATE DATABASE $cli_db" >&2
  DROVER_BENCH_PG="${DROVER_TEST_PG_URL%/*}/$cli_db" python3 bench/cli.py | tail -n +3
  psql "$DROVER_TEST_PG_URL" -qc "DROP DATABASE $cli_db WITH (FORCE)" >&2
  echo
  echo "## GitHub Actions on demand: webhook to JIT runner started (drover-actions-bench)"
  echo
  target/release/drover-actions-bench
} | tee "$out"
if [ "${BENCH_PEERS:-1}" != 0 ]; then
  step "peers"
  bench/peers/run.sh >&2
  peers=$(ls -t bench/results/peers-*.jsonl | head -1)
  {
    echo
    echo "## Drover ÷ peers (peers: ${peers#bench/results/})"
    echo
    python3 bench/compare.py "$out" "$peers"
  } | tee -a "$out"
  # The README's tables come from this run, never edited by hand.
  python3 bench/readme.py "$out" "$peers" README.md
fi
echo "saved to $out" >&2
