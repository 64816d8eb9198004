# Sourced by tests/run.sh (which defines `step` and `missing`).
# What the desktop app (desktop/, src-ui/) needs to build and to be tested:
# ensure_desktop_debs: WebKitGTK and friends to build it; Xvfb, dbus,
#   gnome-keyring, a tray host, xdotool, ImageMagick and WebKitWebDriver to
#   drive it. Installed with apt when missing and root, else we stop and name them.
# ensure_node_modules: `npm ci` when node_modules is missing or older than
#   package-lock.json.
# ensure_ui_built: `npm run build:ui` when src-ui/dist is missing or older
#   than its sources (the desktop crate embeds it at compile time, so a
#   needless rebuild would recompile the crate).
# ensure_tauri_driver: `cargo install tauri-driver --locked` when missing.
# ensure_e2e_venv: a Python venv with selenium (the WebDriver client) and
# dbus-next (the e2e's StatusNotifierWatcher) in
#   target/e2e-venv; exports E2E_PYTHON.

# Debian package, and a file or command that shows it is installed.
desktop_debs=(
  "build-essential:/usr/bin/make"
  "pkg-config:/usr/bin/pkg-config"
  "libwebkit2gtk-4.1-dev:/usr/lib/x86_64-linux-gnu/pkgconfig/webkit2gtk-4.1.pc"
  "libayatana-appindicator3-dev:/usr/lib/x86_64-linux-gnu/pkgconfig/ayatana-appindicator3-0.1.pc"
  "librsvg2-dev:/usr/lib/x86_64-linux-gnu/pkgconfig/librsvg-2.0.pc"
  "libdbus-1-dev:/usr/lib/x86_64-linux-gnu/pkgconfig/dbus-1.pc"
  "xvfb:/usr/bin/Xvfb"
  "webkit2gtk-driver:/usr/bin/WebKitWebDriver"
  "gnome-keyring:/usr/bin/gnome-keyring-daemon"
  "libsecret-tools:/usr/bin/secret-tool"
  "dbus:/usr/bin/dbus-daemon"
  "dbus-x11:/usr/bin/dbus-launch"
  "xdotool:/usr/bin/xdotool"
  "trayer:/usr/bin/trayer"
  "imagemagick:/usr/bin/import"
  "x11-utils:/usr/bin/xwininfo"
  "libglib2.0-bin:/usr/bin/gdbus"
)

ensure_desktop_debs() {
  local want=() entry pkg file
  for entry in "${desktop_debs[@]}"; do
    pkg=${entry%%:*} file=${entry#*:}
    # Package lookups by dpkg name; the file check catches other arches.
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed'; then
      [ -e "$file" ] || want+=("$pkg")
    fi
  done
  [ ${#want[@]} = 0 ] && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    step "installing the desktop app's build and test packages (apt-get install ${want[*]})"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${want[@]}" >/dev/null
  else
    missing "the desktop app's build and test packages are missing: run 'sudo apt-get install ${want[*]}'"
  fi
}

ensure_node_modules() {
  command -v node >/dev/null && command -v npm >/dev/null \
    || missing "Node.js and npm are missing (the desktop app's front end builds with them): install Node.js 20 or later, e.g. 'sudo apt-get install nodejs npm'"
  # npm ci writes node_modules/.package-lock.json; older than the lock = stale.
  if [ ! -e node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    step "installing the front end's npm packages (npm ci)"
    npm ci --no-audit --no-fund
  fi
}

ensure_ui_built() {
  if [ ! -e src-ui/dist/index.html ] \
    || [ -n "$(find src-ui package.json package-lock.json \( -path src-ui/dist -o -path src-ui/test -o -name node_modules \) -prune \
                -o -type f -newer src-ui/dist/index.html -print -quit)" ]; then
    step "front end: type-check and build (npm run build:ui)"
    npm run build:ui
  fi
}

ensure_tauri_driver() {
  if ! command -v tauri-driver >/dev/null; then
    step "installing tauri-driver from crates.io"
    cargo install --locked tauri-driver
  fi
}

ensure_e2e_venv() {
  local venv=${CARGO_TARGET_DIR:-target}/e2e-venv
  command -v python3 >/dev/null || missing "python3 is missing (the desktop end-to-end test's WebDriver client runs on it): run 'sudo apt-get install python3 python3-venv'"
  if ! "$venv/bin/python" -c 'import selenium, dbus_next' 2>/dev/null; then
    step "creating a Python venv with selenium and dbus-next (a StatusNotifierWatcher) in $venv"
    python3 -m venv "$venv" \
      || missing "python3 cannot create a venv: run 'sudo apt-get install python3-venv'"
    "$venv/bin/pip" install -q --disable-pip-version-check 'selenium>=4,<5' 'dbus-next==0.2.3'
  fi
  export E2E_PYTHON=$venv/bin/python
}
