# Sourced by tests/run.sh and bench/run.sh (which define `step` and `missing`).
# ensure_postgres: use DROVER_TEST_PG_URL (an admin URL) if given, else start
# the machine's cluster, installing Debian's package first if it is missing,
# with a role drover/drover that may create databases; exports the URL.
as_postgres() { if [ "$(id -u)" = 0 ]; then su postgres -c "$*"; else sudo -u postgres sh -c "$*"; fi; }

ensure_postgres() {
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
    # Dropping a test database WITH (FORCE) terminates what is connected to
    # it, autovacuum workers included, which takes pg_signal_backend.
    as_postgres "psql -p $port -qc \"GRANT pg_signal_backend TO drover\"" >/dev/null
    export DROVER_TEST_PG_URL="postgres://drover:drover@127.0.0.1:$port/postgres"
    managed_version=$version managed_cluster=$cluster managed_port=$port
  fi
}

# ensure_pg_stat_statements (bench/run.sh): the cluster ensure_postgres
# manages loads pg_stat_statements (track = all: statements inside
# functions too; restarted once to load it), with its view in the database
# `postgres` (the bench reads each database's statements there, by dbid; the
# databases the tests make stay as the migrations build them), and the
# drover role may read and reset it. With
# DROVER_TEST_PG_URL given, the server is someone else's: left as it is
# (the bench then reports no statement figures).
ensure_pg_stat_statements() {
  [ -n "${managed_port:-}" ] || return 0
  local port=$managed_port
  if ! as_postgres "psql -p $port -qtAc 'SHOW shared_preload_libraries'" | grep -q pg_stat_statements; then
    step "loading pg_stat_statements in PostgreSQL $managed_version/$managed_cluster (a restart)"
    as_postgres "psql -p $port -qc \"ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'\""
    pg_ctlcluster "$managed_version" "$managed_cluster" restart
  fi
  # Known once the library is loaded; a reload applies it.
  if ! as_postgres "psql -p $port -qtAc 'SHOW pg_stat_statements.track'" | grep -qx all; then
    as_postgres "psql -p $port -qc \"ALTER SYSTEM SET pg_stat_statements.track = 'all'\"" >/dev/null
    as_postgres "psql -p $port -qtAc 'SELECT pg_reload_conf()'" >/dev/null
  fi
  as_postgres "psql -p $port -qc 'CREATE EXTENSION IF NOT EXISTS pg_stat_statements'" >/dev/null 2>&1
  as_postgres "psql -p $port -qc 'GRANT pg_read_all_stats TO drover'" >/dev/null 2>&1
  as_postgres "psql -p $port -qc 'GRANT EXECUTE ON FUNCTION pg_stat_statements_reset(oid, oid, bigint) TO drover'" >/dev/null
}
