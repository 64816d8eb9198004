#!/usr/bin/env bash
# tests/package.sh [BIN_DIR]: the server package, installed for real on this
# machine, then purged. tests/run.sh runs it; it runs alone too (as root).
#
# It builds drover-server's .deb from the binaries in BIN_DIR (default
# target/debug) with coordinator/packaging/build-deb.sh, installs it with
# dpkg -i, checks the units with systemd-analyze (verify must print nothing;
# the coordinator's exposure must stay at most 2.0), the files' owners and
# modes, then walks the README's "A server, from the package" steps: a certificate for the
# coordinator, its env file, the coordinator started as its unit starts it
# (no systemd runs here: its user, env files and ExecStart, read from the
# installed unit), /healthz, drover-admin bootstrap, a runner started as
# drover-runner@build1 starts it (join token file, env file) whose job runs
# as drover-job, drover pair-link and a redeem. Last dpkg -r, then
# dpkg --purge: nothing of the package stays.
set -euo pipefail
cd "$(dirname "$0")/.."

missing() { echo "tests/package.sh: $*" >&2; exit 1; }
fail() { echo "tests/package.sh: FAILED: $*" >&2; exit 1; }
step() { printf '  - %s\n' "$*"; }

bin_dir=${1:-${CARGO_TARGET_DIR:-target}/debug}
[ "$(id -u)" = 0 ] ||
  missing "it installs a package (dpkg -i) and adds users: run it as root (CI does), or skip it"
for tool in dpkg dpkg-deb systemd-analyze setpriv runuser curl openssl bwrap; do
  command -v "$tool" >/dev/null || missing "$tool is missing (Debian: apt-get install ${tool/bwrap/bubblewrap})"
done
# It purges what it installs: never on a machine that has the package.
if dpkg-query -W -f='${Status}' drover-server 2>/dev/null | grep -q installed; then
  missing "drover-server is installed here; this test would purge it (and its data)"
fi
for path in /etc/drover /var/lib/drover /var/lib/drover-runner; do
  [ ! -e "$path" ] || missing "$path exists; this test would remove it"
done
for user in drover drover-job; do
  if getent passwd "$user" >/dev/null; then missing "a user $user exists; this test would remove it"; fi
done
# The installed programs, not another build on PATH.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin

