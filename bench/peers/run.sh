#!/usr/bin/env bash
# Runs the peers on the same workloads as `drover-bench` (BENCH_SECTION=fleet):
# drain of M pre-queued no-op jobs with 1, 8 and 64 workers, and open-loop
# arrivals at 200 and 1,000 jobs/s. Prints JSON lines; keeps them in
# bench/results/. Needs DROVER_TEST_PG_URL (an admin URL) for graphile-worker.
# Temporal runs on its dev server (in memory, loopback, a free port), which
# this script starts and stops; if setup.sh could not install it, it is skipped.
# Its task queues have one partition, not four (see temporal_bench.py). Each
# driver's JSON line carries the versions and settings it ran with.
set -euo pipefail
cd "$(dirname "$0")"
./setup.sh
M=${BENCH_DRAIN_JOBS:-5000}
SECS=${BENCH_OPEN_SECONDS:-10}
PG=${DROVER_TEST_PG_URL:?set DROVER_TEST_PG_URL to a PostgreSQL admin URL (tests/run.sh shows how)}
PY=.local/venv/bin/python
redis-server --port 6390 --bind 127.0.0.1 --save '' --appendonly no --daemonize yes --pidfile "$PWD/.local/redis.pid" >/dev/null
temporal_pid=
cleanup() {
  kill "$(cat "$PWD/.local/redis.pid")" 2>/dev/null || true
  if [ -n "$temporal_pid" ]; then kill "$temporal_pid" 2>/dev/null || true; wait "$temporal_pid" 2>/dev/null || true; fi
}
trap cleanup EXIT
psql "$PG" -qc "DROP DATABASE IF EXISTS drover_peer_gw WITH (FORCE)" >/dev/null 2>&1
psql "$PG" -qc "CREATE DATABASE drover_peer_gw" >/dev/null
export PEER_PG_URL="${PG%/*}/drover_peer_gw" PEER_REDIS=redis://127.0.0.1:6390/0
if [ -x .local/venv/bin/temporal ] && $PY -c 'import temporalio' 2>/dev/null; then
  port=$($PY -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  export PEER_TEMPORAL_DEV_FLAGS="--headless --log-level error --dynamic-config-value activity.enableStandalone=true \
--dynamic-config-value matching.numTaskqueueReadPartitions=1 --dynamic-config-value matching.numTaskqueueWritePartitions=1"
  # shellcheck disable=SC2086 # the flags are words
  .local/venv/bin/temporal server start-dev --ip 127.0.0.1 --port "$port" $PEER_TEMPORAL_DEV_FLAGS >.local/temporal.log 2>&1 &
  temporal_pid=$!
  export PEER_TEMPORAL=127.0.0.1:$port
  for _ in $(seq 60); do
    .local/venv/bin/temporal operator cluster health --address "$PEER_TEMPORAL" >/dev/null 2>&1 && break
    sleep 0.5
  done
  .local/venv/bin/temporal operator cluster health --address "$PEER_TEMPORAL" >/dev/null 2>&1 ||
    { echo "run.sh: the Temporal dev server did not start; see bench/peers/.local/temporal.log" >&2; exit 1; }
else
  echo "run.sh: Temporal is not installed (setup.sh could not get it from PyPI); skipping Temporal" >&2
fi
run_temporal() {
  [ -z "$temporal_pid" ] || $PY temporal_bench.py "$@" || echo "run.sh: temporal_bench.py $* failed; see above" >&2
}
mkdir -p ../results
out="../results/peers-$(date -u +%Y-%m-%dT%H%M%SZ).jsonl"
{
  for n in 1 8 64; do
    $PY celery_bench.py drain "$n" "$M"
    node graphile_bench.cjs drain "$n" "$M"
    run_temporal drain "$n" "$M"
  done
  for rate in 200 1000; do
    $PY celery_bench.py open "$rate" "$SECS"
    node graphile_bench.cjs open "$rate" "$SECS"
    run_temporal open "$rate" "$SECS"
  done
} | tee "$out"
echo "saved to bench/results/${out##*/}"
