#!/usr/bin/env bash
# Builds raid_gpu.ko out of tree: build/module.sh [kbuild target...] (default: modules).
# build/module.sh clippy: the same build through clippy (the kernel's lint set, -D warnings).
set -euo pipefail
. "$(dirname "$0")/common.sh"
kdir=$("$GRAID_ROOT/build/kdir.sh")
kmake() {
	make -C "$kdir" M="$GRAID_ROOT" LLVM=-"$LLVM_VERSION" RUSTC="$KERNEL_RUSTC" BINDGEN="$BINDGEN" "$@"
}
if [ "${1:-}" = clippy ]; then
	# Kbuild would not recompile an unchanged crate, and clippy only sees what is compiled.
	touch "$GRAID_ROOT/raid_gpu/raid_gpu_main.rs"
	kmake CLIPPY=1 CLIPPY_DRIVER="$KERNEL_CLIPPY" modules
	exit
fi
kmake "${@:-modules}"
if [ "${1:-modules}" = modules ]; then
	"$GRAID_ROOT/build/frame-check.sh" "$GRAID_ROOT/raid_gpu.ko" "$kdir"
fi