scratch=$(mktemp -d)
# The runner's PrivateTmp=: a /tmp of its own, 1777 like any /tmp.
private_tmp=$(mktemp -d)
chmod 1777 "$private_tmp"
pids=()
cleanup() {
  local rc=$?
  for pid in "${pids[@]}"; do
    kill -KILL "$pid" 2>/dev/null || true
    { wait "$pid"; } 2>/dev/null || true
  done
  if dpkg-query -W -f='${Status}' drover-server 2>/dev/null | grep -q installed; then
    dpkg --purge drover-server >/dev/null 2>&1 || true
  fi
  if [ "$rc" != 0 ]; then
    for log in "$scratch"/*.log; do
      [ -e "$log" ] && { echo "--- $log"; tail -n 40 "$log"; }
    done
  fi
  rm -rf "$scratch" "$private_tmp"
  # Nothing of it was here before (checked above).
  rm -rf /etc/drover /var/lib/drover /var/lib/drover-runner
}
trap cleanup EXIT

# `expect_mode PATH OWNER:GROUP MODE`
expect_mode() {
  local got
  got=$(stat -c '%U:%G %a' "$1") || fail "$1 is missing"
  [ "$got" = "$2 $3" ] || fail "$1 is $got, not $2 $3"
}
# `unit_values UNIT KEY`: the values of KEY= in UNIT, one a line.
unit_values() { sed -n "s/^$2=//p" "$1"; }
# `wait_for WHAT COMMAND…`: COMMAND succeeds within 30 s.
wait_for() {
  local what=$1 deadline=$((SECONDS + 30))
  shift
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$deadline" ] || fail "no $what within 30 s"
    sleep 0.1
  done
}

step "build the package from $bin_dir"
deb=$(coordinator/packaging/build-deb.sh "$bin_dir")

step "dpkg -i $(basename "$deb")"
dpkg -i "$deb" >"$scratch/dpkg.log" 2>&1 || fail "dpkg -i: $(cat "$scratch/dpkg.log")"
coord_unit=/lib/systemd/system/drover-coordinator.service
runner_unit=/lib/systemd/system/drover-runner@.service

step "systemd-analyze verify, security"
out=$(systemd-analyze verify "$coord_unit" "$runner_unit" 2>&1) || fail "systemd-analyze verify: $out"
[ -z "$out" ] || fail "systemd-analyze verify warns: $out"
systemd-analyze security --offline=yes --threshold=20 "$coord_unit" >"$scratch/security.txt" 2>&1 ||
  fail "drover-coordinator.service is exposed more than 2.0: $(tail -n 1 "$scratch/security.txt")"

step "owners and modes, users, conffiles"
expect_mode /usr/bin/drover-coordinator root:root 755
expect_mode /usr/bin/drover root:root 755
expect_mode /usr/sbin/drover-admin root:root 755
expect_mode "$coord_unit" root:root 644
expect_mode "$runner_unit" root:root 644
expect_mode /etc/drover root:root 755
expect_mode /etc/drover/coordinator.env root:root 644
expect_mode /etc/drover/runner.env root:root 644
expect_mode /etc/drover/secrets.env root:drover 640
expect_mode /var/lib/drover drover:drover 700
IFS=: read -r _ _ uid _ _ _ shell < <(getent passwd drover)
if [ "$uid" -ge 1000 ] || [ "$shell" != /usr/sbin/nologin ]; then
  fail "drover is not a system user without a shell (uid $uid, shell $shell)"
fi
getent passwd drover-job >/dev/null || fail "no user drover-job"
conffiles=$(dpkg-query -W -f='${Conffiles}' drover-server)
for f in /etc/drover/coordinator.env /etc/drover/runner.env; do
  grep -q " $f " <<<"$conffiles" || fail "$f is not a conffile: $conffiles"
done

step "the installed binaries run"
version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)
# (Output captured before grep: with pipefail, `grep -q` closing the pipe early
# would fail the writer.)
out=$(drover-coordinator --version)
grep -qF "drover-coordinator $version" <<<"$out" || fail "drover-coordinator --version: $out"
out=$(drover --version)
grep -qF "drover $version" <<<"$out" || fail "drover --version: $out"

# The README's walk-through, as root on the server. A throwaway CA and a
# certificate for 127.0.0.1 stand in for the real ones.
step "a certificate for the coordinator"
(
  cd "$scratch"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
    -subj /CN=test-ca -keyout ca.key -out ca.pem 2>/dev/null
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=127.0.0.1 \
    -keyout privkey.pem -out server.csr 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1\n' >san.ext
  openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 \
    -extfile san.ext -out fullchain.pem 2>/dev/null
  install -d -m 0750 -g drover /etc/drover/tls
  install -m 0640 -g drover fullchain.pem privkey.pem /etc/drover/tls/
)
expect_mode /etc/drover/tls/privkey.pem root:drover 640
runuser -u drover -- cat /etc/drover/tls/privkey.pem >/dev/null || fail "drover cannot read the key"
ca_file=
if grep -q -- --tls-cert <<<"$(drover-coordinator serve --help)"; then
  # The clients' (DROVER_CA_FILE, once the coordinator runs): a private CA.
  ca_file=$scratch/ca.pem
  # Port 0 here, where the README says 0.0.0.0:443.
  printf '%s\n' DROVER_LISTEN=127.0.0.1:0 DROVER_TLS_CERT=/etc/drover/tls/fullchain.pem \
    DROVER_TLS_KEY=/etc/drover/tls/privkey.pem >>/etc/drover/coordinator.env
else
  step "no --tls-cert in this coordinator: over HTTP"
  printf '%s\n' DROVER_LISTEN=127.0.0.1:0 >>/etc/drover/coordinator.env
fi

step "the coordinator, started as its unit starts it"
user=$(unit_values "$coord_unit" User)
read -ra exec_start < <(unit_values "$coord_unit" ExecStart)
(
  cd /
  umask "$(unit_values "$coord_unit" UMask)"
  set -a
  while read -r file; do
    case $file in -*) [ -e "${file#-}" ] || continue ;; esac
    # shellcheck source=/dev/null
    . "${file#-}"
  done < <(unit_values "$coord_unit" EnvironmentFile)
  set +a
  exec setpriv --reuid="$user" --regid="$user" --init-groups -- "${exec_start[@]}"
) >"$scratch/coordinator.log" 2>&1 &
pids+=($!)
coordinator_pid=$!
listening() { grep -q 'listening on https\?://' "$scratch/coordinator.log"; }
wait_for "'listening on' from the coordinator" listening
url=$(sed -n 's/.*listening on \(https\?:\/\/[^ ]*\).*/\1/p' "$scratch/coordinator.log" | head -n 1)
if [ -n "$ca_file" ]; then
  case $url in https://*) ;; *) fail "with DROVER_TLS_CERT/KEY set, the coordinator serves $url" ;; esac
  export DROVER_CA_FILE=$ca_file
fi
curl -fsS ${DROVER_CA_FILE:+--cacert "$DROVER_CA_FILE"} "$url/healthz" >"$scratch/healthz.json" ||
  fail "GET $url/healthz"
expect_mode /var/lib/drover/coordinator.db drover:drover 600
expect_mode /var/lib/drover/coordinator.key drover:drover 600

step "drover-admin bootstrap"
if [ "$(command -v drover-admin)" != /usr/sbin/drover-admin ] || [ "$(command -v drover)" != /usr/bin/drover ]; then
  fail "drover-admin or drover is not the installed one"
fi
drover-admin bootstrap --workspace acme --email you@acme.test >"$scratch/bootstrap.out" 2>"$scratch/bootstrap.log"
token=$(sed -n 's/^token: *//p' "$scratch/bootstrap.out")
[ -n "$token" ] || fail "drover-admin bootstrap printed no token"
export DROVER_URL=$url DROVER_TOKEN=$token
out=$(drover whoami)
grep -q you@acme.test <<<"$out" || fail "drover whoami does not name you@acme.test: $out"

step "a runner, started as drover-runner@build1 starts it"
(umask 077; drover runtimes join-token default --workspace > /etc/drover/runner-build1.token) 2>>"$scratch/cli.log"
printf '%s\n' "DROVER_URL=$url" 'DROVER_RUNNER_ARGS="--join self:ws --runners 2"' \
  ${DROVER_CA_FILE:+"DROVER_CA_FILE=$DROVER_CA_FILE"} >/etc/drover/runner-build1.env
expect_mode /etc/drover/runner-build1.token root:root 600
install -d -m 0700 /var/lib/drover-runner/build1 # StateDirectory=
runner_exec=$(unit_values "$runner_unit" ExecStart)
(
  cd /
  # PrivateTmp=: a /tmp of its own (the runner makes its work directory there).
  export TMPDIR=$private_tmp
  set -a
  while read -r file; do
    file=${file//%i/build1}
    case $file in -*) [ -e "${file#-}" ] || continue ;; esac
    # shellcheck source=/dev/null
    . "${file#-}"
  done < <(unit_values "$runner_unit" EnvironmentFile)
  set +a
  # systemd splits $DROVER_RUNNER_ARGS into words, as this eval does.
  eval "set -- ${runner_exec//%i/build1}"
  exec "$@"
) >"$scratch/runner.log" 2>&1 &
pids+=($!)
runner_pid=$!
two_online() { [ "$(drover runners list --json | grep -o '"online": *true' | wc -l)" -ge 2 ]; }
wait_for "two runners online" two_online
drover runners list >>"$scratch/cli.log"
job_user=$(timeout 60 drover submit --runtime self:ws --wait -- id -un 2>"$scratch/submit.log") ||
  fail "the job did not succeed: $job_user"
# The job's id, then its log.
[ "$(tail -n 1 <<<"$job_user")" = drover-job ] || fail "the job ran as $job_user, not drover-job"
# The joined runners' credentials.
find /var/lib/drover-runner/build1 -type f >"$scratch/creds.txt"
[ -s "$scratch/creds.txt" ] || fail "no credentials in /var/lib/drover-runner/build1"
while read -r f; do expect_mode "$f" root:root 600; done <"$scratch/creds.txt"
while read -r d; do expect_mode "$d" root:root 700; done < <(find /var/lib/drover-runner/build1 -type d)

step "drover pair-link, redeemed"
link=$(drover pair-link 2>>"$scratch/cli.log")
case $link in "drover://pair?url=$(printf %s "$url" | sed 's/:/%3A/g; s|/|%2F|g')&code=dpc_"*) ;;
  *) fail "pair-link names another coordinator: $link" ;;
