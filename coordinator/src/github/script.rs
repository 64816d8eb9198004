//! The install script for a build server: a GitHub Actions runner and a
//! Drover runner on the same workspace pool, each a systemd service. And the
//! workflow hint that targets them.
//!
//! Neither worker reaches the other's credentials: the Actions runner runs
//! as `drover-actions`, its files in its own 0700 directory; the Drover
//! runner runs as root (so that it may switch users) with `--sandbox bwrap
//! --job-user drover-job`, its token a 0600 file in a 0700 directory of
//! root's, hidden from its jobs, which run as `drover-job`.

use std::fmt::Write as _;

/// The actions/runner release the script installs, and its SHA-256 as
/// GitHub publishes it (the runner updates itself from there).
pub use drover_wire::github::{
    ACTIONS_RUNNER_SHA256_LINUX_X64 as RUNNER_SHA256_X64, ACTIONS_RUNNER_VERSION as RUNNER_VERSION,
};

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
# need TOOL [PACKAGE]
need() {
    command -v "$1" >/dev/null 2>&1 && return 0
    if dry; then say "(dry run) $1 is not installed here"; else die "$1 is needed; install it first${2:+ (Debian/Ubuntu: apt-get install $2)}"; fi
}

[ "$(uname -s)" = Linux ] || die "this script sets up a Linux build server"
case "$(uname -m)" in
    x86_64 | amd64) ;;
    *) die "actions/runner $RUNNER_VERSION is pinned for x86_64 here; on $(uname -m), install it by hand" ;;
esac
if ! dry && [ "$(id -u)" -ne 0 ]; then
    die "run it as root: it creates the users $ACTIONS_USER and $JOB_USER and two systemd services"
fi
for tool in curl tar sha256sum systemctl runuser useradd; do need "$tool"; done
need bwrap bubblewrap
DROVER_BIN=${DROVER_BIN:-$(command -v drover || true)}
[ -n "$DROVER_BIN" ] || die "drover is not on PATH: install it (cargo install --path runner-core/cli), or set DROVER_BIN"

# 1. Three users, so that neither worker reaches the other's credentials:
#    - $ACTIONS_USER runs the GitHub Actions runner and its workflow jobs;
#    - root runs the Drover runner (root, so that it may run each job as
#      another user), whose jobs run as $JOB_USER in a bubblewrap sandbox.
for user in "$ACTIONS_USER" "$JOB_USER"; do
    if ! id -u "$user" >/dev/null 2>&1; then
        if [ "$user" = "$ACTIONS_USER" ]; then home=$RUNNER_DIR; else home=/nonexistent; fi
        run useradd --system --no-create-home --home-dir "$home" --shell /usr/sbin/nologin "$user"
    fi
done
# Each worker's directory is its own, 0700; the base only lets them through.
run install -d -o root -m 0755 "$BASE"
run install -d -o "$ACTIONS_USER" -m 0700 "$RUNNER_DIR"
run install -d -o root -m 0700 "$DROVER_DIR"
# What an older version of this script left: one user for both workers,
# and the Drover runner's token where that user could read it.
for old in "$BASE/drover-runner.token" "$BASE/state"; do
    if [ -e "$old" ]; then run rm -rf "$old"; fi
done

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
    run rm -rf "$tmp"
    run "$RUNNER_DIR/bin/installdependencies.sh"
fi
run chown -R "$ACTIONS_USER" "$RUNNER_DIR"

# 3. Registered with GitHub once: a second run keeps the registration.
if [ -f "$RUNNER_DIR/.runner" ]; then
    say "the GitHub runner is already registered; keeping it"
else
    set -- --url "$GH_URL" --token "$GH_TOKEN" --labels "$GH_LABELS"
    if [ -n "$GH_GROUP" ]; then set -- "$@" --runnergroup "$GH_GROUP"; fi
    if [ -n "$GH_EPHEMERAL" ]; then set -- "$@" --ephemeral; fi
    set -- "$@" --unattended --name "$GH_NAME"
    run_in "$RUNNER_DIR" runuser -u "$ACTIONS_USER" -- ./config.sh "$@"
