#!/usr/bin/env bash
# Prints the kernel build tree to build the module against: $KDIR when set (any Rust-enabled
# kernel build tree), else graid's cached test-VM kernel, built first if needed.
set -euo pipefail
. "$(dirname "$0")/common.sh"
if [ -n "${KDIR:-}" ]; then
	[ -f "$KDIR/Module.symvers" ] && [ -d "$KDIR/rust" ] ||
		die "KDIR=$KDIR is not a built kernel tree (no Module.symvers or rust/)"
	echo "$KDIR"
else
	# A finished build never changes: use it without queueing behind another variant's build.
	cached=$("$GRAID_ROOT/build/kernel.sh" --path)
	if [ -f "$cached/.graid-built" ]; then
		echo "$cached"
	else
		"$GRAID_ROOT/build/kernel.sh"
	fi
fi
