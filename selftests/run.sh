#!/usr/bin/env bash
# Runs graid's VM selftests: boots the test VM, runs every selftests/tests/*.sh (or the ones
# named in $TESTS, e.g. TESTS="module-load version"), then, when the whole list ran, boots it
# again on the same drive images and runs selftests/after-reboot/*.sh (state that must survive
# a reboot). Prints TAP plus a final "N passed, N failed" line. Exits non-zero if any test
# failed or a guest did not finish, or if any test skipped itself (a test that cannot run here
# proves nothing; GRAID_ALLOW_SKIP=1 accepts skips, e.g. on a machine without udev).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# Eight drives: RAID 5/6 of 8 members and two arrays surviving the reboot at once.
export DISKS=${DISKS:-8}

tests=()
if [ -n "${TESTS:-}" ]; then
	for t in $TESTS; do
		f=$(ls "$here/tests/"*"$t"*.sh 2>/dev/null | head -n 1)
		[ -n "$f" ] || { echo "no test matches '$t'" >&2; exit 2; }
		tests+=("tests/$(basename "$f")")
	done
else
	for f in "$here"/tests/*.sh; do tests+=("tests/$(basename "$f")"); done
fi

out=$(mktemp)
trap 'rm -f "$out"' EXIT
passed=0 failed=0 skipped=0 status=0

# boot VM_OPTION... -- TEST...: one VM boot running the given tests; adds to the counts.
boot() {
	local opts=() list=()
	while [ "$1" != -- ]; do opts+=("$1"); shift; done
	shift
	list=("$@")
	"$here/vm.sh" "${opts[@]}" "$here/run-tests.sh" "${list[@]}" | tee "$out"
	local rc=${PIPESTATUS[0]}
	local p f s
	p=$(grep -cE '^ok [0-9]+ ' "$out")
	s=$(grep -cE '^ok [0-9]+ .*# SKIP' "$out")
	f=$(grep -cE '^not ok [0-9]+ ' "$out")
	if ((rc != 0 && f == 0)) || ((p + f < ${#list[@]})); then
		# The guest died or hung: whatever did not report counts as failed.
		echo "not ok - the VM stopped after $((p + f)) of ${#list[@]} tests (status $rc)"
		f=$((f + ${#list[@]} - p - f))
		((f > 0)) || f=1
	fi
	passed=$((passed + p - s))
	skipped=$((skipped + s))
	failed=$((failed + f))
	((rc == 0)) || status=$rc
}

boot -- "${tests[@]}"
if [ -z "${TESTS:-}" ]; then
	after=()
	for f in "$here"/after-reboot/*.sh; do after+=("after-reboot/$(basename "$f")"); done
	echo "# rebooting the VM on the same drives"
	boot --keep-disks -- "${after[@]}"
fi
if ((skipped > 0)); then
	echo "# $skipped skipped$([ "${GRAID_ALLOW_SKIP:-0}" = 1 ] && echo ' (allowed by GRAID_ALLOW_SKIP=1)')"
	[ "${GRAID_ALLOW_SKIP:-0}" = 1 ] || status=1
fi
echo "$passed passed, $failed failed"
((failed == 0 && status == 0))
