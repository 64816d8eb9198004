#!/bin/sh
# build-deb.sh [--release | BIN_DIR]: the drover-server .deb, from binaries
# cargo already built in BIN_DIR (default target/debug; --release:
# target/release; under $CARGO_TARGET_DIR if set). Writes
# BIN_DIR/drover-server_VERSION_ARCH.deb and prints its path. It needs only
# dpkg-deb (Debian's own) and objdump (binutils): no cargo-deb.
#
# The package: /usr/bin/drover-coordinator and /usr/bin/drover, the units
# drover-coordinator.service and drover-runner@.service, /etc/drover/ (the
# flags' env files, conffiles), /usr/sbin/drover-admin, and the maintainer
# scripts in debian/ (users, the secrets file, purge).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
die() { echo "build-deb.sh: $*" >&2; exit 1; }

target=${CARGO_TARGET_DIR:-$repo/target}
# A release package is xz-compressed, as Debian's are; any other gzip -1
# (debug binaries are large; the tests build one every run).
compress="-Zgzip -z1" build=
case "${1:-}" in
    --release) bin_dir=$target/release compress=-Zxz build=" --release" ;;
    "") bin_dir=$target/debug ;;
    -*) die "usage: build-deb.sh [--release | BIN_DIR]" ;;
    *) bin_dir=$1 ;;
esac
for bin in drover-coordinator drover; do
    [ -x "$bin_dir/$bin" ] ||
        die "$bin_dir/$bin is missing: build it first (cargo build$build -p drover-coordinator -p drover)"
done
for tool in dpkg-deb dpkg objdump; do
    command -v "$tool" >/dev/null || die "$tool is missing (apt-get install dpkg binutils)"
done

version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' "$repo/Cargo.toml")
[ -n "$version" ] || die "no version in $repo/Cargo.toml"
for bin in drover-coordinator drover; do
    "$bin_dir/$bin" --version | grep -qF " $version" ||
        die "$bin_dir/$bin --version does not say $version: a stale build?"
done
arch=$(dpkg --print-architecture)
# The newest glibc symbol version the binaries use.
glibc=$(objdump -T "$bin_dir/drover-coordinator" "$bin_dir/drover" |
    sed -n 's/.*GLIBC_\([0-9][0-9.]*\).*/\1/p' | sort -uV | tail -n 1)
[ -n "$glibc" ] || die "found no glibc symbol versions in the binaries"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root=$stage/drover-server
install -d -m 0755 "$root/DEBIAN" "$root/usr/bin" "$root/usr/sbin" \
    "$root/lib/systemd/system" "$root/etc/drover" \
    "$root/usr/share/drover-server" "$root/usr/share/doc/drover-server"
install -m 0755 "$bin_dir/drover-coordinator" "$bin_dir/drover" "$root/usr/bin/"
install -m 0755 "$here/drover-admin" "$root/usr/sbin/"
install -m 0644 "$here/drover-coordinator.service" "$here/drover-runner@.service" \
    "$root/lib/systemd/system/"
install -m 0644 "$here/coordinator.env" "$here/runner.env" "$root/etc/drover/"
install -m 0644 "$here/secrets.env" "$root/usr/share/drover-server/"
printf '%s\n' "Drover: the coordinator and the drover CLI and runner." \
    "License: Apache-2.0 (/usr/share/common-licenses/Apache-2.0)." \
    >"$root/usr/share/doc/drover-server/copyright"
chmod 0644 "$root/usr/share/doc/drover-server/copyright"
install -m 0755 "$here/debian/postinst" "$here/debian/prerm" "$here/debian/postrm" "$root/DEBIAN/"
printf '%s\n' /etc/drover/coordinator.env /etc/drover/runner.env >"$root/DEBIAN/conffiles"
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -print | sed 's|^\./||' | sort |
    xargs md5sum) >"$root/DEBIAN/md5sums"
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
cat >"$root/DEBIAN/control" <<CONTROL
Package: drover-server
Version: $version
Architecture: $arch
Maintainer: Drover developers <drover@localhost>
Section: net
Priority: optional
Installed-Size: $size
Depends: libc6 (>= $glibc), libgcc-s1, passwd
Recommends: bubblewrap
Description: Drover coordinator and headless runners
 Drover runs jobs on machines a team already owns. This package holds the
 server side: drover-coordinator as a systemd service (its own user
 drover, data in /var/lib/drover, flags in /etc/drover/coordinator.env,
 secrets in /etc/drover/secrets.env), the drover CLI and runner, and the
 template unit drover-runner@.service for headless runners.
CONTROL
chmod 0644 "$root/DEBIAN/control" "$root/DEBIAN/conffiles" "$root/DEBIAN/md5sums"

deb=$bin_dir/drover-server_${version}_$arch.deb
# shellcheck disable=SC2086 # two words
dpkg-deb --root-owner-group $compress --build "$root" "$deb" >/dev/null
echo "$deb"
