#!/usr/bin/env bash
# Builds the test-VM kernel (bzImage + modules) into the cache, keyed by its inputs.
#   build/kernel.sh                build if needed, print the build tree path on stdout
#   build/kernel.sh --path         print the path the current inputs map to (no build)
#   build/kernel.sh --config-only  configure and check the config in a scratch tree (no build)
# KERNEL_VARIANT=test (default) or debug (KASAN, lockdep, ...: build/kconfig/debug.config).
set -euo pipefail
. "$(dirname "$0")/common.sh"

variant=${KERNEL_VARIANT:-test}
fragments=("$GRAID_ROOT/build/kconfig/graid.config")
case $variant in
test) ;;
debug) fragments+=("$GRAID_ROOT/build/kconfig/debug.config") ;;
*) die "unknown KERNEL_VARIANT '$variant' (test or debug)" ;;
esac
kmake_vars=(LLVM=-$LLVM_VERSION RUSTC=$KERNEL_RUSTC BINDGEN=$BINDGEN)

cache_key() {
	{
		echo "source $1 variant $variant"
		cat "${fragments[@]}" "$GRAID_ROOT/build/kernel.sh"
		"$KERNEL_RUSTC" --version
		"clang-$LLVM_VERSION" --version | head -n 1
		"$BINDGEN" --version
	} | sha256sum | cut -c1-16
}

read -r version tarball < <("$GRAID_ROOT/build/fetch-kernel-source.sh")
kdir=$GRAID_CACHE/kernel/$version-$variant-$(cache_key "$version")
config_only=0
case ${1:-} in
--path) echo "$kdir"; exit 0 ;;
--config-only) config_only=1 kdir=$(mktemp -d) ;;
esac
mkdir -p "$GRAID_CACHE"
# One build at a time: a second caller waits for the first and then finds its result.
exec 9>"$GRAID_CACHE/kernel-build.lock"
flock 9
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
# The fragments are merged into x86_64_defconfig as it is kept (only what differs from the
# defaults), not into its expansion: an expanded .config records every option that the
# defaults' selections turned on (the network filesystems' crypto, for one) as if asked for,
# and turning off what selected them would then leave them built.
cp arch/x86/configs/x86_64_defconfig .config
scripts/kconfig/merge_config.sh -m -O . .config "${fragments[@]}" >/dev/null
kmake olddefconfig >&2

# Every option the fragments name must have the value the last of them asks for.
declare -A want=()
for fragment in "${fragments[@]}"; do
	while IFS= read -r line; do
		case "$line" in
		CONFIG_*=*) want[${line%%=*}]=${line#*=} ;;
		"# CONFIG_"*" is not set") opt=${line#\# } want[${opt%% *}]=n ;;
		esac
	done <"$fragment"
done
bad=0
for opt in "${!want[@]}"; do
	got=$(sed -n "s/^$opt=//p" .config)
	[ -n "$got" ] || got=n
	if [ "$got" != "${want[$opt]}" ]; then log "config: $opt is $got, fragments want ${want[$opt]}"; bad=1; fi
done
((bad == 0)) || die "merged .config does not match ${fragments[*]}"
if ((config_only)); then
	log "config for variant $variant checked (${#want[@]} options)"
	rm -rf "$kdir"
	exit 0
fi

jobs=$(($(nproc) + 1))
log "building $variant kernel $version with -j$jobs (this takes a while on a cold cache)"
kmake -j"$jobs" bzImage modules >&2
kmake INSTALL_MOD_PATH="$kdir/modinst" INSTALL_MOD_STRIP=1 modules_install >&2
touch .graid-built

# Keep only the newest three builds (each is a few GB): test and debug can both stay.
ls -1dt "$GRAID_CACHE"/kernel/*/ 2>/dev/null | tail -n +4 | xargs -r rm -rf
log "kernel built in $(($(date +%s) - start)) s: $kdir"
echo "$kdir"
