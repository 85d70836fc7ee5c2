#!/usr/bin/env bash
# Builds raid_gpu.ko out of tree: build/module.sh [kbuild target...] (default: modules).
set -euo pipefail
. "$(dirname "$0")/common.sh"
kdir=$("$GRAID_ROOT/build/kdir.sh")
make -C "$kdir" M="$GRAID_ROOT" LLVM=-"$LLVM_VERSION" RUSTC="$KERNEL_RUSTC" BINDGEN="$BINDGEN" "${@:-modules}"
if [ "${1:-modules}" = modules ]; then
	"$GRAID_ROOT/build/frame-check.sh" "$GRAID_ROOT/raid_gpu.ko"
fi
