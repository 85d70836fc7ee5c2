#!/usr/bin/env bash
# Builds raid_gpu.ko for each of Debian's own kernels ($DISTRO_KERNELS from
# $DISTRO_SUITE-backports, build/versions.env: one per supported series) instead of graid's test
# kernel, with those kernels' own compilers (gcc-14, $DISTRO_SUITE's rustc) in the cached
# $DISTRO_SUITE chroot (build/distro-chroot.sh).
#   build/distro-module.sh          build for every one; prints the modules' paths
#                                   (out/distro-RELEASE/build/raid_gpu.ko), oldest first
#   build/distro-module.sh RELEASE  build for that one only
#   build/distro-module.sh --path   print the cache directory the current inputs map to
#
# Each kernel tree is prepared exactly as graid-dkms prepares it on a user's machine:
# packaging/dkms/graid-dkms-build --prepare regenerates the Rust build outputs the distro's
# headers lack (rust/*.rmeta, the proc macros, scripts/target.json) from linux-source of the same
# version, after checking every toolchain version the .config records. The prepared trees stay
# in the chroot's /var/cache/graid-dkms, where graid-dkms's own builds (build/deb-test.sh, the
# Debian VM test) find them. Each module must then carry its kernel's modules' vermagic and pass
# build/frame-check.sh against that kernel's .config, as build/module.sh's does against the test
# kernel's. Needs root (mmdebstrap, chroot, mount namespaces) and mmdebstrap.
set -euo pipefail
. "$(dirname "$0")/common.sh"
. "$GRAID_ROOT/build/distro-chroot.sh"

if [ "${1:-}" = --path ]; then
	echo "$distro_dir"
	exit 0
fi
# Every supported series has a distro kernel to build for.
for series in $KERNEL_SERIES_SUPPORTED; do
	found=0
	for rel in "${distro_rels[@]}"; do [ "$(distro_series "$rel")" = "$series" ] && found=1; done
	((found)) || die "DISTRO_KERNELS (build/versions.env) names no kernel of the supported series $series"
done
rels=("${distro_rels[@]}")
if [ -n "${1:-}" ]; then
	rels=()
	for i in "${!distro_rels[@]}"; do [ "${distro_rels[i]}" = "$1" ] && rels=("$1"); done
	((${#rels[@]})) || die "$1 is not one of DISTRO_KERNELS: ${distro_rels[*]}"
fi
distro_chroot_ready

# Kbuild refuses a module source tree that holds another build's outputs (build/module.sh
# builds in place), so the chroot gets a copy of what git would commit of the module's
# sources; the outputs go to out/distro-RELEASE.
src=$GRAID_ROOT/out/distro-src
rm -rf "$src"
mkdir -p "$src"
(cd "$GRAID_ROOT" && git ls-files -z -co --exclude-standard -- Kbuild raid_gpu rust packaging/dkms |
	while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
	tar --null -T - -cf -) | tar -C "$src" -xf -
# The kernel series graid-dkms-build accepts (build/deb.sh ships the same list in graid-dkms).
echo "$KERNEL_SERIES_SUPPORTED" >"$src/packaging/dkms/kernel-series"

for rel in "${rels[@]}"; do
	ver=
	for i in "${!distro_rels[@]}"; do [ "${distro_rels[i]}" = "$rel" ] && ver=${distro_vers[i]}; done
	out=$GRAID_ROOT/out/distro-$rel
	rm -rf "$out"
	mkdir -p "$out/build"
	# The vermagic a module needs to load into the distro's kernel: its own modules' (those
	# raid_gpu.ko depends on, kept for tests that boot that kernel).
	if ! [ -f "$distro_root/build/$rel/vermagic" ]; then
		in_chroot <<EOS
set -euo pipefail
apt-get -q update >/dev/null
rm -rf /build/$rel && mkdir -p /build/$rel/modules && cd /build/$rel/modules
apt-get -q -o APT::Sandbox::User=root download linux-modules-$rel=$ver >/dev/null
dpkg-deb --fsys-tarfile linux-modules-*.deb | tar -x --wildcards --strip-components=6 \
	'*/lib/raid/xor/xor.ko.xz' '*/lib/raid/raid6/raid6_pq.ko.xz'
rm linux-modules-*.deb
find . -name '*.ko.xz' -exec mv {} . \; && xz -d ./*.ko.xz
find . -mindepth 1 -type d -empty -delete
modinfo -F vermagic xor.ko >/build/$rel/vermagic
EOS
	fi

	log "building raid_gpu.ko for $rel"
	kdir=$(in_chroot "$src:/src:ro" "$out:/out" <<EOS
set -euo pipefail
build=/src/packaging/dkms/graid-dkms-build
kdir=\$(\$build --prepare $rel /usr/src/linux-headers-$rel)
# The build DKMS runs, with the outputs beside the sources.
cd /src && \$build $rel /usr/src/linux-headers-$rel MO=/out/build >&2
echo "\$kdir"
EOS
)
	ko=$out/build/raid_gpu.ko
	[ "$(modinfo -F vermagic "$ko")" = "$(cat "$distro_root/build/$rel/vermagic")" ] ||
		die "$ko has vermagic '$(modinfo -F vermagic "$ko")', $rel's modules '$(cat "$distro_root/build/$rel/vermagic")'"
	"$GRAID_ROOT/build/frame-check.sh" "$ko" "$distro_root$kdir"
	echo "$ko"
done
