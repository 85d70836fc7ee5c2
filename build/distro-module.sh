#!/usr/bin/env bash
# Builds raid_gpu.ko for Debian's own kernel ($DISTRO_KERNEL_RELEASE from $DISTRO_SUITE-backports,
# build/versions.env) instead of graid's test kernel, with that kernel's own compilers (gcc-14,
# $DISTRO_SUITE's rustc) in a $DISTRO_SUITE chroot.
#   build/distro-module.sh          build; prints the path of the module (out/distro-RELEASE/build/)
#   build/distro-module.sh --path   print the cache directory the current inputs map to
#
# The distro's linux-headers package has the .config, Module.symvers and rustc_cfg, but none of
# the Rust build outputs an out-of-tree Rust module compiles against (rust/*.rmeta, the proc-macro
# libraries, scripts/target.json). They are regenerated here from linux-source of the same
# version, configured with exactly the headers' .config (`make prepare` builds rust/), and put
# into a copy of the headers tree. Every toolchain version the .config records is checked first;
# a mismatch is refused in one line, as is a regenerated kernel crate whose symbols are not the
# distro's. The chroot (as a tarball) and the prepared tree are cached under
# $GRAID_CACHE/distro/RELEASE-HASH, HASH covering the package list, the suites and this script.
# The module must then carry the distro modules' vermagic and pass build/frame-check.sh against
# the distro's .config, as build/module.sh's does against the test kernel's.
# Needs root (mmdebstrap, chroot, mount namespaces) and mmdebstrap.
set -euo pipefail
. "$(dirname "$0")/common.sh"

rel=$DISTRO_KERNEL_RELEASE
ver=$DISTRO_KERNEL_VERSION
series=$(echo "$rel" | cut -d. -f1,2)
mirror=http://deb.debian.org/debian
sources=("deb $mirror $DISTRO_SUITE main" "deb $mirror $DISTRO_SUITE-backports main")
packages="linux-headers-$rel=$ver linux-source-$series=$ver $DISTRO_CHROOT_PACKAGES"
key=$({
	printf '%s\n' "${sources[@]}" "$packages"
	cat "$GRAID_ROOT/build/distro-module.sh"
} | sha256sum | cut -c1-16)
dir=$GRAID_CACHE/distro/$rel-$key
if [ "${1:-}" = --path ]; then
	echo "$dir"
	exit 0
fi
root=$dir/root
out=$GRAID_ROOT/out/distro-$rel
[ "$(id -u)" = 0 ] || die "needs root (mmdebstrap, chroot and mounts)"
command -v mmdebstrap >/dev/null || die "mmdebstrap is not installed (apt-get install mmdebstrap)"

# in_chroot [--src]: runs bash reading its script from stdin inside the chroot, with /proc and
# /dev in a private mount namespace (gone when it exits) and, with --src, the module's sources
# ($out/src) read-only at /src and the output folder ($out) at /out. The host's environment
# stays out.
in_chroot() {
	local src=0
	[ "${1:-}" = --src ] && src=1
	unshare --mount --propagation private env root="$root" src=$src out="$out" \
		bash -c '
		set -e
		mount -t proc proc "$root/proc"
		mount --rbind /dev "$root/dev"
		if [ "$src" = 1 ]; then
			mkdir -p "$root/src" "$root/out"
			mount --bind "$out/src" "$root/src"
			mount -o remount,bind,ro "$root/src"
			mount --bind "$out" "$root/out"
		fi
		exec chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C.UTF-8 \
			bash -s'
}

mkdir -p "$GRAID_CACHE/distro"
exec 9>"$GRAID_CACHE/distro/build.lock"
flock 9

if ! [ -f "$dir/chroot.tar.zst" ]; then
	start=$(date +%s)
	log "creating the $DISTRO_SUITE chroot for $rel (mmdebstrap)"
	mkdir -p "$dir"
	# shellcheck disable=SC2086 # the package list is words
	mmdebstrap --quiet --variant=apt --components=main --include="$(echo $packages | tr ' ' ,)" \
		"$DISTRO_SUITE" "$dir/chroot.tmp.tar.zst" "${sources[@]}" >&2
	mv "$dir/chroot.tmp.tar.zst" "$dir/chroot.tar.zst"
	log "chroot made in $(($(date +%s) - start)) s"
fi
if ! [ -f "$dir/.unpacked" ]; then
	rm -rf "$root" "$dir/.prepared"
	mkdir -p "$root"
	tar -C "$root" -xf "$dir/chroot.tar.zst"
	touch "$dir/.unpacked"
fi

if ! [ -f "$dir/.prepared" ]; then
	start=$(date +%s)
	log "regenerating the kernel's Rust build outputs from linux-source-$series $ver (a few minutes)"
	cp /etc/resolv.conf "$root/etc/resolv.conf"
	in_chroot <<EOF
