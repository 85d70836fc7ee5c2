# graidctl monitor (issue 32), on 64 MiB dm-linear slices of the drives:
# - a member failed by I/O errors (its slice switched to dm's error target) is reported as
#   member-failed, to the program (mdadm's arguments: EVENT DEVICE MEMBER) within 1 s of the
#   failure, although the monitor looks only every 30 s by itself: the module's uevent wakes it;
# - --oneshot exits 0 while the array is optimal, 6 once it is degraded, 7 once it is broken
#   (the last copy's write failed), and reports degraded-array;
# - --test sends a test-message for each array;
# - the parity helper attaching and going away are reported (helper-attached, -detached);
# - a check's end is reported with its mismatch count, at once: the module's uevent says it;
# - an array assembled degraded: the module's uevent and the monitor say so;
# - the monitor holds the control device only while it looks: the module unloads under it, and
#   an array started after the module came back is reported.
. /graid/lib.sh
need_members 3
set -- $members
export DM_DISABLE_UDEV=1
dm_slices $1 $2 $3
s0=/dev/mapper/s0 s1=/dev/mapper/s1 s2=/dev/mapper/s2
wipe_superblocks $s0 $s1 $s2

cat >/tmp/program <<'EOF'
#!/bin/sh
echo "$* name=$GRAID_NAME event=$GRAID_EVENT" >>/tmp/events
EOF
chmod +x /tmp/program
: >/tmp/events
uptime_ms() { awk '{ printf "%d\n", $1 * 1000 }' /proc/uptime; }
# wait_event PATTERN SECONDS: until the program got an event matching PATTERN.
wait_event() {
	n=0
	until grep -Eq "$1" /tmp/events; do
		n=$((n + 1))
		[ $n -le $(($2 * 20)) ] || { cat /tmp/events /tmp/monitor.out; fail "no event '$1' in $2 s"; }
		usleep 50000
	done
}

expect_rc 0 graidctl create mon --level 1 --write-zeroes $s0 $s1
dev=$(array_dev "$OUT")
echo "--- --oneshot on an optimal array, and --test"
expect_rc 0 graidctl monitor --oneshot
expect_rc 0 graidctl monitor --oneshot --test --program /tmp/program
expect_match "^test-message $dev name=mon event=test-message" "$(cat /tmp/events)" "--test's event"

echo "--- a member fails: member-failed within 1 s"
graidctl monitor --delay 30 --program /tmp/program >/tmp/monitor.out 2>&1 &
monitor=$!
usleep 500000
slice_error s1
dd if=/dev/zero of=$dev bs=4k count=1 oflag=direct 2>/dev/null || fail "the write failed with a copy left"
n=0
until graidctl --json detail mon | grep -q '"state": *"faulty"'; do
	n=$((n + 1)); [ $n -le 100 ] || fail "member 1 was not failed: $(graidctl detail mon)"
	usleep 20000
done
failed_at=$(uptime_ms)
wait_event "^member-failed $dev $(dm_node s1) name=mon" 5
took=$(($(uptime_ms) - failed_at))
echo "member-failed reached the program ${took} ms after the failure showed"
[ $took -le 1000 ] || fail "member-failed took $took ms"
expect_match "^member-failed $dev $(dm_node s1): role 1 failed; array degraded" "$(cat /tmp/monitor.out)" \
	"the monitor's log line"

echo "--- --oneshot: degraded, then broken"
expect_rc 6 graidctl monitor --oneshot
expect_match "degraded-array $dev: 1 of 2 members active" "$OUT" "--oneshot's report"
expect_match "degraded: $dev \(mon\)" "$OUT" "--oneshot's reason"
slice_error s0
dd if=/dev/zero of=$dev bs=4k count=1 oflag=direct 2>/dev/null && fail "a write to a failing last copy succeeded"
expect_rc 7 graidctl monitor --oneshot
expect_match "array-failed $dev: broken" "$OUT" "--oneshot on a broken array"
wait_event "^array-failed $dev" 5
kill $monitor
expect_rc 0 graidctl stop mon
slice_linear s0 $1
slice_linear s1 $2
wipe_superblocks $s0 $s1 $s2

echo "--- the helper attaches and goes away; a check ends with its mismatches"
: >/tmp/events
graidctl monitor --delay 1 --program /tmp/program >/tmp/monitor.out 2>&1 &
monitor=$!
expect_rc 0 graidctl create mon5 --level 5 --chunk 64K --write-zeroes $s0 $s1 $s2
dev=$(array_dev "$OUT")
wait_event "^new-array $dev name=mon5" 5
start_helper
wait_event "^helper-attached /dev/graid-helper name= " 5
kill $helper
wait $helper 2>/dev/null
wait_event "^helper-detached /dev/graid-helper" 5
kill $monitor
# A check's end comes from the module's uevent: a monitor that looks only every 30 s by itself
# reports it at once.
graidctl monitor --delay 30 --program /tmp/program >/tmp/monitor.out 2>&1 &
monitor=$!
usleep 500000
uevents_start
expect_rc 0 graidctl check mon5 --wait
wait_event "^check-finished $dev name=mon5" 5
expect_match "check-finished $dev: mismatches=0 read-errors=0" "$(cat /tmp/monitor.out)" "the check's report"
expect_match "GRAID_EVENT=check-finished GRAID_MISMATCHES=0" "$(uevents_stop)" "the check's uevent"

echo "--- an array assembled degraded: its uevent and the monitor say so"
expect_rc 0 graidctl stop mon5
wait_event "^device-disappeared $dev name=mon5" 5
uevents_start
expect_rc 0 graidctl assemble --run mon5 $s0 $s1
dev=$(array_dev "$OUT")
expect_match "GRAID_EVENT=degraded-array" "$(uevents_stop)" "the degraded start's uevent"
wait_event "^degraded-array $dev name=mon5" 5
expect_rc 0 graidctl stop mon5

echo "--- the monitor holds the control device only while it looks: the module unloads"
usleep 500000
udevadm settle
rmmod raid_gpu || fail "rmmod refused with only the monitor running: $(cat /sys/module/raid_gpu/refcnt)"
kill -0 $monitor || fail "the monitor died when the module went away"
load_module
: >/tmp/events
expect_rc 0 graidctl assemble --run mon5 $s0 $s1
dev=$(array_dev "$OUT")
wait_event "^degraded-array $dev name=mon5" 5
kill $monitor
expect_rc 0 graidctl stop mon5
dmsetup --noudevsync remove s0 s1 s2 2>/dev/null ||
	for s in s0 s1 s2; do dmsetup --noudevsync remove $s; done
kmemleak_check