fi
# Its credentials: 0600, its user's, in its 0700 directory.
for f in .runner .credentials .credentials_rsaparams; do
    if dry || [ -f "$RUNNER_DIR/$f" ]; then
        run chown "$ACTIONS_USER" "$RUNNER_DIR/$f"
        run chmod 0600 "$RUNNER_DIR/$f"
    fi
done

# 4. The GitHub runner as a systemd service (its own svc.sh), as
#    $ACTIONS_USER; a service an older version installed as another user
#    is installed again.
if [ -f "$RUNNER_DIR/.service" ] &&
    ! grep -qx "User=$ACTIONS_USER" "/etc/systemd/system/$(cat "$RUNNER_DIR/.service")" 2>/dev/null; then
    run_in "$RUNNER_DIR" ./svc.sh stop
    run_in "$RUNNER_DIR" ./svc.sh uninstall
fi
if [ ! -f "$RUNNER_DIR/.service" ] || dry; then
    run_in "$RUNNER_DIR" ./svc.sh install "$ACTIONS_USER"
fi
run_in "$RUNNER_DIR" ./svc.sh start

# 5. The Drover runner: its token 0600 root's in $DROVER_DIR, its state
#    directory (0700 root's, and hidden from its jobs by bubblewrap); jobs
#    run as $JOB_USER; its work directory is in a /tmp of its own, which no
#    workflow job can reach. Restarted, and started at boot.
if ! dry && ! runuser -u "$JOB_USER" -- bwrap --ro-bind / / --unshare-pid --die-with-parent true; then
    die "bubblewrap cannot make its sandbox here as $JOB_USER (are unprivileged user namespaces allowed? sysctl kernel.unprivileged_userns_clone, or an AppArmor profile for bwrap)"
fi
token_file="$DROVER_DIR/token"
unit=/etc/systemd/system/drover-runner.service
write_unit() {
    cat <<UNIT
[Unit]
Description=Drover runner $DROVER_RUNNER_ID (pool $DROVER_POOL)
Wants=network-online.target
After=network-online.target

[Service]
User=root
Environment=DROVER_URL=$DROVER_URL
ExecStart=$DROVER_BIN runner --token-file $token_file --state-dir $DROVER_DIR --sandbox bwrap --job-user $JOB_USER
PrivateTmp=yes
Restart=always
RestartSec=5

[Install]
WantedBy=multi-user.target
UNIT
}
if dry; then
    say "(dry run) would write $token_file (mode 0600, owner root) and $unit:"
    write_unit
else
    (umask 077 && printf '%s\n' "$DROVER_RUNNER_TOKEN" >"$token_file.new")
    chown root "$token_file.new"
    chmod 0600 "$token_file.new"
    mv "$token_file.new" "$token_file"
    write_unit >"$unit"
fi
run systemctl daemon-reload
run systemctl enable drover-runner.service
run systemctl restart drover-runner.service
say "done: GitHub runner $GH_NAME (user $ACTIONS_USER) and Drover runner $DROVER_RUNNER_ID (jobs as $JOB_USER, sandboxed) serve pool $DROVER_POOL"
"#;

/// The script, as POSIX shell.
pub fn render(i: &Install<'_>) -> String {
    let labels = i.labels.join(",");
    let mut s = String::from("#!/bin/sh\n");
    let _ = write!(
        s,
        "# Drover: sets up this Linux build server with a GitHub Actions runner\n\
         # ({github_name}) and a Drover runner ({runner_id}) on pool {pool_name}, each a\n\
         # systemd service that starts at boot: the Actions runner as the user\n\
         # drover-actions, the Drover runner's jobs as drover-job in a bubblewrap\n\
         # sandbox. Run it as root. Running it twice does no harm. It holds two secrets (a GitHub registration token, good\n\
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
    s.push_str(
        "ACTIONS_USER=drover-actions\nJOB_USER=drover-job\nBASE=/opt/drover\n\
         RUNNER_DIR=\"$BASE/actions-runner\"\nDROVER_DIR=\"$BASE/drover-runner\"\n",
    );
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