esac
env -u DROVER_TOKEN drover redeem "$link" --name laptop >"$scratch/redeem.out" 2>"$scratch/redeem.log"
grep -q 'drv_' "$scratch/redeem.out" || fail "redeem printed no token"

step "SIGTERM: the runner drains, the coordinator stops, both exit 0"
kill -TERM "$runner_pid"
wait "$runner_pid" || fail "the runner exited $? on SIGTERM"
kill -TERM "$coordinator_pid"
wait "$coordinator_pid" || fail "the coordinator exited $? on SIGTERM"
pids=()

step "dpkg -i again (an upgrade) keeps the edited env file and the secrets"
dpkg -i "$deb" >>"$scratch/dpkg.log" 2>&1 || fail "dpkg -i over the installed package"
grep -qx DROVER_LISTEN=127.0.0.1:0 /etc/drover/coordinator.env || fail "the upgrade lost coordinator.env's edit"
expect_mode /etc/drover/secrets.env root:drover 640

step "dpkg -r keeps configuration and data"
dpkg -r drover-server >>"$scratch/dpkg.log" 2>&1 || fail "dpkg -r"
if [ -e /usr/bin/drover-coordinator ] || [ -e "$coord_unit" ]; then fail "files left after dpkg -r"; fi
if [ ! -e /etc/drover/coordinator.env ] || [ ! -e /var/lib/drover/coordinator.db ]; then
  fail "dpkg -r removed configuration or data"
fi

step "dpkg --purge leaves nothing"
dpkg --purge drover-server >>"$scratch/dpkg.log" 2>&1 || fail "dpkg --purge"
for path in /etc/drover /var/lib/drover /var/lib/drover-runner; do
  [ ! -e "$path" ] || fail "$path is left after purge"
done
for user in drover drover-job; do
  if getent passwd "$user" >/dev/null || getent group "$user" >/dev/null; then
    fail "the user or group $user is left after purge"
  fi
done
echo "tests/package.sh: ok ($SECONDS s)"
