#!/usr/bin/env bash
# Fails if any function of a module reserves more stack than the kernel's FRAME_WARN (2048 bytes
# on 64-bit). rustc has no -Wframe-larger-than, and the kernel stack is 16 KiB: a big ioctl
# argument or superblock copied by value through inlined callers once overflowed it.
# Usage: build/frame-check.sh MODULE.ko [KERNEL_BUILD_DIR | LIMIT]
# With a kernel build tree the limit is its CONFIG_FRAME_WARN, doubled under KASAN, which
# doubles both the frames (red zones) and the x86-64 kernel stack.
set -euo pipefail
ko=$1
limit=2048
if [ -f "${2:-}/.config" ]; then
	warn=$(sed -n 's/^CONFIG_FRAME_WARN=//p' "$2/.config")
	[ -n "$warn" ] && [ "$warn" -gt 0 ] && limit=$warn
	grep -q '^CONFIG_KASAN=y' "$2/.config" && limit=$((limit * 2))
elif [ -n "${2:-}" ]; then
	limit=$2
fi
objdump -d --no-show-raw-insn "$ko" | awk -v limit="$limit" -v ko="$ko" '
	/^[0-9a-f]+ <.*>:$/ { fn = $2 }
	/sub +\$0x[0-9a-f]+,%rsp/ {
		match($0, /\$0x[0-9a-f]+/)
		hex = substr($0, RSTART + 3, RLENGTH - 3)
		n = 0
		for (i = 1; i <= length(hex); i++)
			n = n * 16 + index("0123456789abcdef", substr(hex, i, 1)) - 1
		if (n > limit) { printf "%s: %d-byte stack frame in %s (limit %d)\n", ko, n, fn, limit; bad = 1 }
	}
	END { exit bad }
'
