# A member dies (its dm-linear table switched to `error`) with buffered writeback in flight on
# RAID 1 and 10, straight and through a dm-linear device stacked on the array, on RAID 5 and 6
# through the stacked device (the stripe engine's member I/O then starts inside dm's
# submit_bio too), and on RAID 1 and 10 while O_DIRECT writes run (RAID 5/6: test 19): the writers finish, the member is failed and recorded in the
# others' superblocks, and every byte reads back. Before member failures were handled by the
# array's worker, the writeback hung for good: queue_rq, running inside the submitter's
# submit_bio (plug flush, or dm above), waited for a superblock write that only sat on that
# submitter's bio list.
. /graid/lib.sh
need_members 4
set -- $members
d0=$1 d1=$2 d2=$3 d3=$4
export DM_DISABLE_UDEV=1

dd if=/dev/urandom of=/tmp/data bs=1M count=64 2>/dev/null || fail "cannot make test data"
data_sum=$(sha256sum </tmp/data | cut -d' ' -f1)

# kill_member: member 1's table becomes `error`: every I/O to it fails from now on.
kill_member() {
	dmsetup load lin1 --table "0 $sectors error" || fail "dmsetup load error failed"
	dmsetup resume lin1 || fail "dmsetup resume failed"
}

# start_array LEVEL: RAID LEVEL with member 1 behind dm-linear; sets $dev.
start_array() {
	wipe_superblocks $d0 $d1 $d2 $d3
	sectors=$(cat /sys/class/block/${d1#/dev/}/size)
	dmsetup --noudevsync create lin1 --table "0 $sectors linear $d1 0" || fail "dmsetup create failed"
	if [ "$1" = 1 ]; then m="$d0 /dev/mapper/lin1"; else m="$d0 /dev/mapper/lin1 $d2 $d3"; fi
	# Parity must be right before a member dies: zeroed, not assumed.
	init=--assume-clean
	case $1 in 5 | 6) init=--write-zeroes ;; esac
	expect_rc 0 graidctl create wb --level "$1" $init $m
	dev=$(echo "$OUT" | grep -o '/dev/graid[0-9]*' | head -n 1)
	[ -b "$dev" ] || fail "no array device: $OUT"
}

# member_failed_and_recorded: DETAIL says degraded with one faulty member, and a surviving
# member's superblock lists it as faulty.
member_failed_and_recorded() {
	expect_rc 0 graidctl --json detail wb
	expect_match '"state": "degraded"' "$OUT" "array state"
	[ "$(echo "$OUT" | grep -c '"state": "faulty"')" = 1 ] || fail "not exactly one faulty member: $OUT"
	expect_rc 0 graidctl examine $d0
	expect_match '[Ff]aulty' "$OUT" "the failure in member 0's superblock"
}

stop_array() {
	expect_rc 0 graidctl stop wb
	dmsetup --noudevsync remove lin1 || fail "dmsetup --noudevsync remove lin1 failed"
}

for level in 1 10 5 6; do
	# Stacked is the harder case (dm's writeback context on top); the plain one only in
	# `make soak`, and for RAID 1 (the first level) always.
	stacking=yes
	{ [ "${GRAID_SOAK:-0}" = 1 ] || [ $level = 1 ]; } && stacking="no yes"
	for stacked in $stacking; do
		echo "--- RAID $level, member 1 dies under buffered writeback (dm-linear on top: $stacked)"
		start_array $level
		target=$dev
		if [ $stacked = yes ]; then
			size=$(cat /sys/class/block/${dev#/dev/}/size)
			dmsetup --noudevsync create top --table "0 $size linear $dev 0" || fail "dmsetup create top failed"
			target=/dev/mapper/top
		fi
		# Dirty pages only (no writeback yet: fd 3 keeps the device open, so dd's close is not
		# the last one, which would write them back), then the member dies, then writeback
		# runs in sync's own context: the first member I/O of that writeback fails.
		exec 3<$target
		dd if=/tmp/data of=$target bs=1M 2>/tmp/dd.err || fail "dd failed: $(cat /tmp/dd.err)"
		kill_member
		sync &
		finishes $! 300 "sync" || fail "sync failed"
		exec 3<&-
		member_failed_and_recorded
		echo 3 >/proc/sys/vm/drop_caches
		dd if=$target of=/tmp/back bs=1M count=64 2>/dev/null
		got=$(sha256sum </tmp/back | cut -d' ' -f1)
		if [ "$got" != "$data_sum" ]; then
			cmp -l /tmp/data /tmp/back | awk 'NR == 1 { print "first difference at byte", $1 } END { print NR, "bytes differ, the last at", $1 }'
			fail "what the writeback wrote does not read back"
		fi
		[ $stacked = yes ] && { dmsetup --noudevsync remove top || fail "dmsetup --noudevsync remove top failed"; }
		stop_array
	done

	case $level in 5 | 6) continue ;; esac
	echo "--- RAID $level, member 1 dies under O_DIRECT writes"
	start_array $level
	fio --name=write $(fio_args "$dev" 0 64M randwrite 4k-256k) >/tmp/fio.out 2>&1 &
	writer=$!
	usleep 300000
	kill -0 $writer 2>/dev/null || fail "fio ended before the member died: nothing tested"
	kill_member
	finishes $writer 300 "fio" || { cat /tmp/fio.out; fail "fio verify failed with a dying member"; }
	member_failed_and_recorded
	fio_readback "$dev" 0 64M randwrite 4k-256k "O_DIRECT data lost when the member died"
	stop_array
done
wipe_superblocks $d0 $d1 $d2 $d3
unload_module
