#!/usr/bin/env bash
# Builds raid_gpu.ko out of tree: build/module.sh [kbuild target...] (default: modules).
# build/module.sh clippy: the same build through clippy (the kernel's lint set, -D warnings).
# build/module.sh --path: print where the module of the current kernel tree is (no build).
#
# The module of each kernel tree (the test kernels of every series and variant, or KDIR) is
# built into its own folder, out/module/TREE/ (Kbuild's MO=), so the VM suites of two kernels
# can run at once; ./raid_gpu.ko links to the last one built.
set -euo pipefail
. "$(dirname "$0")/common.sh"
if [ "${1:-}" = --path ]; then
	kdir=${KDIR:-$("$GRAID_ROOT/build/kernel.sh" --path)}
	echo "$GRAID_ROOT/out/module/$(basename "$kdir")/raid_gpu.ko"
	exit 0
fi
kdir=$("$GRAID_ROOT/build/kdir.sh")
out=$GRAID_ROOT/out/module/$(basename "$kdir")
mkdir -p "$out"
kmake() {
	make -C "$kdir" M="$GRAID_ROOT" MO="$out" LLVM=-"$LLVM_VERSION" RUSTC="$KERNEL_RUSTC" BINDGEN="$BINDGEN" "$@"
}
if [ "${1:-}" = rust-analyzer ]; then
	# rust-project.json in the source tree, where editors look for it.
	make -C "$kdir" M="$GRAID_ROOT" LLVM=-"$LLVM_VERSION" RUSTC="$KERNEL_RUSTC" BINDGEN="$BINDGEN" rust-analyzer
	exit
fi
if [ "${1:-}" = clippy ]; then
	# Kbuild would not recompile an unchanged crate, and clippy only sees what is compiled.
	touch "$GRAID_ROOT/raid_gpu/raid_gpu_main.rs"
	kmake CLIPPY=1 CLIPPY_DRIVER="$KERNEL_CLIPPY" modules
	exit
fi
kmake "${@:-modules}"
if [ "${1:-modules}" = modules ]; then
	"$GRAID_ROOT/build/frame-check.sh" "$out/raid_gpu.ko" "$kdir"
	ln -sfn "out/module/$(basename "$kdir")/raid_gpu.ko" "$GRAID_ROOT/raid_gpu.ko"
fi
