#!/usr/bin/env bash
# Builds graid's Debian packages (make deb): graid (graidctl, graid-helper, udev rules, the
# helper's systemd unit, man pages, completions, docs) and graid-dkms (raid_gpu's source and
# its DKMS build), with Debian's own tooling (dpkg-buildpackage, debhelper, dh-dkms) in the
# cached $DISTRO_SUITE chroot (build/distro-chroot.sh), then checks them with lintian: any
# warning or error fails. The packages land in out/deb/.
#
# graidctl and graid-helper are built here by cargo (crates.io; Debian's cargo would need every
# crate packaged): this machine's glibc is no newer than $DISTRO_SUITE's, so they run there.
set -euo pipefail
. "$(dirname "$0")/common.sh"
. "$GRAID_ROOT/build/distro-chroot.sh"

out=$GRAID_ROOT/out/deb
version=$(sed -n '1s/^graid (\([^)]*\)).*/\1/p' "$GRAID_ROOT/packaging/debian/changelog")
[ -n "$version" ] || die "no version in packaging/debian/changelog"
distro_chroot_ready

log "building graidctl and graid-helper (cargo, release)"
(cd "$GRAID_ROOT/tools" && cargo build --locked --release -q -p graidctl -p graid-helper)
bin=$GRAID_ROOT/tools/target/release

# The source tree dpkg-buildpackage sees: what the packages hold, in place (debian/rules).
stage=$out/graid-$version
rm -rf "$out"
mkdir -p "$stage"/{bin,man,completions,dkms,udev,systemd,doc,hooks,conf}
cp -a "$GRAID_ROOT/packaging/debian" "$stage/debian"
# DKMS builds only for the supported kernel series (a regex of KERNEL_SERIES_SUPPORTED: 7.2 7.3
# gives ^(7\.2|7\.3)\.), and graid-dkms-build checks the same list (dkms/kernel-series).
series_regex="^($(echo "$KERNEL_SERIES_SUPPORTED" | sed 's/\./\\./g; s/ /|/g'))\\."
sed "s/#KERNEL_SERIES_REGEX#/$(printf '%s' "$series_regex" | sed 's/[\\&/]/\\&/g')/" \
	"$GRAID_ROOT/packaging/dkms/dkms.conf" >"$stage/debian/graid-dkms.dkms"
grep -qF "BUILD_EXCLUSIVE_KERNEL=\"$series_regex\"" "$stage/debian/graid-dkms.dkms" ||
	die "dkms.conf's BUILD_EXCLUSIVE_KERNEL was not filled in"
cp "$GRAID_ROOT/tools/systemd/graid-helper.service" "$stage/debian/graid.graid-helper.service"
cp "$GRAID_ROOT/tools/systemd/graid-monitor.service" "$stage/debian/graid.graid-monitor.service"
cp "$GRAID_ROOT/tools/systemd/graid-check.timer" "$stage/debian/graid.graid-check.timer"
cp "$GRAID_ROOT/tools/systemd/graid-check.service" "$stage/debian/graid.graid-check.service"
cp "$GRAID_ROOT/packaging/dkms/kernel-postrm" "$stage/hooks/graid-dkms"
cp "$GRAID_ROOT/packaging/dkms/kernel-hook" "$stage/hooks/zz-graid-dkms"
install -m 0755 "$bin/graidctl" "$bin/graid-helper" "$stage/bin/"
"$bin/graidctl" generate-docs "$stage/generated"
"$bin/graid-helper" generate-docs "$stage/generated"
mv "$stage"/generated/*.8 "$stage/man/"
cp "$GRAID_ROOT"/tools/man/*.[0-9] "$stage/man/"
mv "$stage"/generated/* "$stage/completions/"
rmdir "$stage/generated"
cp "$GRAID_ROOT"/tools/udev/*.rules "$stage/udev/"
cp "$GRAID_ROOT"/tools/systemd/graid-last-resort@.* "$GRAID_ROOT"/tools/systemd/graid-export@.service \
	"$GRAID_ROOT"/tools/systemd/graid.shutdown "$stage/systemd/"
cp "$GRAID_ROOT/tools/config/graid.conf" "$stage/conf/"
cp "$GRAID_ROOT/README.md" "$GRAID_ROOT"/Documentation/*.rst "$stage/doc/"
# The module's source as git would commit it, and the DKMS build script.
(cd "$GRAID_ROOT" && git ls-files -z -co --exclude-standard -- Kbuild raid_gpu rust |
	while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
	tar --null -T - -cf -) | tar -C "$stage/dkms" -xf -
install -m 0755 "$GRAID_ROOT/packaging/dkms/graid-dkms-build" "$GRAID_ROOT/packaging/dkms/graid-dkms-status" "$stage/dkms/"
echo "$KERNEL_SERIES_SUPPORTED" >"$stage/dkms/kernel-series"

log "packaging graid $version (dpkg-buildpackage, lintian)"
in_chroot "$out:/pkg" <<EOS
set -euo pipefail
cd /pkg/graid-$version
dpkg-buildpackage -b --no-sign >&2
cd /pkg
# Every warning and error fails; the info tags are Debian-archive matters (no ITP bug to close).
lintian --fail-on warning,error --suppress-tags initial-upload-closes-no-bugs \
	graid_${version}_amd64.changes >&2
EOS
rm -rf "$stage"
ls "$out"/*.deb
