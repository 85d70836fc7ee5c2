#!/usr/bin/env bash
# make test's VM suites, in two lanes at once (under TCG a guest of the suite leaves about a third
# of two host cores idle, which the other lane fills; Documentation/testing.rst has the numbers):
#   lane 1: the VM suite on the test kernel of the newest supported series (selftests/run.sh);
#   lane 2: the Debian VM test (selftests/debian-vm.sh: Debian's own kernels and packages, the
#           README's install, a kernel upgrade), then the VM suite's tests of what differs
#           between kernel series ($OLDER_SERIES_TESTS: module load, the ioctls, every level's
#           data path, the helper's ring, the bitmap, sysfs and the module's parameters) on the
#           test kernel of each older supported series.
# Lane 2's output is kept in out/lane2.log and shown after the suite's; the exit status is
# non-zero if anything failed. VM_LANES=1 runs everything one after the other.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../build/common.sh"

# The tests that exercise rust/compat.rs and the paths most likely to change between series.
OLDER_SERIES_TESTS=${OLDER_SERIES_TESTS:-"02-module-load-unload 03-version-ioctl 07-raid-data 18-raid5-raid6 25-helper-device 29-bitmap 39-sysfs"}
newest=${KERNEL_SERIES_SUPPORTED##* }

lane2() {
	local rc=0 s
	"$here/debian-vm.sh" || rc=1
	for s in $KERNEL_SERIES_SUPPORTED; do
		[ "$s" = "$newest" ] && continue
		echo "# the VM suite's kernel-series tests on the $s test kernel"
		KERNEL_SERIES=$s TESTS=$OLDER_SERIES_TESTS VM_JOBS=1 VM_WORK_PREFIX=$GRAID_ROOT/out/vm-$s \
			"$here/run.sh" || rc=1
	done
	return $rc
}

log_file=$GRAID_ROOT/out/lane2.log
mkdir -p "$(dirname "$log_file")"
if [ "${VM_LANES:-2}" = 1 ]; then
	lane2
	other=$?
	KERNEL_SERIES=$newest "$here/run.sh"
	suite=$?
else
	start=$(date +%s)
	lane2 >"$log_file" 2>&1 &
	lane2_pid=$!
	# The suite's guests stop if this script is stopped; so do lane 2's.
	trap 'kill $lane2_pid 2>/dev/null' EXIT
	KERNEL_SERIES=$newest "$here/run.sh"
	suite=$?
	wait $lane2_pid
	other=$?
	trap - EXIT
	echo "# lane 2, run beside the VM suite ($(($(date +%s) - start)) s for both):"
	cat "$log_file"
fi
# CI shows only the output's tail: what failed in lane 2 is repeated last, where it is seen.
if ((other != 0)) && [ -f "$log_file" ]; then
	echo "# lane 2's failures, repeated from its log above:"
	grep -E -A 12 'GRAID-STEP-FAIL|\[graid\] error|^not ok|^# FAIL|FAIL:' "$log_file" | head -n 120
fi
echo "# the VM suite ($newest): $( ((suite == 0)) && echo passed || echo "FAILED ($suite)");" \
	"the Debian VM test and the older series' tests: $( ((other == 0)) && echo passed || echo "FAILED ($other)")"
((suite == 0 && other == 0))
