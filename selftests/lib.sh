# Helpers for graid's in-guest selftests (busybox sh). Source it: . /graid/lib.sh
# A test exits 0 to pass, 4 to skip (kselftest's KSFT_SKIP), anything else to fail.

KSFT_SKIP=4

fail() {
	echo "FAIL: $*"
	exit 1
}

skip() {
	echo "SKIP: $*"
	exit $KSFT_SKIP
}

# expect_rc WANT CMD...: runs CMD, fails the test unless it exits with WANT. Output in $OUT.
expect_rc() {
	want=$1
	shift
	OUT=$("$@" 2>&1)
	got=$?
	[ "$got" = "$want" ] || fail "'$*' exited $got, expected $want; output: $OUT"
}

# expect_match PATTERN TEXT WHAT: fails unless TEXT matches the extended regex PATTERN.
expect_match() {
	echo "$2" | grep -Eq -- "$1" || fail "$3: '$2' does not match /$1/"
}

module_loaded() {
	grep -q '^raid_gpu ' /proc/modules
}

load_module() {
	module_loaded || modprobe raid_gpu || fail "modprobe raid_gpu failed"
	[ -c /dev/graid-control ] || fail "/dev/graid-control did not appear"
}

unload_module() {
	if module_loaded; then rmmod raid_gpu || fail "rmmod raid_gpu failed"; fi
}

# NVMe namespaces of the emulated drives (serial graid-nvme*), one block device path per line.
graid_nvme_disks() {
	for c in /sys/class/nvme/nvme*; do
		case $(cat "$c/serial" 2>/dev/null) in graid-nvme*) ;; *) continue ;; esac
		for ns in "$c"/nvme*n*; do
			[ -e "$ns/size" ] && echo "/dev/${ns##*/}"
		done
	done | sort
}

# kmemleak_check: fails the test if kmemleak reports an unreferenced object.
# Objects younger than ~5 s are not reported yet, hence the wait.
kmemleak_check() {
	k=/sys/kernel/debug/kmemleak
	[ -e $k ] || { echo "kmemleak not available, leak check skipped"; return 0; }
	sleep 6
	echo scan >$k
	echo scan >$k
	leaks=$(cat $k)
	if [ -n "$leaks" ]; then
		echo "$leaks" | head -n 60
		fail "kmemleak reports leaked objects"
	fi
}
