#!/usr/bin/env bash
# The crash rounds (selftests/crash/lib.sh says what they do): CRASH_ROUNDS machine kills
# (default 1: a degraded RAID 1 and an optimal RAID 10, 5 and 6, and a RAID 5 restriped; `make soak` runs 8), one VM boot each on the same drives, and a last boot that
# checks what the last kill left. Prints TAP and a final "N passed, N failed" line; exits
# non-zero if a round failed. selftests/run.sh runs it after the other tests.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../build/common.sh"
rounds=${CRASH_ROUNDS:-1}
[[ $rounds =~ ^[1-9][0-9]*$ ]] || die "CRASH_ROUNDS must be a positive number, not '$rounds'"
# Five arrays of 17 members and a spare, the write-hole test's three drives and the state
# drive; small drives keep the resyncs short.
export DISKS=22 DISK_SIZE_MB=${CRASH_DISK_MB:-48}
export GRAID_VM_WORK=$GRAID_ROOT/out/vm-crash
passed=0 failed=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for ((r = 0; r <= rounds; r++)); do
	if ((r == 0)); then
		script=start opts=()
	elif ((r < rounds)); then
		script=again opts=(--keep-disks)
	else
		script=last opts=(--keep-disks)
	fi
	echo "# crash round $r: crash/$script.sh"
	"$here/vm.sh" "${opts[@]}" "$here/run-tests.sh" "crash/$script.sh" | tee "$out"
	rc=${PIPESTATUS[0]}
	if ((rc == 0)) && grep -qE '^ok [0-9]+ ' "$out"; then
		passed=$((passed + 1))
	else
		echo "not ok - crash round $r ($script, status $rc)"
		failed=$((failed + 1))
		# The next rounds would only check what this one left.
		break
	fi
done
echo "$passed passed, $failed failed"
((failed == 0))
