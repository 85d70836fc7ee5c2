#!/usr/bin/env bash
# Installs the packages of make deb (out/deb) the way a user does, in a throwaway overlay of the
# cached $DISTRO_SUITE chroot, and removes them again:
#   - DKMS builds raid_gpu.ko for each of Debian's own kernels there ($DISTRO_KERNELS, one per
#     supported series) from graid-dkms, with the distro's vermagic; the installed files and the
#     purge pass selftests/debian/package-check.sh, as on the Debian VM;
#   - a kernel of a supported series whose source is not installed yet is skipped, not failed,
#     with its reason; dpkg and apt stay healthy; once its source is installed, graid-dkms's
#     trigger builds the module for it;
#   - a kernel of a series graid does not support (headers of a made-up 7.99 with Rust) is
#     skipped by DKMS (BUILD_EXCLUSIVE_KERNEL), graid's kernel hook says why in one line, and
#     dpkg and apt stay healthy.
# The builds run natively in the chroot, as the packages' DKMS hooks would on the machine; the
# kernel trees they need were prepared by build/distro-module.sh with the same script
# (graid-dkms-build) and the same cache folder, so only the modules are compiled here.
set -euo pipefail
. "$(dirname "$0")/common.sh"
. "$GRAID_ROOT/build/distro-chroot.sh"

out=$GRAID_ROOT/out/deb
ls "$out"/graid_*_amd64.deb "$out"/graid-dkms_*_all.deb >/dev/null 2>&1 ||
	die "no packages in $out (make deb)"
distro_chroot_ready
for rel in "${distro_rels[@]}"; do
	[ -f "$distro_root/build/$rel/vermagic" ] || die "the chroot has no kernel tree prepared for $rel yet (make distro-module)"
