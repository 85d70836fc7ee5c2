#!/bin/sh
# In-guest test runner: runs each test script, prints kselftest-style TAP and fails a test that
# leaves kernel warnings in dmesg. usage: run-tests.sh TEST.sh...
. /graid/lib.sh

# Kernel messages that fail whichever test was running when they appeared.
DMESG_BAD='WARNING:|BUG[: ]|Oops|KASAN|UBSAN|kernel BUG|suspected memory leak|general protection|Call Trace'

echo "TAP version 13"
echo "1..$#"
bad=$(dmesg -c | grep -E "$DMESG_BAD")
[ -z "$bad" ] || echo "$bad" | sed 's/^/# boot dmesg: /'
# On the debug kernel: lockdep turns itself off at its first report or at any taint (a KASAN
# report at boot taints), and then checks nothing. Say which.
if [ -r /proc/lockdep_stats ]; then
	if grep -Eq 'debug_locks: +1$' /proc/lockdep_stats; then
		echo "# lockdep: on"
	else
		echo "# lockdep: OFF since boot: lock order is not checked in this run"
	fi
fi

# A test's exit status is its own, not that of the line stamper after it.
set -o pipefail

# Prefixes each line read with the guest's whole seconds since $1 (an uptime in seconds).
since() {
	while IFS= read -r line || [ -n "$line" ]; do
		read -r up _ </proc/uptime
		echo "+$((${up%.*} - $1))s $line"
	done
}

# leak_scan: prints what kmemleak reports as leaked (unreferenced objects older than 5 s) and
# returns 1 if anything; the report is cleared, so each leak fails one test.
leak_scan() {
	k=/sys/kernel/debug/kmemleak
	[ -e $k ] || return 0
	echo scan >$k
	leaks=$(cat $k)
	[ -z "$leaks" ] && return 0
	echo "$leaks" | head -n 60 | sed 's/^/# kmemleak: /'
	echo clear >$k
	return 1
}

# contain: after a failed test, stops what it may have left running (fio, arrays, dm devices),
# so the tests after it start from free drives and report their own results.
contain() {
	pkill fio 2>/dev/null
	pkill -KILL graid-helper 2>/dev/null
	for dev in /dev/graid[0-9]*; do
		[ -b "$dev" ] && graidctl stop --force "$dev" >/dev/null 2>&1
	done
	dmsetup remove_all --force >/dev/null 2>&1
}

n=0 pass=0 fail=0 skipped=0
for t in "$@"; do
	n=$((n + 1))
	name=$(basename "$t" .sh)
	echo "# $name"
	started=$(cut -d. -f1 /proc/uptime)
	# Each line carries the guest seconds since the test began, so a slow section shows.
	timeout "${GRAID_TEST_TIMEOUT:-900}" sh "$t" </dev/null 2>&1 | since "$started" >/tmp/test.out
	rc=$?
	sed 's/^/# /' /tmp/test.out
	# Guest seconds per test: what the VM suite's time budget is made of.
	echo "# $name took $(($(cut -d. -f1 /proc/uptime) - started)) s"
	# Leaks: kmemleak reports an object only once it is 5 s old, so a scan now sees what
	# this test leaked early on and what the test before it leaked; after the last test it
	# waits for everything.
	[ $n = $# ] && sleep 6
	if ! leak_scan; then
		echo "# kmemleak: leaked objects, allocated during this test or the one before"
		[ $rc = 0 ] || [ $rc = $KSFT_SKIP ] && rc=1
	fi
	log=$(dmesg -c)
	bad=$(echo "$log" | grep -E "$DMESG_BAD")
	if [ -n "$bad" ]; then
		# The matched lines, then the first report whole: its header (the line above a
		# Call Trace names the cause) and its frames, as CI keeps only this output.
		echo "$bad" | sed 's/^/# dmesg: /'
		echo "$log" | grep -E -m1 -n "$DMESG_BAD" | cut -d: -f1 | {
			read -r first
			echo "$log" | sed -n "$((first > 8 ? first - 8 : 1)),$((first + 40))p"
		} | sed 's/^/# report: /'
		[ $rc = 0 ] || [ $rc = $KSFT_SKIP ] && rc=1
	fi
	case $rc in
	0) echo "ok $n $name"; pass=$((pass + 1)) ;;
	"$KSFT_SKIP") echo "ok $n $name # SKIP"; skipped=$((skipped + 1)) ;;
	*)
		# What the module said last is often why: CI keeps only this output.
		echo "$log" | grep -E 'graid|raid_gpu' | tail -n 40 | sed 's/^/# kernel: /'
		echo "not ok $n $name # exit=$rc"
		fail=$((fail + 1))
		contain
		;;
	esac
done
echo "# Totals: pass:$pass fail:$fail xfail:0 xpass:0 skip:$skipped error:0"
[ $fail = 0 ]
