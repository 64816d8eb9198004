#!/usr/bin/env bash
# Quickstart, command 2: every check and every test. `.ci/run` calls this.
# It installs or starts what the tests need, or stops saying what is missing.
#
# The end-to-end suite runs twice: on SQLite (the embedded default) and on
# PostgreSQL (the scale-out backend); the multi-replica tests run on PostgreSQL.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }
missing() { echo "tests/run.sh: $*" >&2; exit 1; }
as_postgres() { if [ "$(id -u)" = 0 ]; then su postgres -c "$*"; else sudo -u postgres sh -c "$*"; fi; }

command -v cargo >/dev/null || missing "Rust is missing: install it with rustup (https://rustup.rs)"
for tool in sh sleep; do command -v "$tool" >/dev/null || missing "$tool is missing (the tests' jobs use it)"; done
if ! cargo nextest --version >/dev/null 2>&1; then
  step "installing cargo-nextest from crates.io"
  cargo install --locked cargo-nextest
fi

# PostgreSQL: use DROVER_TEST_PG_URL (an admin URL) if given, else start the
# machine's cluster, installing Debian's package first if it is missing.
if [ -z "${DROVER_TEST_PG_URL:-}" ]; then
  if ! command -v pg_lsclusters >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      step "installing PostgreSQL (apt-get install postgresql)"
      apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
    else
      missing "PostgreSQL is missing: run 'sudo apt-get install postgresql', or set DROVER_TEST_PG_URL to an admin URL (postgres://USER:PASSWORD@HOST:PORT/postgres) of a server where USER may create databases"
    fi
  fi
  if [ -z "$(pg_lsclusters -h 2>/dev/null)" ]; then
    version=$(ls /usr/lib/postgresql | sort -n | tail -1)
    step "creating a PostgreSQL $version cluster"
    pg_createcluster "$version" main >/dev/null
  fi
  read -r version cluster port status _ < <(pg_lsclusters -h | head -1)
  if [ "$status" != online ]; then
    step "starting PostgreSQL $version/$cluster"
    pg_ctlcluster "$version" "$cluster" start
  fi
  as_postgres "psql -p $port -qtAc \"SELECT 1 FROM pg_roles WHERE rolname = 'drover'\"" | grep -q 1 \
    || as_postgres "psql -p $port -qc \"CREATE ROLE drover LOGIN PASSWORD 'drover' CREATEDB\""
  export DROVER_TEST_PG_URL="postgres://drover:drover@127.0.0.1:$port/postgres"
fi
# Leftovers of interrupted runs.
psql "$DROVER_TEST_PG_URL" -qtAc "SELECT datname FROM pg_database WHERE datname LIKE 'drover_t_%'" 2>/dev/null \
  | while read -r db; do psql "$DROVER_TEST_PG_URL" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true; done

step "format"
cargo fmt --all -- --check
step "clippy"
cargo clippy --workspace --all-targets --quiet -- -D warnings
step "build the binaries the end-to-end tests run"
cargo build --workspace --bins
step "tests on SQLite"
DROVER_TEST_DATABASE=sqlite cargo nextest run --workspace --no-fail-fast -E 'not binary(replicas)'
step "tests on PostgreSQL, and several replicas sharing it"
DROVER_TEST_DATABASE=postgres cargo nextest run --workspace --no-fail-fast -E 'package(drover-tests)'
