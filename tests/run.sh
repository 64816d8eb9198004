#!/usr/bin/env bash
# Quickstart, command 2: every check and every test. `.ci/run` calls this.
# It installs or starts what the tests need, or stops saying what is missing.
#
# The end-to-end suite runs twice: on SQLite (the embedded default) and on
# PostgreSQL (the scale-out backend); the multi-replica tests run on PostgreSQL.
# The desktop app (desktop/, src-ui/) adds its front-end build and unit tests,
# and last its end-to-end run in a real window (`npm run e2e`). macOS and
# Windows are checked here as far as a Linux machine allows (tests/cross.sh):
# clippy for their targets, drover.exe built, and run under Wine.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each step's wall time, printed at the end (and on failure): CI's budget is
# 45 minutes, and this says where they go.
step_name='setup (installs)' step_start=$SECONDS timings=()
step_done() { timings+=("$(printf '%6ds  %s' $((SECONDS - step_start)) "$step_name")"); }
step() {
  step_done
  step_name=$* step_start=$SECONDS
  printf '\n==> %s\n' "$*"
}
print_timings() {
  step_done
  printf '\n==> wall time per step (tests/run.sh), %d s in all\n' "$SECONDS"
  printf '%s\n' "${timings[@]}"
}
trap print_timings EXIT
missing() { echo "tests/run.sh: $*" >&2; exit 1; }

command -v cargo >/dev/null || missing "Rust is missing: install it with rustup (https://rustup.rs)"
for tool in sh sleep setsid; do command -v "$tool" >/dev/null || missing "$tool is missing (the tests' jobs use it)"; done
# Debian packages the tests run: `ensure_deb TOOL PACKAGE WHY`.
apt_updated=
ensure_deb() {
  command -v "$1" >/dev/null && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    step "installing $2 (apt-get install $2)"
    [ -n "$apt_updated" ] || { apt-get update -qq; apt_updated=1; }
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null
  else
    missing "$2 is missing: run 'sudo apt-get install $2' ($3)"
  fi
}
ensure_deb bwrap bubblewrap "the isolation tests sandbox jobs with it"
ensure_deb shellcheck shellcheck "the GitHub tests check the install script with it"
ensure_deb curl curl "the package test asks the installed coordinator's /healthz with it"
ensure_deb openssl openssl "the package test makes a throwaway certificate with it"
ensure_deb systemd-analyze systemd "the package test verifies the package's units with it"
if ! cargo nextest --version >/dev/null 2>&1; then
  step "installing cargo-nextest from crates.io"
  cargo install --locked cargo-nextest
fi

# PostgreSQL: DROVER_TEST_PG_URL, or the machine's cluster (started, or installed).
. tests/postgres.sh
ensure_postgres
# Leftovers of interrupted runs.
psql "$DROVER_TEST_PG_URL" -qtAc "SELECT datname FROM pg_database WHERE datname LIKE 'drover_t_%'" 2>/dev/null \
  | while read -r db; do psql "$DROVER_TEST_PG_URL" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true; done

# The desktop app: WebKitGTK and the rest to build it, Xvfb, a tray host,
# gnome-keyring, xdotool and WebKitWebDriver to drive it; npm packages,
# tauri-driver, and a venv with selenium.
. tests/desktop-deps.sh
ensure_desktop_debs
ensure_node_modules
ensure_tauri_driver
ensure_e2e_venv

