#!/usr/bin/env bash
# Installs the packages of make deb (out/deb) the way a user does, in a throwaway overlay of the
# cached $DISTRO_SUITE chroot, and removes them again: DKMS must build raid_gpu.ko for Debian's
# own kernel ($DISTRO_KERNEL_RELEASE) from graid-dkms, with the distro's vermagic, and the
# installed files and the purge pass selftests/debian/package-check.sh, as on the Debian VM.
# The build runs natively in the chroot, as the package's DKMS hook would on the machine; the
# kernel tree it needs was prepared by build/distro-module.sh with the same script
# (graid-dkms-build) and the same cache folder, so only the module is compiled here.
set -euo pipefail
. "$(dirname "$0")/common.sh"
. "$GRAID_ROOT/build/distro-chroot.sh"

out=$GRAID_ROOT/out/deb
ls "$out"/graid_*_amd64.deb "$out"/graid-dkms_*_all.deb >/dev/null 2>&1 ||
	die "no packages in $out (make deb)"
distro_chroot_ready
[ -f "$distro_root/build/vermagic" ] || die "the chroot has no kernel tree prepared yet (make distro-module)"

log "installing and removing graid's packages in a $DISTRO_SUITE chroot"
in_chroot --overlay "$out:/pkg:ro" "$GRAID_ROOT/selftests/debian:/checks:ro" <<EOS
set -euo pipefail
fail() { printf 'deb-test: FAIL: %s\n' "\$*" >&2; exit 1; }
rel=$distro_rel
export DEBIAN_FRONTEND=noninteractive
apt-get -q update >/dev/null
apt-get -q -y install /pkg/graid-dkms_*_all.deb /pkg/graid_*_amd64.deb >&2
# DKMS's own hook builds for the newest kernel; say which kernel explicitly as well.
dkms autoinstall -k "\$rel" >&2
status=\$(dkms status graid)
echo "dkms status: \$status" >&2
echo "\$status" | grep -q "^graid/[^,]*, \$rel, x86_64: installed" || fail "dkms status: '\$status'"
# (No linux-image in the chroot, so no module index to ask by name: the file DKMS installed.)
ko=\$(ls /lib/modules/\$rel/updates/dkms/raid_gpu.ko*) || fail "DKMS installed no raid_gpu for \$rel"
[ "\$(modinfo -F vermagic "\$ko")" = "\$(cat /build/vermagic)" ] ||
	fail "vermagic '\$(modinfo -F vermagic "\$ko")', the kernel's modules '\$(cat /build/vermagic)'"
/checks/package-check.sh installed >&2 || fail "installed files"
/checks/package-check.sh purge >&2 || fail "purge"
echo "deb-test: installed, built by DKMS for \$rel, removed without a trace" >&2
EOS
