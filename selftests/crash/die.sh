# fio's trigger (and the fallback when its writes ended first): saves the round's state to the
# state drive, reports the round passed (its output so far, then TAP), and resets the machine
# at once: no sync, no unmount, the arrays running.
. /graid/crash/lib.sh
# The runner's dmesg check never comes: a kernel warning fails the round here.
bad=$(dmesg | grep -E 'WARNING:|BUG[: ]|Oops|KASAN|UBSAN|kernel BUG|general protection|Call Trace')
save_state || bad="$bad
the round's state could not be saved on the state drive ($(state_drive))"
{
	sed 's/^/# /' /tmp/test.out 2>/dev/null
	echo "# the machine dies now"
	if [ -n "$bad" ]; then
		echo "$bad" | sed 's/^/# dmesg: /'
		echo "not ok 1 $CRASH_TEST"
		echo "GRAID-VM-EXIT: 1"
	else
		echo "ok 1 $CRASH_TEST"
		echo "GRAID-VM-EXIT: 0"
	fi
} >$TTY
echo b >/proc/sysrq-trigger