set -euo pipefail
die() { printf '[graid] error: %s\n' "\$*" >&2; exit 1; }
h=/usr/src/linux-headers-$rel
cfg() { sed -n "s/^\$1=//p" \$h/.config | sed 's/^"\(.*\)"\$/\1/'; }
[ "\$(cfg CONFIG_RUST)" = y ] || die "$rel's .config has no CONFIG_RUST=y"
# The toolchain the distro kernel was built with, as its .config records it.
want=\$(cfg CONFIG_CC_VERSION_TEXT)
cc=\${want%% *}
command -v \$cc >/dev/null || die "no \$cc here, the kernel was built by '\$want' (CONFIG_CC_VERSION_TEXT)"
got=\$(\$cc --version | head -n 1)
[ "\$got" = "\$want" ] || die "\$cc is '\$got', the kernel was built by '\$want' (CONFIG_CC_VERSION_TEXT)"
vmake="ARCH=x86 CROSS_COMPILE=\${cc%gcc-*} CC=\$cc KERNELRELEASE=$rel"
got=\$(rustc --version); want=\$(cfg CONFIG_RUSTC_VERSION_TEXT)
[ "\$got" = "\$want" ] || die "rustc is '\$got', the kernel was built by '\$want' (CONFIG_RUSTC_VERSION_TEXT)"
got=\$(bindgen --version); want=\$(cfg CONFIG_BINDGEN_VERSION_TEXT)
[ "\$got" = "\$want" ] || die "bindgen is '\$got', the kernel used '\$want' (CONFIG_BINDGEN_VERSION_TEXT)"

rm -rf /build && mkdir -p /build && cd /build
tar -xf /usr/src/linux-source-$series.tar.xz
cd linux-source-$series
cp \$h/.config .config
make -s \$vmake olddefconfig
cmp -s \$h/.config .config ||
	die "olddefconfig changes $rel's .config here: \$(diff \$h/.config .config | grep '^[<>]' | head -n 3 | tr '\n' ' ')"
# prepare builds rust/ (core, the bindings, kernel and the proc macros) and scripts/target.json.
make -s \$vmake -j\$(nproc) prepare
cmp -s \$h/include/generated/rustc_cfg include/generated/rustc_cfg || die "regenerated rustc_cfg differs from $rel's"
# The regenerated kernel crate must be the one in the distro's vmlinux: same crate hash, so the
# mangled names a module calls are the ones Module.symvers exports.
sym=\$(awk '\$3 == "vmlinux" && \$2 ~ /^_RNv.*Cs[0-9A-Za-z]+_6kernel/ { print \$2; exit }' \$h/Module.symvers)
[ -n "\$sym" ] || die "$rel's Module.symvers exports no symbol of the kernel crate"
nm --defined-only rust/kernel.o | grep -q " \$sym\\\$" || die "regenerated rust/kernel.o lacks the distro's \$sym (crate hash differs)"

# A copy of the headers tree, with the Rust outputs in it and scripts/ a real folder.
k=/build/kdir
mkdir -p \$k
cp -a \$h/. \$k/
rm \$k/scripts \$k/tools
cp -a "\$(readlink -f \$h/scripts)" \$k/scripts
ln -s "\$(readlink -f \$h/tools)" \$k/tools
cp scripts/target.json \$k/scripts/
mkdir \$k/rust
cp rust/*.rmeta rust/*.so \$k/rust/
sed -i "s|^KBUILD_OUTPUT=.*|KBUILD_OUTPUT=\$k|" \$k/Makefile
cd /build && rm -rf linux-source-$series

# The vermagic a module needs to load into the distro's kernel: its own modules' (those
# raid_gpu.ko depends on, kept for tests that boot that kernel).
apt-get -q update >/dev/null
mkdir -p /build/distro-modules && cd /build/distro-modules
apt-get -q -o APT::Sandbox::User=root download linux-modules-$rel=$ver >/dev/null
dpkg-deb --fsys-tarfile linux-modules-*.deb | tar -x --wildcards --strip-components=6 \
	'*/lib/raid/xor/xor.ko.xz' '*/lib/raid/raid6/raid6_pq.ko.xz'
rm linux-modules-*.deb
find . -name '*.ko.xz' -exec mv {} . \; && xz -d ./*.ko.xz
find . -mindepth 1 -type d -empty -delete
modinfo -F vermagic xor.ko >/build/vermagic
EOF
	touch "$dir/.prepared"
	log "kernel tree prepared in $(($(date +%s) - start)) s: $root/build/kdir"
fi

# Kbuild refuses a module source tree that holds another build's outputs (build/module.sh
# builds in place), so the chroot gets a copy of what git would commit of the module's
# sources; the outputs go to $out.
mkdir -p "$out"
rm -rf "$out/src"
mkdir -p "$out/src" "$out/build"
(cd "$GRAID_ROOT" && git ls-files -z -co --exclude-standard -- Kbuild raid_gpu rust |
	while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
	tar --null -T - -cf -) | tar -C "$out/src" -xf -
log "building raid_gpu.ko for $rel"
in_chroot --src <<EOF
set -euo pipefail
make -C /build/kdir M=/src MO=/out/build -j\$(nproc) modules >&2
EOF
ko=$out/build/raid_gpu.ko
[ "$(modinfo -F vermagic "$ko")" = "$(cat "$root/build/vermagic")" ] ||
	die "$ko has vermagic '$(modinfo -F vermagic "$ko")', $rel's modules '$(cat "$root/build/vermagic")'"
"$GRAID_ROOT/build/frame-check.sh" "$ko" "$root/build/kdir"

# Keep the two newest prepared trees (a chroot and its tarball are a few GB).
touch "$dir"
ls -1dt "$GRAID_CACHE"/distro/*/ 2>/dev/null | tail -n +3 | xargs -r rm -rf
echo "$ko"
