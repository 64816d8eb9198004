#!/usr/bin/env bash
# `npm run e2e`: the desktop app end to end in a real window (Xvfb, a tray
# host, gnome-keyring, a real coordinator over HTTPS with a throwaway CA,
# tauri-driver + WebKitWebDriver). The app is the debug binary as
# `npm run bundle -- --debug` builds it (the desktop crate alone, so no
# feature that only the workspace build enables can hide; the release bundle
# is the same build at another optimisation level); the CLI and the
# coordinator are built by cargo. Runs desktop/e2e/e2e.py, and on success
# copies its screenshots into docs/.
#   DROVER_E2E_OUT=DIR  where the run's screenshots, memory.txt and logs go
#                       (default $CARGO_TARGET_DIR/e2e, else target/e2e)
#   DROVER_E2E_KEEP=1   keep the throwaway home of a failed run
#   DROVER_E2E_APP=PATH another build of the app, e.g. target/release/drover-desktop
#                       after `npm run bundle` (skips the debug bundle)
set -euo pipefail
cd "$(dirname "$0")/../.."

step() { printf '\n==> %s\n' "$*"; }
missing() { echo "desktop/e2e/run.sh: $*" >&2; exit 1; }

target=${CARGO_TARGET_DIR:-target}
. tests/desktop-deps.sh
ensure_desktop_debs
ensure_node_modules
ensure_tauri_driver
ensure_e2e_venv

ensure_ui_built
if [ -z "${DROVER_E2E_APP:-}" ]; then
  step "the app and its .deb, as a user builds them but unoptimised (npm run bundle -- --debug: the desktop crate alone)"
  npm run bundle -- --debug
fi
app=${DROVER_E2E_APP:-$target/debug/drover-desktop}
# The CLI, the coordinator and the fake GitHub, built as tests/run.sh builds
# them (the whole workspace: a subset would unify other features and build
# every shared dependency again).
step "the CLI, the coordinator and the fake GitHub (cargo build --workspace --exclude drover-desktop --bins)"
cargo build --workspace --exclude drover-desktop --bins

out=${DROVER_E2E_OUT:-$target/e2e}
rm -rf "$out"
mkdir -p "$out"
step "desktop end to end (logs in $out/logs)"
"$E2E_PYTHON" desktop/e2e/e2e.py --bin "$target/debug" --app "$app" --out "$out" ${DROVER_E2E_KEEP:+--keep}
mkdir -p docs
cp "$out"/desktop-*.png docs/
echo "screenshots copied to docs/: $(cd "$out" && echo desktop-*.png); memory figures in $out/memory.txt"
