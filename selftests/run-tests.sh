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

n=0 pass=0 fail=0 skipped=0
for t in "$@"; do
	n=$((n + 1))
	name=$(basename "$t" .sh)
	echo "# $name"
	started=$(cut -d. -f1 /proc/uptime)
	timeout "${GRAID_TEST_TIMEOUT:-900}" sh "$t" >/tmp/test.out 2>&1 </dev/null
	rc=$?
	sed 's/^/# /' /tmp/test.out
	# Guest seconds per test: what the VM suite's time budget is made of.
	echo "# $name took $(($(cut -d. -f1 /proc/uptime) - started)) s"
	bad=$(dmesg -c | grep -E "$DMESG_BAD")
	if [ -n "$bad" ]; then
		echo "$bad" | sed 's/^/# dmesg: /'
		[ $rc = 0 ] || [ $rc = $KSFT_SKIP ] && rc=1
	fi
	case $rc in
	0) echo "ok $n $name"; pass=$((pass + 1)) ;;
	"$KSFT_SKIP") echo "ok $n $name # SKIP"; skipped=$((skipped + 1)) ;;
	*) echo "not ok $n $name # exit=$rc"; fail=$((fail + 1)) ;;
	esac
done
echo "# Totals: pass:$pass fail:$fail xfail:0 xpass:0 skip:$skipped error:0"
[ $fail = 0 ]
