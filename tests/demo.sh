#!/usr/bin/env bash
# Quickstart, command 1: build, then run the main job on the embedded
# default (SQLite): a coordinator, a workspace, runners, sample jobs.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v cargo >/dev/null; then
  echo "demo.sh: Rust is missing: install it with rustup (https://rustup.rs), then run this again" >&2
  exit 1
fi
# The server side, the CLI and the demo: not the desktop app, whose GUI
# libraries a server need not have.
cargo build --quiet --bins -p drover-coordinator -p drover -p drover-tests
exec target/debug/drover-demo