# macOS and Windows: Rust targets, zig and cargo-zigbuild, mingw-w64, Wine.
target=${CARGO_TARGET_DIR:-target}
case $target in /*) ;; *) target=$PWD/$target ;; esac
. tests/cross.sh
ensure_cross_tools

# MCP parity (tests/tests/mcp.rs) drives /mcp with an independent client:
# the official Python SDK, pinned, in its own venv. The CI tests
# (tests/tests/ci.rs) check the rendered workflow against GitHub's published
# schema with check-jsonschema, pinned, in the same venv. The conformance
# test (tests/tests/conformance.rs) runs Schemathesis, pinned, from it too.
mcp_venv=${CARGO_TARGET_DIR:-target}/mcp-venv
if ! "$mcp_venv/bin/python" -c 'import mcp, check_jsonschema, schemathesis' 2>/dev/null; then
  step "creating a Python venv with the MCP client (mcp), check-jsonschema and schemathesis from PyPI in $mcp_venv"
  python3 -m venv "$mcp_venv" \
    || missing "python3 cannot create a venv: run 'sudo apt-get install python3-venv'"
  "$mcp_venv/bin/pip" install -q --disable-pip-version-check 'mcp==2.3.0' 'check-jsonschema==0.39.0' 'schemathesis==4.32.5'
fi
case $mcp_venv in /*) ;; *) mcp_venv=$PWD/$mcp_venv ;; esac
export DROVER_MCP_PYTHON=$mcp_venv/bin/python
export DROVER_CHECK_JSONSCHEMA=$mcp_venv/bin/check-jsonschema
export DROVER_SCHEMATHESIS=$mcp_venv/bin/schemathesis

# The desktop crate embeds src-ui/dist at compile time: build it first.
ensure_ui_built
step "format"
cargo fmt --all -- --check
# From here on our own crates are compiled by clippy-driver with warnings
# denied (tests/lint-rustc): the builds below, of every target kind the
# workspace has (libraries, binaries, build scripts and tests), are the lint.
clippy_driver=$(rustup which clippy-driver 2>/dev/null || command -v clippy-driver) \
  || missing "clippy is missing: run 'rustup component add clippy'"
export DROVER_CLIPPY_DRIVER=$clippy_driver RUSTC_WORKSPACE_WRAPPER=$PWD/tests/lint-rustc
# The desktop app's shell (drover-desktop: the tauri, GTK and WebKit tree) is
# built once, by `npm run e2e` at the end, as a user bundles it; everything it
# decides with is drover-desktop-core, built and tested here.
step "build the binaries the end-to-end tests run (clippy, warnings denied)"
cargo build --workspace --exclude drover-desktop --bins
# The HTTPS tests (tests/tests/tls.rs) run the CLI as a user builds it, on its
# own: a feature only the workspace build enables (TLS, once) cannot hide.
# The shared target dir keeps both builds of a dependency whose features differ.
step "install the CLI as a user does (cargo install --path runner-core/cli)"
cargo install --quiet --locked --force --debug --path runner-core/cli \
  --root "$target/installed" --target-dir "$target"
export DROVER_INSTALLED_CLI=$target/installed/bin/drover
# macOS and Windows (tests/cross.sh); exports what tests/tests/windows.rs needs.
cross_checks
step "front-end unit tests (npm test)"
npm test
step "tests on SQLite (and drover.exe under Wine)"
# A test whose name ends in _on_postgres or _on_sqlite runs only in that pass;
# drover.exe under Wine (tests/tests/windows.rs) runs in this one.
DROVER_TEST_DATABASE=sqlite cargo nextest run --workspace --exclude drover-desktop --no-fail-fast \
  -E 'not test(/^replicas::/) & not test(/_on_postgres$/)'
step "tests on PostgreSQL (the store's own tests too, and the schema check), and several replicas sharing it"
DROVER_TEST_DATABASE=postgres cargo nextest run --workspace --exclude drover-desktop --no-fail-fast \
  -E '(package(drover-tests) | (package(drover-coordinator) & test(/^store::/))) & not test(/_on_sqlite$/) & not test(/^windows::/)'
step "the server package: built, installed (dpkg -i), its units verified, run, purged (tests/package.sh)"
tests/package.sh "${CARGO_TARGET_DIR:-target}/debug"
step "desktop app end to end, in a real window (npm run e2e)"
npm run e2e
