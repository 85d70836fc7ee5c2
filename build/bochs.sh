#!/usr/bin/env bash
# Builds the Bochs x86 emulator into the cache (keyed by its inputs) and prints the path of
# the binary. graid uses it to run the parity engine's AVX-512 and GFNI kernels on a CPU that
# has neither (build/emulated-parity.sh).
#
# Why built and not Debian's package: bookworm's Bochs 2.7 computes gf2p8affineqb with the
# parity inverted (every product comes out complemented; fixed upstream in 2.8), and trixie's
# 3.0 package needs trixie's libc. The source is Debian's trixie orig tarball, pinned by hash.
# The BIOS images come from bookworm's bochsbios and vgabios packages (the tarball has none).
set -euo pipefail
. "$(dirname "$0")/common.sh"

key=$({
	echo "$BOCHS_VERSION $BOCHS_SHA256"
	cat "$GRAID_ROOT/build/bochs.sh"
	g++ --version | head -n 1
} | sha256sum | cut -c1-16)
prefix=$GRAID_CACHE/bochs/$BOCHS_VERSION-$key
if [ -x "$prefix/bin/bochs" ]; then
	echo "$prefix/bin/bochs"
	exit 0
fi

mkdir -p "$GRAID_CACHE/bochs"
exec 9>"$GRAID_CACHE/bochs/build.lock"
flock 9
if [ -x "$prefix/bin/bochs" ]; then
	echo "$prefix/bin/bochs"
	exit 0
fi

tarball=$GRAID_CACHE/bochs/bochs_$BOCHS_VERSION.orig.tar.xz
if ! echo "$BOCHS_SHA256  $tarball" | sha256sum -c --quiet >/dev/null 2>&1; then
	log "downloading $BOCHS_URL"
	curl -fsSL --retry 3 -o "$tarball.part" "$BOCHS_URL"
	echo "$BOCHS_SHA256  $tarball.part" | sha256sum -c --quiet >/dev/null 2>&1 ||
		die "$BOCHS_URL does not have the pinned sha256"
	mv "$tarball.part" "$tarball"
fi

start=$(date +%s)
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
tar -C "$src" -xf "$tarball" --strip-components=1
cd "$src"
log "building Bochs $BOCHS_VERSION (a few minutes on a cold cache)"
# x86-64 with AVX and AVX-512 (EVEX): what the CPU models with GFNI need. No GUI, no debugger,
# no plugins: the guest talks through its serial port only.
./configure --prefix="$prefix" --enable-x86-64 --enable-all-optimizations --enable-avx \
	--enable-evex --with-nogui --without-x11 --disable-docbook >"$src/configure.log" 2>&1 ||
	die "Bochs configure failed: $(tail -n 5 "$src/configure.log")"
make -j"$(nproc)" >"$src/make.log" 2>&1 || die "Bochs build failed: $(tail -n 20 "$src/make.log")"
rm -rf "$prefix.tmp"
mkdir -p "$prefix.tmp/bin"
cp bochs "$prefix.tmp/bin/bochs"
mv "$prefix.tmp" "$prefix"
log "Bochs built in $(($(date +%s) - start)) s: $prefix"
echo "$prefix/bin/bochs"
