#!/usr/bin/env bash
# Builds the test-VM kernel (bzImage + modules) into the cache, keyed by its inputs.
#   build/kernel.sh            build if needed, print the build tree path on stdout
#   build/kernel.sh --path     print the path the current inputs map to (no build)
set -euo pipefail
. "$(dirname "$0")/common.sh"

fragment=$GRAID_ROOT/build/kconfig/graid.config
kmake_vars=(LLVM=-$LLVM_VERSION RUSTC=$KERNEL_RUSTC BINDGEN=$BINDGEN)

cache_key() {
	{
		echo "source $1"
		cat "$fragment" "$GRAID_ROOT/build/kernel.sh"
		"$KERNEL_RUSTC" --version
		"clang-$LLVM_VERSION" --version | head -n 1
		"$BINDGEN" --version
	} | sha256sum | cut -c1-16
}

read -r version tarball < <("$GRAID_ROOT/build/fetch-kernel-source.sh")
kdir=$GRAID_CACHE/kernel/$version-$(cache_key "$version")
if [ "${1:-}" = --path ]; then echo "$kdir"; exit 0; fi
if [ -f "$kdir/.graid-built" ]; then
	log "kernel cached: $kdir"
	echo "$kdir"
	exit 0
fi

start=$(date +%s)
# Built in place (paths inside a build tree are absolute); .graid-built marks it complete.
rm -rf "$kdir"
mkdir -p "$kdir"
log "unpacking $KERNEL_SOURCE_PKG $version"
tar -C "$kdir" -xf "$tarball" --strip-components=1
cd "$kdir"
kmake() { make -s "${kmake_vars[@]}" "$@"; }
kmake rustavailable >&2
kmake x86_64_defconfig >&2
scripts/kconfig/merge_config.sh -m -O . .config "$fragment" >/dev/null
kmake olddefconfig >&2

# Every option the fragment names must have the value it asks for.
bad=0
while IFS= read -r line; do
	case "$line" in
	CONFIG_*=*) opt=${line%%=*} want=${line#*=} ;;
	"# CONFIG_"*" is not set") opt=${line#\# } opt=${opt%% *} want=n ;;
	*) continue ;;
	esac
	got=$(sed -n "s/^$opt=//p" .config)
	[ -n "$got" ] || got=n
	if [ "$got" != "$want" ]; then log "config: $opt is $got, fragment wants $want"; bad=1; fi
done <"$fragment"
((bad == 0)) || die "merged .config does not match $fragment"

jobs=$(($(nproc) + 1))
log "building kernel $version with -j$jobs (this takes a while on a cold cache)"
kmake -j"$jobs" bzImage modules >&2
kmake INSTALL_MOD_PATH="$kdir/modinst" INSTALL_MOD_STRIP=1 modules_install >&2
touch .graid-built

# Keep only the newest two builds: each is a few GB.
ls -1dt "$GRAID_CACHE"/kernel/*/ 2>/dev/null | tail -n +3 | xargs -r rm -rf
log "kernel built in $(($(date +%s) - start)) s: $kdir"
echo "$kdir"