done
late=${distro_rels[${#distro_rels[@]} - 1]}
late_ver=${distro_vers[${#distro_vers[@]} - 1]}
late_series=$(distro_series "$late")

log "installing and removing graid's packages in a $DISTRO_SUITE chroot"
in_chroot --overlay "$out:/pkg:ro" "$GRAID_ROOT/selftests/debian:/checks:ro" <<EOS
set -euo pipefail
fail() { printf 'deb-test: FAIL: %s\n' "\$*" >&2; exit 1; }
healthy() {
	[ -z "\$(dpkg --audit)" ] || fail "\$1: dpkg --audit: \$(dpkg --audit)"
	apt-get check >/dev/null 2>&1 || fail "\$1: apt-get check: \$(apt-get check 2>&1)"
}
installed() { ls /lib/modules/"\$1"/updates/dkms/raid_gpu.ko* >/dev/null 2>&1; }
export DEBIAN_FRONTEND=noninteractive
apt-get -q update >/dev/null

# The newest kernel's source arrives after graid-dkms: its build is skipped, with the reason.
# (graid-dkms depends on the linux-source metapackage: a stand-in at the oldest kernel's version.)
# Its prepared tree is put aside meanwhile, as on a machine that never built for it (a prepared
# tree needs no source); it comes back with the source, so that the build the trigger starts
# takes seconds, not the minutes of preparing it again.
dpkg --remove linux-source-$late_series >/dev/null
mkdir -p /root/aside && mv /var/cache/graid-dkms/$late-* /root/aside/
/checks/stand-in-meta.sh linux-source ${distro_vers[0]} "linux-source-$(distro_series "${distro_rels[0]}") (= ${distro_vers[0]})" /tmp/meta
apt-get -q -y install /tmp/meta/linux-source_*.deb >/dev/null
apt-get -q -y install /pkg/graid-dkms_*_all.deb /pkg/graid_*_amd64.deb 2>&1 | tee /tmp/install.out >&2
[ "\${PIPESTATUS[0]}" = 0 ] || fail "installing the packages failed"
healthy "after the install"
for rel in ${distro_rels[*]}; do
	[ "\$rel" = $late ] && continue
	installed "\$rel" || fail "DKMS installed no raid_gpu for \$rel: \$(dkms status graid)"
	ko=\$(ls /lib/modules/\$rel/updates/dkms/raid_gpu.ko*)
	[ "\$(modinfo -F vermagic "\$ko")" = "\$(cat /build/\$rel/vermagic)" ] ||
		fail "vermagic '\$(modinfo -F vermagic "\$ko")', \$rel's modules '\$(cat /build/\$rel/vermagic)'"
done
! installed $late || fail "DKMS built for $late without its source"
grep -q "graid-dkms: WARNING: raid_gpu is NOT installed for kernel $late: no kernel source at /usr/src/linux-source-$late_series.tar.xz" /tmp/install.out ||
	fail "the install did not say why $late has no raid_gpu"
mv /root/aside/* /var/cache/graid-dkms/
apt-get -q -y install linux-source-$late_series=$late_ver 2>&1 | tee /tmp/source.out >&2
[ "\${PIPESTATUS[0]}" = 0 ] || fail "installing linux-source-$late_series failed"
healthy "after the late source"
installed $late || fail "the source's arrival did not build raid_gpu for $late: \$(dkms status graid)"
ko=\$(ls /lib/modules/$late/updates/dkms/raid_gpu.ko*)
[ "\$(modinfo -F vermagic "\$ko")" = "\$(cat /build/$late/vermagic)" ] || fail "$late's module has vermagic '\$(modinfo -F vermagic "\$ko")'"
echo "deb-test: dkms status: \$(dkms status graid | tr '\n' ' ')" >&2

# A kernel of a series graid does not support, with Rust: DKMS skips it, the hook says why.
fake=7.99.0-graidtest
mkdir -p /tmp/fake/DEBIAN /tmp/fake/usr/src/linux-headers-\$fake/include /tmp/fake/lib/modules/\$fake
sed -n '/^CONFIG_/p' /usr/src/linux-headers-$late/.config >/tmp/fake/usr/src/linux-headers-\$fake/.config
ln -s /usr/src/linux-headers-\$fake /tmp/fake/lib/modules/\$fake/build
cat >/tmp/fake/DEBIAN/control <<EOF
Package: linux-headers-\$fake
Version: 7.99.0-1
Architecture: amd64
Maintainer: graid tests <graid-devel@lists.graid.dev>
Description: headers of a kernel series graid does not support (deb-test)
EOF
# As Debian's linux-headers packages do: the kernel's header hooks, DKMS's among them.
printf '#!/bin/sh\nset -e\n[ "\$1" = configure ] || exit 0\nexec run-parts --report --exit-on-error --arg=%s /etc/kernel/header_postinst.d\n' "\$fake" >/tmp/fake/DEBIAN/postinst
chmod 0755 /tmp/fake/DEBIAN/postinst
dpkg-deb --build --root-owner-group /tmp/fake /tmp/fake.deb >/dev/null
apt-get -q -y install /tmp/fake.deb 2>&1 | tee /tmp/fake.out >&2
[ "\${PIPESTATUS[0]}" = 0 ] || fail "installing the unsupported kernel's headers failed"
healthy "after the unsupported kernel"
! installed \$fake || fail "DKMS built for \$fake"
grep -q "graid-dkms: WARNING: raid_gpu is NOT installed for kernel \$fake: kernel \$fake is of series 7.99; this graid supports the series" /tmp/fake.out ||
	fail "graid's hook did not say why \$fake has no raid_gpu"
dpkg --purge linux-headers-\$fake >/dev/null

/checks/package-check.sh installed >&2 || fail "installed files"
/checks/package-check.sh purge >&2 || fail "purge"
echo "deb-test: built by DKMS for ${distro_rels[*]} (the last once its source came), an unsupported series skipped with apt healthy, removed without a trace" >&2
EOS
