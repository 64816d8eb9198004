#!/usr/bin/env bash
# Quickstart, command 2: every check and every test. `.ci/run` calls this.
# It installs or starts what the tests need, or stops saying what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }
missing() { echo "tests/run.sh: $*" >&2; exit 1; }

command -v cargo >/dev/null || missing "Rust is missing: install it with rustup (https://rustup.rs)"
for tool in sh sleep; do command -v "$tool" >/dev/null || missing "$tool is missing (the tests' jobs use it)"; done
if ! cargo nextest --version >/dev/null 2>&1; then
  step "installing cargo-nextest from crates.io"
  cargo install --locked cargo-nextest
fi

step "format"
cargo fmt --all -- --check
step "clippy"
cargo clippy --workspace --all-targets --quiet -- -D warnings
step "build the binaries the end-to-end tests run"
cargo build --workspace --bins
step "tests"
cargo nextest run --workspace --no-fail-fast
