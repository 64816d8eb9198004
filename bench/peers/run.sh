#!/usr/bin/env bash
# Runs the peers on the same workloads as `drover-bench` (BENCH_SECTION=fleet):
# drain of M pre-queued no-op jobs with 1, 8 and 64 workers, and open-loop
# arrivals at 200 and 1,000 jobs/s. Prints JSON lines; keeps them in
# bench/results/. Needs DROVER_TEST_PG_URL (an admin URL) for graphile-worker.
set -euo pipefail
cd "$(dirname "$0")"
./setup.sh
M=${BENCH_DRAIN_JOBS:-5000}
SECS=${BENCH_OPEN_SECONDS:-10}
PG=${DROVER_TEST_PG_URL:?set DROVER_TEST_PG_URL to a PostgreSQL admin URL (tests/run.sh shows how)}
redis-server --port 6390 --bind 127.0.0.1 --save '' --appendonly no --daemonize yes --pidfile "$PWD/.local/redis.pid" >/dev/null
trap 'kill "$(cat "$PWD/.local/redis.pid")" 2>/dev/null || true' EXIT
psql "$PG" -qc "DROP DATABASE IF EXISTS drover_peer_gw WITH (FORCE)" >/dev/null 2>&1
psql "$PG" -qc "CREATE DATABASE drover_peer_gw" >/dev/null
export PEER_PG_URL="${PG%/*}/drover_peer_gw" PEER_REDIS=redis://127.0.0.1:6390/0
mkdir -p ../results
out="../results/peers-$(date -u +%Y-%m-%dT%H%M%SZ).jsonl"
{
  for n in 1 8 64; do
    .local/venv/bin/python celery_bench.py drain "$n" "$M"
    node graphile_bench.js drain "$n" "$M"
  done
  for rate in 200 1000; do
    .local/venv/bin/python celery_bench.py open "$rate" "$SECS"
    node graphile_bench.js open "$rate" "$SECS"
  done
} | tee "$out"
echo "saved to bench/results/${out##*/}"
