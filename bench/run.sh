#!/usr/bin/env bash
# Builds in release and runs drover-bench; keeps the output in bench/results/.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet --workspace --bins
mkdir -p bench/results
out="bench/results/$(date -u +%Y-%m-%dT%H%M%SZ).md"
{
  echo "# drover-bench $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo
  echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -sr)"
  echo
  target/release/drover-bench
} | tee "$out"
echo "saved to $out"
