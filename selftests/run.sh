#!/usr/bin/env bash
# Runs graid's VM selftests: boots test VMs, runs every selftests/tests/*.sh (or the ones named
# in $TESTS, e.g. TESTS="module-load version"), then, when the whole list ran, boots the VM that
# ran 99-reboot-prepare again on the same drive images and runs selftests/after-reboot/*.sh
# (state that must survive a reboot), then the crash rounds (selftests/crash.sh; CRASH_ROUNDS=0
# leaves them out). Prints TAP plus a final "N passed, N failed" line. Exits
# non-zero if any test failed or a guest did not finish, or if any test skipped itself (a test
# that cannot run here proves nothing; GRAID_ALLOW_SKIP=1 accepts skips, e.g. on a machine
# without udev).
#
# VM_WORK_PREFIX: where the VMs' work files go (out/vm, out/vm-1, ...: PREFIX, PREFIX-1, ...), so
# that two suites can run at once (selftests/vm-suites.sh runs one per kernel series).
#
# VM_JOBS=N (default: one per two host cores) boots N VMs at once, each with its own drives,
# its own share of the tests and VM_CPUS CPUs (vm.sh: 2), so a many-core machine runs the
# suite N times faster. The shares are balanced by each test's time
# in the previous run on this machine ($GRAID_CACHE/vm-test-times), else in selftests/test-times
# (a run on the development machine), else 60 s.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../build/common.sh"
# Eight drives: RAID 5/6 of 8 members and two arrays surviving the reboot at once.
export DISKS=${DISKS:-8}
cores=$(nproc)
jobs=${VM_JOBS:-$((cores >= 4 ? cores / 2 : 1))}
[[ $jobs =~ ^[1-9][0-9]*$ ]] || die "VM_JOBS must be a positive number, not '$jobs'"
times=$GRAID_CACHE/vm-test-times

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
((jobs <= ${#tests[@]})) || jobs=${#tests[@]}

# The shares: longest test first to the least loaded VM; 99-reboot-prepare always to VM 0,
# which reboots. Each VM runs its share in the list's order.
declare -A share
declare -a load
for ((j = 0; j < jobs; j++)); do load[j]=0; done
seconds() {
	local s
	s=$(cat "$times" "$here/test-times" 2>/dev/null | awk -v t="$1" '$1 == t { print $2; exit }')
	echo "${s:-60}"
}
while read -r secs t; do
	j=0
	if [[ $t != *99-reboot-prepare* ]]; then
		for ((k = 1; k < jobs; k++)); do ((load[k] < load[j])) && j=$k; done
	fi
	share[$t]=$j
	load[j]=$((load[j] + secs))
done < <(for t in "${tests[@]}"; do echo "$(seconds "$(basename "$t" .sh)") $t"; done | sort -rn)

outs=$(mktemp -d)
trap 'rm -rf "$outs"' EXIT
passed=0 failed=0 skipped=0 status=0

# count N OUTPUT RC: adds one boot's results (N tests expected) to the counts.
count() {
	local n=$1 out=$2 rc=$3 p f s
	p=$(grep -cE '^ok [0-9]+ ' "$out")
	s=$(grep -cE '^ok [0-9]+ .*# SKIP' "$out")
	f=$(grep -cE '^not ok [0-9]+ ' "$out")
	if ((rc != 0 && f == 0)) || ((p + f < n)); then
		# The guest died or hung: whatever did not report counts as failed.
		echo "not ok - the VM stopped after $((p + f)) of $n tests (status $rc)"
		f=$((f + n - p - f))
		((f > 0)) || f=1
	fi
	passed=$((passed + p - s))
	skipped=$((skipped + s))
	failed=$((failed + f))
	((rc == 0)) || status=$rc
}

# boot J VM_OPTION... -- TEST...: VM J runs the given tests; its output goes to $outs/J, and to
# stdout prefixed with "[vmJ] " when more than one VM runs; its exit status to $outs/J.rc.
boot() {
	local j=$1 opts=()
	shift
	while [ "$1" != -- ]; do opts+=("$1"); shift; done
	shift
	local prefix=""
	((jobs == 1)) || prefix="[vm$j] "
	GRAID_VM_WORK=${VM_WORK_PREFIX:-$GRAID_ROOT/out/vm}$( ((j == 0)) || echo "-$j") \
		"$here/vm.sh" "${opts[@]}" "$here/run-tests.sh" "$@" | tee "$outs/$j" |
		sed -u "s/^/$prefix/"
	echo "${PIPESTATUS[0]}" >"$outs/$j.rc"
}

# A guest is killed as hung after twice its share's expected time and ten minutes (at least
# vm.sh's 30 minutes; VM_TIMEOUT sets it): a busy host slows every test, and a hung test meets
# its own limit first (VM_TEST_TIMEOUT, run-tests.sh).
vm_limit() {
	local s=$(($1 * 2 + 600))
	echo "${VM_TIMEOUT:-$((s > 1800 ? s : 1800))}"
}

pids=()
for ((j = 0; j < jobs; j++)); do
	list=()
	for t in "${tests[@]}"; do [ "${share[$t]}" = "$j" ] && list+=("$t"); done
	echo "# VM $j: ${#list[@]} tests, about ${load[j]} s"
	boot "$j" --timeout "$(vm_limit "${load[j]}")" -- "${list[@]}" &
	pids+=($!)
	echo "${#list[@]}" >"$outs/$j.n"
done
wait "${pids[@]}"
for ((j = 0; j < jobs; j++)); do count "$(cat "$outs/$j.n")" "$outs/$j" "$(cat "$outs/$j.rc")"; done

# Remember each test's guest seconds for the next run's shares.
if cat "$outs"/[0-9] | grep -qE '^# [0-9][^ ]* took [0-9]+ s$'; then
	mkdir -p "$(dirname "$times")"
	{
		cat "$outs"/[0-9] | sed -nE 's/^# ([0-9][^ ]*) took ([0-9]+) s$/\1 \2/p'
		cat "$times" 2>/dev/null || true
	} | awk '!seen[$1]++' | sort >"$times.tmp" && mv "$times.tmp" "$times"
fi

if [ -z "${TESTS:-}" ]; then
	after=()
	for f in "$here"/after-reboot/*.sh; do after+=("after-reboot/$(basename "$f")"); done
	echo "# rebooting VM 0 on the same drives"
	jobs=1 boot 0 --keep-disks -- "${after[@]}"
	count "${#after[@]}" "$outs/0" "$(cat "$outs/0.rc")"
fi
# The crash rounds (selftests/crash.sh): their own VM boots, after everything else.
if [ -z "${TESTS:-}" ] && [ "${CRASH_ROUNDS:-1}" != 0 ]; then
	"$here/crash.sh" | tee "$outs/crash"
	rc=${PIPESTATUS[0]}
	p=$(sed -nE 's/^([0-9]+) passed, ([0-9]+) failed$/\1/p' "$outs/crash" | tail -n 1)
	f=$(sed -nE 's/^([0-9]+) passed, ([0-9]+) failed$/\2/p' "$outs/crash" | tail -n 1)
	passed=$((passed + ${p:-0}))
	failed=$((failed + ${f:-1}))
	((rc == 0)) || status=$rc
fi
if ((skipped > 0)); then
	echo "# $skipped skipped$([ "${GRAID_ALLOW_SKIP:-0}" = 1 ] && echo ' (allowed by GRAID_ALLOW_SKIP=1)')"
	[ "${GRAID_ALLOW_SKIP:-0}" = 1 ] || status=1
fi
echo "$passed passed, $failed failed"
((failed == 0 && status == 0))
