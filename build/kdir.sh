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
	"$GRAID_ROOT/build/kernel.sh"
fi
