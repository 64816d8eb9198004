# shellcheck shell=bash
# Sourced by tests/run.sh (which defines `step`, `missing` and `ensure_deb`).
# macOS and Windows, checked on this Linux machine (README: Platforms).
#
# ensure_cross_tools: the Rust targets (rustup target add), zig and
#   cargo-zigbuild from PyPI in a venv ($target/cross-venv), and mingw-w64
#   and Wine from Debian.
# cross_checks: clippy, warnings denied, of runner-core and the CLI (all
#   their targets) and of the desktop app (library and binary) for
#   aarch64-apple-darwin and x86_64-apple-darwin (both in one cargo run)
#   with zig as the C compiler, and for x86_64-pc-windows-gnu with
#   mingw-w64, where runner-core and the CLI are built (drover.exe) under
#   tests/run.sh's linting wrapper rather than checked and then built;
#   runner-core's own tests run under Wine. It exports
#   DROVER_WINDOWS_CLI and WINEPREFIX for tests/tests/windows.rs (drover.exe
#   under Wine against a coordinator here), which the SQLite pass runs.

apple_targets=(aarch64-apple-darwin x86_64-apple-darwin)
windows_target=x86_64-pc-windows-gnu

ensure_cross_tools() {
  command -v rustup >/dev/null \
    || missing "rustup is missing: the macOS and Windows checks add Rust targets with it (https://rustup.rs)"
  local installed t
  installed=$(rustup target list --installed)
  for t in "${apple_targets[@]}" "$windows_target"; do
    if ! grep -qx "$t" <<<"$installed"; then
      step "adding the Rust target $t (rustup target add $t)"
      rustup target add "$t"
    fi
  done
  ensure_deb x86_64-w64-mingw32-gcc gcc-mingw-w64-x86-64 "drover.exe is linked with it"
  # Debian's wine, which brings wine64 (no i386 architecture here).
  ensure_deb wine wine "runner-core's tests and drover.exe run under it"
  # shellcheck disable=SC2154 # target: tests/run.sh sets it first
  cross_venv=$target/cross-venv
  if ! "$cross_venv/bin/cargo-zigbuild" --version >/dev/null 2>&1 \
    || ! "$cross_venv/bin/python" -m ziglang version >/dev/null 2>&1; then
    step "creating a venv with zig (ziglang) and cargo-zigbuild from PyPI in $cross_venv"
    python3 -m venv "$cross_venv" \
      || missing "python3 cannot create a venv: run 'sudo apt-get install python3-venv'"
    "$cross_venv/bin/pip" install -q --disable-pip-version-check 'ziglang==0.17.1' 'cargo-zigbuild==0.24.1'
  fi
}

# A Wine prefix of our own, with the ProcessPrng shim (tests/wine/) that
# Wine 8.0 lacks and Rust's std needs.
wine_prefix() {
  export WINEPREFIX=$target/wine WINEDEBUG=-all
  if [ ! -e "$WINEPREFIX/system.reg" ]; then
    step "making a Wine prefix in $WINEPREFIX (wineboot)"
    wineboot -i >/dev/null 2>&1 || missing "wineboot could not make a Wine prefix in $WINEPREFIX"
  fi
  local dll=$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll
  if [ ! -e "$dll" ] || [ tests/wine/bcryptprimitives.c -nt "$dll" ]; then
    x86_64-w64-mingw32-gcc -O2 -shared -o "$dll" \
      tests/wine/bcryptprimitives.c tests/wine/bcryptprimitives.def -lbcrypt
  fi
}

cross_checks() {
  local t apple=()
  for t in "${apple_targets[@]}"; do apple+=(--target "$t"); done
  step "macOS (${apple_targets[*]}): clippy of runner-core, the CLI and the desktop app, zig as the C compiler"
  PATH=$cross_venv/bin:$PATH cargo-zigbuild clippy --quiet "${apple[@]}" \
    -p runner-core -p drover --all-targets -- -D warnings
  PATH=$cross_venv/bin:$PATH cargo-zigbuild clippy --quiet "${apple[@]}" \
    -p drover-desktop --lib --bins -- -D warnings
  export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_LINKER=x86_64-w64-mingw32-gcc
  # tests/run.sh's RUSTC_WORKSPACE_WRAPPER makes this build the lint of
  # runner-core and the CLI (all their targets); the desktop is checked.
  step "Windows ($windows_target): runner-core and the CLI built (drover.exe) and linted, the desktop app checked with clippy (mingw-w64)"
  cargo build --quiet --target "$windows_target" -p runner-core -p drover --all-targets
  cargo clippy --quiet --target "$windows_target" -p drover-desktop --lib --bins -- -D warnings
  export DROVER_WINDOWS_CLI=$target/$windows_target/debug/drover.exe
  step "Windows: runner-core's own tests, under Wine"
  wine_prefix
  CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER=wine cargo test --quiet --target "$windows_target" -p runner-core
}
