//! The install script for a build server: a GitHub Actions runner and a
//! Drover runner on the same workspace pool, each a systemd service. And the
//! workflow hint that targets them.

use std::fmt::Write as _;

/// The actions/runner release the script installs, and its SHA-256 as
/// GitHub publishes it (the runner updates itself from there).
pub const RUNNER_VERSION: &str = "2.319.1";
pub const RUNNER_SHA256_X64: &str =
    "3f6efb7488a183e291fc2c62876e14c9ee732864173734facc85a1bfb1744464";

/// What goes into one script. Every field is checked before it gets here
/// and quoted again on the way in.
pub struct Install<'a> {
    pub coordinator_url: &'a str,
    pub runner_id: &'a str,
    pub runner_token: &'a str,
    pub pool_id: &'a str,
    pub pool_name: &'a str,
    pub github_url: &'a str,
    pub registration_token: &'a str,
    pub github_name: &'a str,
    pub labels: &'a [String],
    pub runner_group: Option<&'a str>,
    pub ephemeral: bool,
}

/// `s` as one single-quoted shell word.
pub fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The GitHub runner's label for a pool: `drover-<pool id>`.
pub fn pool_label(pool_id: &str) -> String {
    format!("drover-{pool_id}")
}

/// `runs-on` and the job's `runtime` as workflow YAML.
pub fn workflow_hint_yaml(pool_id: &str) -> String {
    format!(
        "runs-on: [self-hosted, {label}]\n# and, for the Drover job it submits:\n#   drover submit --runtime self:ws:{pool_id} --wait -- …\n",
        label = pool_label(pool_id)
    )
}

const BODY: &str = r#"
say() { printf 'drover-install: %s\n' "$*"; }
die() { say "$*" >&2; exit 1; }
dry() { [ -n "${DROVER_DRY_RUN:-}" ]; }
# DROVER_DRY_RUN=1: print each change instead of making it.
run() {
    if dry; then
        printf '+'; printf ' %s' "$@"; printf '\n'
    else
        "$@"
    fi
}
# run_in DIR COMMAND...: COMMAND in DIR.
run_in() {
    dir=$1; shift
    if dry; then
        printf '+ (cd %s &&' "$dir"; printf ' %s' "$@"; printf ')\n'
    else
        (cd "$dir" && "$@")
    fi
}
need() {
    command -v "$1" >/dev/null 2>&1 && return 0
    if dry; then say "(dry run) $1 is not installed here"; else die "$1 is needed; install it first"; fi
}

[ "$(uname -s)" = Linux ] || die "this script sets up a Linux build server"
case "$(uname -m)" in
    x86_64 | amd64) ;;
    *) die "actions/runner $RUNNER_VERSION is pinned for x86_64 here; on $(uname -m), install it by hand" ;;
esac
if ! dry && [ "$(id -u)" -ne 0 ]; then
    die "run it as root: it creates the $SERVICE_USER user and two systemd services"
fi
for tool in curl tar sha256sum systemctl runuser useradd; do need "$tool"; done
DROVER_BIN=${DROVER_BIN:-$(command -v drover || true)}
[ -n "$DROVER_BIN" ] || die "drover is not on PATH: install it (cargo install --path runner-core), or set DROVER_BIN"

# 1. A system user for both services.
if ! id -u "$SERVICE_USER" >/dev/null 2>&1; then
    run useradd --system --home-dir "$BASE" --shell /usr/sbin/nologin "$SERVICE_USER"
fi
run install -d -o "$SERVICE_USER" -m 0750 "$BASE" "$RUNNER_DIR" "$BASE/state"

# 2. actions/runner, downloaded once and checked against its SHA-256.
if [ ! -x "$RUNNER_DIR/config.sh" ]; then
    tarball="actions-runner-linux-x64-$RUNNER_VERSION.tar.gz"
    if dry; then tmp=/tmp/drover-install.dry-run; else tmp=$(mktemp -d); fi
    run curl -fsSL -o "$tmp/$tarball" "https://github.com/actions/runner/releases/download/v$RUNNER_VERSION/$tarball"
    if ! dry; then
        printf '%s  %s\n' "$RUNNER_SHA256" "$tmp/$tarball" | sha256sum -c - >/dev/null ||
            die "the actions/runner download does not match its SHA-256; not installing it"
    fi
    run tar -xzf "$tmp/$tarball" -C "$RUNNER_DIR"
    run chown -R "$SERVICE_USER" "$RUNNER_DIR"
    run rm -rf "$tmp"
    run "$RUNNER_DIR/bin/installdependencies.sh"
