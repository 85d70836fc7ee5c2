#!/bin/bash
# The kernel upgrade of the Debian VM test's upgrade leg (selftests/debian-vm.sh runs it in the
# machine's root, as a chroot, natively, between steps 4 and 5 of upgrade-steps.sh; under
# emulation the new kernel's first DKMS build would take hours):
#   - apt upgrade, as an admin runs it, moves the kernel metapackages to what trixie-backports
#     serves now: the new kernel, its headers and, through graid-dkms's dependency on the
#     linux-source metapackage, its source; DKMS's hooks build raid_gpu for it and graid's hook
#     says so; dpkg and apt are healthy;
#   - a kernel of a series graid does not support (trixie's own, without Rust) installs with its
#     headers: DKMS skips it, graid's hook says why in one line, and dpkg and apt stay healthy.
# Leaves the two kernels' releases in /etc/graid-vmtest/{new,unsupported}-kernel for the next
# steps, and the new kernels' modules trimmed as the old one's (trim-modules.sh).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
fail() {
	echo "upgrade: FAIL: $*" >&2
	exit 1
}
healthy() {
	[ -z "$(dpkg --audit)" ] || fail "$1: dpkg --audit: $(dpkg --audit)"
	apt-get check >/dev/null 2>&1 || fail "$1: apt-get check: $(apt-get check 2>&1)"
}
installed() { ls /lib/modules/"$1"/updates/dkms/raid_gpu.ko* >/dev/null 2>&1; }

# The newest kernel whose image is installed (what the machine boots).
newest() { ls /boot | sed -n 's/^vmlinuz-//p' | sort -V | tail -n 1; }
old=$(newest)
installed "$old" || fail "raid_gpu is not installed for the machine's kernel $old before the upgrade"
apt-get -q update >/dev/null
apt -y upgrade 2>&1 | tee /tmp/upgrade.out >&2
[ "${PIPESTATUS[0]}" = 0 ] || fail "apt upgrade failed"
healthy "after apt upgrade"
new=$(newest)
[ "$new" != "$old" ] || fail "apt upgrade brought no newer kernel than $old"
series=$(echo "$new" | cut -d. -f1,2)
src_ver=$(dpkg-query -W -f '${Version}' "linux-source-$series" 2>/dev/null) ||
	fail "apt upgrade did not bring linux-source-$series"
[ "$src_ver" = "$(dpkg-query -W -f '${Version}' "linux-image-$new")" ] ||
	fail "linux-source-$series is $src_ver, linux-image-$new $(dpkg-query -W -f '${Version}' "linux-image-$new")"
installed "$new" || fail "DKMS did not install raid_gpu for $new: $(dkms status graid)"
grep -q "graid-dkms: raid_gpu is installed for kernel $new" /tmp/upgrade.out ||
	fail "graid's kernel hook did not report $new"
echo "upgrade: $old -> $new with linux-source-$series $src_ver; $(dkms status graid | tr '\n' ' ')" >&2

# Trixie's own kernel: what its linux-image-amd64 depends on.
ver=$(apt-cache madison linux-image-amd64 | awk -F'|' '$3 ~ / trixie\/main / { gsub(/ /, "", $2); print $2; exit }')
[ -n "$ver" ] || fail "trixie serves no linux-image-amd64"
rel=$(apt-cache show "linux-image-amd64=$ver" | sed -n 's/^Depends: .*linux-image-\([0-9][^ ]*-amd64\) .*/\1/p' | head -n 1)
[ -n "$rel" ] || fail "trixie's linux-image-amd64 $ver names no kernel"
pkg=linux-image-$rel
apt-get -q -y install "$pkg" "linux-headers-$rel" 2>&1 | tee /tmp/unsupported.out >&2
[ "${PIPESTATUS[0]}" = 0 ] || fail "installing $pkg failed"
healthy "after installing $pkg"
! installed "$rel" || fail "DKMS installed raid_gpu for $rel"
grep -q "graid-dkms: WARNING: raid_gpu is NOT installed for kernel $rel: kernel $rel is of series" /tmp/unsupported.out ||
	fail "graid's kernel hook did not say why $rel has no raid_gpu"
echo "upgrade: $(grep 'graid-dkms: WARNING' /tmp/unsupported.out | head -n 1)" >&2

mkdir -p /etc/graid-vmtest
echo "$new" >/etc/graid-vmtest/new-kernel
echo "$rel" >/etc/graid-vmtest/unsupported-kernel
"$(dirname "$0")/trim-modules.sh"
