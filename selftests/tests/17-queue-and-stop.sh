# The array's queue and its life around STOP:
# - the queue: one hardware queue per CPU, no I/O scheduler, STACKING, no NOWAIT (queue_rq may
#   sleep), no secure erase or write zeroes inherited from the members;
# - lsblk's stack: the members list the array as their holder, the array lists its slaves;
# - zoned devices are refused as members;
# - STOP vs open: an open racing a stop either wins (the stop says busy) or fails at open,
#   never an open that then sees I/O errors;
# - a member that hangs stalls only its own array: while a stop waits on it, other ioctls
#   (list, detail, create) answer.
. /graid/lib.sh
need_members 4
set -- $members
d0=$1 d1=$2 d2=$3 d3=$4
export DM_DISABLE_UDEV=1

echo "--- the queue"
expect_rc 0 graidctl create q --level 10 --chunk 64K --assume-clean $d0 $d1 $d2 $d3
dev=$(array_dev "$OUT")
name=${dev#/dev/}
q=/sys/block/$name/queue
cpus=$(nproc)
hwqs=$(ls -d /sys/block/$name/mq/* | wc -l)
[ "$hwqs" = "$cpus" ] || fail "$hwqs hardware queues for $cpus CPUs"
expect_match '\[none\]' "$(cat $q/scheduler)" "default scheduler"
# No NOWAIT: an RWF_NOWAIT read is refused (EOPNOTSUPP), where a member takes it.
nowait_read() {
	fio --name=nowait --filename="$1" --rw=read --bs=4k --size=64k --direct=1 \
		--ioengine=pvsync2 --nowait=1 >/tmp/nowait.out 2>&1
}
nowait_read $d0 || { cat /tmp/nowait.out; fail "a member refused an RWF_NOWAIT read"; }
nowait_read "$dev" && fail "the array took an RWF_NOWAIT read (it advertises NOWAIT)"
expect_match 'not supported' "$(cat /tmp/nowait.out)" "RWF_NOWAIT refusal"
[ "$(cat $q/write_zeroes_max_bytes)" = 0 ] || fail "write zeroes inherited"
mount -t debugfs none /sys/kernel/debug 2>/dev/null
flags=$(cat /sys/kernel/debug/block/$name/hctx0/flags 2>/dev/null)
expect_match 'STACKING' "$flags" "hctx flags"
expect_match 'BLOCKING' "$flags" "hctx flags"
blkdiscard -s -o 0 -l 65536 "$dev" 2>/dev/null && fail "a secure erase was accepted"

echo "--- the stack in sysfs"
for m in $d0 $d1 $d2 $d3; do
	[ -e /sys/block/${m#/dev/}/holders/$name ] || fail "${m#/dev/} does not list $name as its holder"
	[ -e /sys/block/$name/slaves/${m#/dev/} ] || fail "$name does not list ${m#/dev/} as a slave"
done
expect_rc 0 graidctl stop q
[ -e /sys/block/${d0#/dev/}/holders/$name ] && fail "the holder link outlived the array"

echo "--- zoned members are refused"
if modprobe null_blk nr_devices=1 zoned=1 zone_size=4 gb=1 memory_backed=1 2>/dev/null && [ -b /dev/nullb0 ]; then
	expect_rc 1 graidctl create zoned --level 1 --force $d0 /dev/nullb0
	echo "$OUT"
	expect_match 'zoned' "$OUT" "zoned refusal"
	rmmod null_blk
else
	fail "cannot make a zoned null_blk device"
fi

echo "--- STOP racing opens: no open ever sees the array vanish under it"
wipe_superblocks $d0 $d1
i=0
while [ $i -lt 15 ]; do
	wipe_superblocks $d0 $d1
	expect_rc 0 graidctl create race --level 1 --assume-clean $d0 $d1
	dev=$(array_dev "$OUT")
	: >/tmp/race.err
	: >/tmp/race.on
	(
		while [ -e /tmp/race.on ]; do
			dd if=$dev of=/dev/null bs=4k count=16 iflag=direct 2>>/tmp/race.err
		done
	) &
	opener=$!
	stopped=
	for t in $(seq 1 200); do
		if graidctl stop race >/dev/null 2>&1; then stopped=1; break; fi
	done
	rm -f /tmp/race.on
	wait $opener
	[ -n "$stopped" ] || fail "stop never won against the opener (round $i)"
	if grep -q 'I/O error' /tmp/race.err; then
		cat /tmp/race.err | sort | uniq -c
		fail "an open that succeeded then saw I/O errors (round $i)"
	fi
	i=$((i + 1))
done
echo "15 rounds: opens failed cleanly or the stop waited"

echo "--- a hung member stalls only its own array"
wipe_superblocks $d0 $d1 $d2 $d3
sectors=$(cat /sys/class/block/${d1#/dev/}/size)
dmsetup --noudevsync create hang1 --table "0 $sectors linear $d1 0" || fail "dmsetup create failed"
expect_rc 0 graidctl create stuck --level 1 --assume-clean $d0 /dev/mapper/hang1
expect_rc 0 graidctl create other --level 1 --assume-clean $d2 $d3
dmsetup suspend hang1 || fail "dmsetup suspend failed"
graidctl stop stuck >/tmp/stop.out 2>&1 &
stopper=$!
sleep 2
kill -0 $stopper 2>/dev/null || fail "the stop did not wait for the suspended member: $(cat /tmp/stop.out)"
timeout 20 graidctl list >/tmp/list.out 2>&1 || fail "LIST stalled behind a hung member's stop"
timeout 20 graidctl detail other >/dev/null 2>&1 || fail "DETAIL stalled behind a hung member's stop"
expect_rc 0 timeout 20 graidctl stop other
dmsetup resume hang1 || fail "dmsetup resume failed"
wait $stopper || fail "the stop failed once the member came back: $(cat /tmp/stop.out)"
dmsetup --noudevsync remove hang1 || fail "dmsetup remove failed"

wipe_superblocks $d0 $d1 $d2 $d3
unload_module
