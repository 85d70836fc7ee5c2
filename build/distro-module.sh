#!/usr/bin/env bash
# Builds raid_gpu.ko for Debian's own kernel ($DISTRO_KERNEL_RELEASE from $DISTRO_SUITE-backports,
# build/versions.env) instead of graid's test kernel, with that kernel's own compilers (gcc-14,
# $DISTRO_SUITE's rustc) in the cached $DISTRO_SUITE chroot (build/distro-chroot.sh).
#   build/distro-module.sh          build; prints the path of the module (out/distro-RELEASE/build/)
#   build/distro-module.sh --path   print the cache directory the current inputs map to
#
# The kernel tree is prepared exactly as graid-dkms prepares it on a user's machine:
# packaging/dkms/graid-dkms-build --prepare regenerates the Rust build outputs the distro's
# headers lack (rust/*.rmeta, the proc macros, scripts/target.json) from linux-source of the same
# version, after checking every toolchain version the .config records. The prepared tree stays
# in the chroot's /var/cache/graid-dkms, where graid-dkms's own builds (build/deb-test.sh) find
# it. The module must then carry the distro modules' vermagic and pass build/frame-check.sh
# against the distro's .config, as build/module.sh's does against the test kernel's.
# Needs root (mmdebstrap, chroot, mount namespaces) and mmdebstrap.
set -euo pipefail
. "$(dirname "$0")/common.sh"
. "$GRAID_ROOT/build/distro-chroot.sh"

if [ "${1:-}" = --path ]; then
	echo "$distro_dir"
	exit 0
fi
rel=$distro_rel
out=$GRAID_ROOT/out/distro-$rel
distro_chroot_ready

# Kbuild refuses a module source tree that holds another build's outputs (build/module.sh
# builds in place), so the chroot gets a copy of what git would commit of the module's
# sources; the outputs go to $out.
mkdir -p "$out"
rm -rf "$out/src"
mkdir -p "$out/src" "$out/build"
(cd "$GRAID_ROOT" && git ls-files -z -co --exclude-standard -- Kbuild raid_gpu rust packaging/dkms |
	while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
	tar --null -T - -cf -) | tar -C "$out/src" -xf -

# The vermagic a module needs to load into the distro's kernel: its own modules' (those
# raid_gpu.ko depends on, kept for tests that boot that kernel).
if ! [ -f "$distro_root/build/vermagic" ]; then
	in_chroot <<EOS
set -euo pipefail
apt-get -q update >/dev/null
rm -rf /build/distro-modules && mkdir -p /build/distro-modules && cd /build/distro-modules
apt-get -q -o APT::Sandbox::User=root download linux-modules-$rel=$distro_ver >/dev/null
dpkg-deb --fsys-tarfile linux-modules-*.deb | tar -x --wildcards --strip-components=6 \
	'*/lib/raid/xor/xor.ko.xz' '*/lib/raid/raid6/raid6_pq.ko.xz'
rm linux-modules-*.deb
find . -name '*.ko.xz' -exec mv {} . \; && xz -d ./*.ko.xz
find . -mindepth 1 -type d -empty -delete
modinfo -F vermagic xor.ko >/build/vermagic
EOS
fi

log "building raid_gpu.ko for $rel"
kdir=$(in_chroot "$out/src:/src:ro" "$out:/out" <<EOS
set -euo pipefail
build=/src/packaging/dkms/graid-dkms-build
kdir=\$(\$build --prepare $rel /usr/src/linux-headers-$rel)
# The build DKMS runs, with the outputs beside the sources.
cd /src && \$build $rel /usr/src/linux-headers-$rel MO=/out/build >&2
echo "\$kdir"
EOS
)
ko=$out/build/raid_gpu.ko
[ "$(modinfo -F vermagic "$ko")" = "$(cat "$distro_root/build/vermagic")" ] ||
	die "$ko has vermagic '$(modinfo -F vermagic "$ko")', $rel's modules '$(cat "$distro_root/build/vermagic")'"
"$GRAID_ROOT/build/frame-check.sh" "$ko" "$distro_root$kdir"
echo "$ko"