fi

# 3. Registered with GitHub once: a second run keeps the registration.
if [ -f "$RUNNER_DIR/.runner" ]; then
    say "the GitHub runner is already registered; keeping it"
else
    set -- --url "$GH_URL" --token "$GH_TOKEN" --labels "$GH_LABELS"
    if [ -n "$GH_GROUP" ]; then set -- "$@" --runnergroup "$GH_GROUP"; fi
    if [ -n "$GH_EPHEMERAL" ]; then set -- "$@" --ephemeral; fi
    set -- "$@" --unattended --name "$GH_NAME"
    run_in "$RUNNER_DIR" runuser -u "$SERVICE_USER" -- ./config.sh "$@"
fi

# 4. The GitHub runner as a systemd service (its own svc.sh).
if [ ! -f "$RUNNER_DIR/.service" ]; then
    run_in "$RUNNER_DIR" ./svc.sh install "$SERVICE_USER"
fi
run_in "$RUNNER_DIR" ./svc.sh start

# 5. The Drover runner: its token in a file only the service user reads,
#    and a unit that restarts it and starts it at boot.
token_file="$BASE/drover-runner.token"
unit=/etc/systemd/system/drover-runner.service
if dry; then
    say "(dry run) would write $token_file (mode 0600) and $unit"
else
    (umask 077 && printf '%s\n' "$DROVER_RUNNER_TOKEN" >"$token_file.new")
    chown "$SERVICE_USER" "$token_file.new"
    mv "$token_file.new" "$token_file"
    cat >"$unit" <<UNIT
[Unit]
Description=Drover runner $DROVER_RUNNER_ID (pool $DROVER_POOL)
Wants=network-online.target
After=network-online.target

[Service]
User=$SERVICE_USER
Environment=DROVER_URL=$DROVER_URL
ExecStart=$DROVER_BIN runner --token-file $token_file --state-dir $BASE/state
Restart=always
RestartSec=5

[Install]
WantedBy=multi-user.target
UNIT
fi
run systemctl daemon-reload
run systemctl enable --now drover-runner.service
say "done: GitHub runner $GH_NAME and Drover runner $DROVER_RUNNER_ID serve pool $DROVER_POOL"
"#;

/// The script, as POSIX shell.
pub fn render(i: &Install<'_>) -> String {
    let labels = i.labels.join(",");
    let mut s = String::from("#!/bin/sh\n");
    let _ = write!(
        s,
        "# Drover: sets up this Linux build server with a GitHub Actions runner\n\
         # ({github_name}) and a Drover runner ({runner_id}) on pool {pool_name}, each a\n\
         # systemd service that starts at boot. Run it as root. Running it twice\n\
         # does no harm. It holds two secrets (a GitHub registration token, good\n\
         # for an hour, and the Drover runner's token): keep it private, and\n\
         # delete it when done. DROVER_DRY_RUN=1 shows what it would change.\n\
         set -eu\n\n",
        github_name = i.github_name,
        runner_id = i.runner_id,
        pool_name = i.pool_name,
    );
    let vars: [(&str, &str); 11] = [
        ("DROVER_URL", i.coordinator_url),
        ("DROVER_RUNNER_ID", i.runner_id),
        ("DROVER_RUNNER_TOKEN", i.runner_token),
        ("DROVER_POOL", i.pool_id),
        ("GH_URL", i.github_url),
        ("GH_TOKEN", i.registration_token),
        ("GH_NAME", i.github_name),
        ("GH_LABELS", &labels),
        ("GH_GROUP", i.runner_group.unwrap_or("")),
        ("GH_EPHEMERAL", if i.ephemeral { "1" } else { "" }),
        ("RUNNER_VERSION", RUNNER_VERSION),
    ];
    for (name, value) in vars {
        let _ = writeln!(s, "{name}={}", sh_quote(value));
    }
    let _ = writeln!(s, "RUNNER_SHA256={}", sh_quote(RUNNER_SHA256_X64));
    s.push_str("SERVICE_USER=drover\nBASE=/opt/drover\nRUNNER_DIR=\"$BASE/actions-runner\"\n");
    s.push_str(BODY);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_survives_quotes() {
        assert_eq!(sh_quote("a'b"), r"'a'\''b'");
        assert_eq!(sh_quote(""), "''");
    }
}
