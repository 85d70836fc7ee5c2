# A RAID 5 and a RAID 0 restriped online (graidctl grow --raid-devices/--chunk,
# GRAID_IOC_RESHAPE; issue 46 item 2, md's --grow), on 32 MiB dm-linear slices:
# - RAID 5 of three grown to four with --add while fio writes: detail shows the restripe, wait
#   waits for it, sysfs says reshape (md's sync_action, reshape_position), every write before
#   and during reads back, the array takes the fourth
#   member's room, check 0; the new room takes writes; the monitor reports reshape-started,
#   its steps and reshape-finished;
# - a stop in the middle of a second restripe (a chunk change) and an assemble: it goes on from
#   the position the superblocks recorded and ends, everything reads back, check 0;
# - md's raid5 over the four members, at the new data offset and chunk, reads every write back
#   and its check finds 0 mismatches: the result is md's layout;
# - RAID 0 onto another chunk: everything reads back, and md's raid0 reads it too;
# - RAID 5s with a write-intent bitmap and with a partial parity log (graid's defaults) grown
#   under fio: both kept in both geometries, the log's ring shortened to make room for the
#   data, everything reads back, check 0;
# - refusals with their reason, nothing changed: fewer members, a degraded array, no spare for
#   the new member, a chunk that does not divide the members' data areas.
. /graid/lib.sh
trap 'mdadm --stop /dev/md0 >/dev/null 2>&1' EXIT

need_members 4
export DM_DISABLE_UDEV=1
set -- $members
slice=65536 # 32 MiB
for i in 0 1 2 3; do
	eval d=\$$((i + 1))
	dmsetup --noudevsync create g$i --table "0 $slice linear $d 0" || fail "dmsetup create g$i"
done
g0=/dev/mapper/g0 g1=/dev/mapper/g1 g2=/dev/mapper/g2 g3=/dev/mapper/g3
wipe_superblocks $g0 $g1 $g2 $g3
# What the fourth drive held before: the restripe writes all of it.
dd if=/dev/urandom of=$g3 bs=1M seek=1 count=30 oflag=direct 2>/dev/null || fail "old content"

echo "--- RAID 5 of three grown to four under fio"
expect_rc 0 graidctl create g5 --level 5 --chunk 64K --bitmap none --consistency-policy resync --write-zeroes $g0 $g1 $g2
dev=$(array_dev "$OUT")
expect_rc 0 graidctl --json detail g5
size_before=$(json_field size_sectors "$OUT")
data_kib=$(($(json_field member_data_bytes "$OUT") / 1024))
fio_verify $dev 0 16M write 1m-1m
# A slow pace keeps the restripe going while fio writes.
expect_rc 0 graidctl set-speed g5 --min 1M --max 2M
# The monitor reports the restripe's start, steps and end.
printf '#!/bin/sh\necho "$*" >>/tmp/events\n' >/tmp/program
chmod +x /tmp/program
: >/tmp/events
graidctl monitor --delay 1 --program /tmp/program >/tmp/monitor.out 2>&1 &
monitor=$!
fio --name=during $(fio_args $dev 20M 12M randwrite 4k-64k) --do_verify=0 >/tmp/fio-during.out 2>&1 &
fio_pid=$!
usleep 300000
expect_rc 0 graidctl grow g5 --raid-devices 4 --add $g3
echo "$OUT"
expect_match 'restriping .* from 3 members, chunk 64 KiB to 4 members, chunk 64 KiB, online' "$OUT" "grow's report"
expect_rc 0 graidctl detail g5
expect_match 'Reshape : [0-9.]*% of .* \(3 -> 4 members' "$OUT" "detail during the restripe"
expect_rc 0 graidctl --json detail g5
expect_match '"raid_devices": *4' "$OUT" "detail's member count during the restripe"
expect_match '"reshape": *\{' "$OUT" "detail --json's reshape"
sys=/sys/block/${dev#/dev/}/graid
[ "$(cat $sys/sync_action)" = reshape ] || fail "sysfs sync_action during the restripe: $(cat $sys/sync_action)"
expect_match '^[0-9]+$' "$(cat $sys/reshape_position)" "sysfs reshape_position during the restripe"
expect_match '^[0-9]+ / [0-9]+$' "$(cat $sys/sync_completed)" "sysfs sync_completed during the restripe"
[ "$(json_field size_sectors "$OUT")" = "$size_before" ] || fail "the size changed before the restripe ended"
expect_rc 1 graidctl check g5
finishes $fio_pid 300 "fio during the restripe" || { cat /tmp/fio-during.out; fail "fio during the restripe failed"; }
expect_rc 0 graidctl set-speed g5 --min 100M --max 0
wait_reshaped g5
expect_match '"raid_devices": *4' "$OUT" "the member count after the restripe"
n=0
until grep -q '^reshape-finished' /tmp/events; do
	n=$((n + 1)); [ $n -le 100 ] || { cat /tmp/events /tmp/monitor.out; fail "no reshape-finished event"; }
	usleep 50000
done
kill $monitor
expect_match "reshape-started $dev" "$(cat /tmp/events)" "the monitor's reshape-started"
expect_match "reshape-[2468]0 $dev" "$(cat /tmp/events)" "the monitor's reshape steps"
[ "$(cat $sys/reshape_position)" = none ] || fail "sysfs reshape_position after the restripe"
fio_readback $dev 0 16M write 1m-1m "data written before the restripe does not read back"
fio_readback $dev 20M 12M randwrite 4k-64k "data written during the restripe does not read back"
expect_rc 0 graidctl --json detail g5
size_after=$(json_field size_sectors "$OUT")
[ "$size_after" -eq $((size_before / 2 * 3)) ] || fail "size $size_after after the restripe, want $((size_before / 2 * 3))"
[ "$(blockdev --getsz $dev)" = "$size_after" ] || fail "the disk's capacity did not follow"
expect_match '"state": *"optimal"' "$OUT" "optimal after the restripe"
# A resync of the new room, then the parity checks clean everywhere.
expect_rc 0 graidctl wait g5
expect_rc 0 graidctl check g5 --wait
expect_match 'check finished: 0 mismatched sectors' "$OUT" "parity after the restripe"
fio_verify $dev $((size_before * 512 - 2 * 1048576)) 4M randwrite 4k-64k

echo "--- a stop in the middle of a chunk change, and the assembly that takes it up"
expect_rc 0 graidctl set-speed g5 --min 128K --max 128K
expect_rc 0 graidctl grow g5 --chunk 32K
expect_match 'chunk 64 KiB to 4 members, chunk 32 KiB' "$OUT" "the chunk change's report"
usleep 1500000
expect_rc 0 graidctl stop g5
expect_rc 0 graidctl examine $g0
expect_match 'Reshape' "$OUT" "examine of a member mid-restripe"
expect_rc 0 graidctl assemble g5 $g0 $g1 $g2 $g3
dev=$(array_dev "$OUT")
expect_rc 0 graidctl detail g5
expect_match 'Reshape : ' "$OUT" "the restripe after the assembly"
expect_rc 0 graidctl set-speed g5 --min 100M --max 0
wait_reshaped g5
expect_match '"chunk_sectors": *64' "$OUT" "the chunk after the assembly's restripe"
fio_readback $dev 0 16M write 1m-1m "data does not read back after the chunk change"
fio_readback $dev 20M 12M randwrite 4k-64k "data written during the grow does not read back after the chunk change"
expect_rc 0 graidctl check g5 --wait
expect_match 'check finished: 0 mismatched sectors' "$OUT" "parity after the chunk change"
offset_kib=$(data_offset_kib $g0)
expect_rc 0 graidctl stop g5

echo "--- md's raid5 reads what graid restriped, and its check agrees"
mdadm --create /dev/md0 --run --level=5 --raid-devices=4 --metadata=1.2 --chunk=32 \
	--layout=left-symmetric --data-offset=${offset_kib}K --size=$data_kib --assume-clean \
	--bitmap=none $g0 $g1 $g2 $g3 >/tmp/create.out 2>&1 ||
	{ cat /tmp/create.out; fail "mdadm --create failed"; }
fio_readback /dev/md0 0 16M write 1m-1m "md reads other data than graid wrote before the restripes"
fio_readback /dev/md0 20M 12M randwrite 4k-64k "md reads other data than graid wrote during the grow"
md_check_and_stop "after graid's restripes" $g0 $g1 $g2 $g3

echo "--- RAID 0 onto another chunk"
expect_rc 0 graidctl create g0z --level 0 --chunk 64K $g0 $g1 $g2
dev=$(array_dev "$OUT")
fio_verify $dev 0 24M randwrite 4k-64k
expect_rc 0 graidctl grow g0z --chunk 128K
wait_reshaped g0z
expect_match '"chunk_sectors": *256' "$OUT" "raid0's chunk after the restripe"
fio_readback $dev 0 24M randwrite 4k-64k "raid0 data does not read back after the chunk change"
offset_kib=$(data_offset_kib $g0)
expect_rc 0 graidctl stop g0z
mdadm --create /dev/md0 --run --level=0 --raid-devices=3 --metadata=1.2 --chunk=128 \
	--data-offset=${offset_kib}K $g0 $g1 $g2 >/tmp/create.out 2>&1 ||
	{ cat /tmp/create.out; fail "mdadm --create raid0 failed"; }
fio_readback /dev/md0 0 24M randwrite 4k-64k "md's raid0 reads other data than graid restriped"
mdadm --stop /dev/md0 >/dev/null 2>&1 || fail "mdadm --stop failed"
mdadm --zero-superblock $g0 $g1 $g2
wipe_superblocks $g0 $g1 $g2 $g3

echo "--- refusals"
expect_rc 0 graidctl create g6 --level 6 --chunk 64K --bitmap none --consistency-policy resync --write-zeroes $g0 $g1 $g2 $g3
expect_rc 1 graidctl grow g6 --raid-devices 3
expect_match 'onto fewer members' "$OUT" "fewer members"
expect_rc 1 graidctl grow g6 --raid-devices 5
expect_match 'too few spares for the new members' "$OUT" "no spare for the new member"
# Members shrunk to an odd number of 64 KiB chunks: a 128 KiB chunk would lose the array's end.
expect_rc 0 graidctl --json detail g6
mkib=$(($(json_field member_data_bytes "$OUT") / 1024))
expect_rc 0 graidctl grow g6 --size $(((mkib / 64 - 2) / 2 * 2 * 64 + 64))K --force
expect_rc 1 graidctl grow g6 --chunk 128K
expect_match 'do not divide' "$OUT" "a chunk that does not divide the members"
expect_rc 0 graidctl fail g6 $g3
expect_rc 1 graidctl grow g6 --chunk 32K
expect_match 'not optimal' "$OUT" "a degraded array"
expect_rc 0 graidctl --json detail g6
expect_match '"chunk_sectors": *128' "$OUT" "a refused restripe changed the chunk"
expect_rc 0 graidctl stop g6
wipe_superblocks $g0 $g1 $g2 $g3

# journal_sectors: the partial parity log's size in g0's superblock (examine), sectors.
journal_sectors() {
	expect_rc 0 graidctl examine $g0
	echo "$OUT" | sed -n 's/.*Journal : partial parity log, \([0-9]*\) sectors.*/\1/p'
}

echo "--- RAID 5s with a write-intent bitmap, and with a partial parity log, grown under fio"
for kind in bitmap log; do
	case $kind in
	bitmap) policy="--bitmap internal --consistency-policy resync" ;;
	log) policy="--bitmap none --consistency-policy ppl" ;;
	esac
	expect_rc 0 graidctl create gk --level 5 --chunk 64K $policy --write-zeroes $g0 $g1 $g2
	dev=$(array_dev "$OUT")
	[ $kind = log ] && log_before=$(journal_sectors)
	fio_verify $dev 0 8M write 1m-1m
	expect_rc 0 graidctl set-speed gk --min 2M --max 4M
	fio --name=during $(fio_args $dev 10M 8M randwrite 4k-64k) --do_verify=0 >/tmp/fio-during.out 2>&1 &
	fio_pid=$!
	usleep 200000
	expect_rc 0 graidctl grow gk --raid-devices 4 --add $g3
	expect_rc 0 graidctl detail gk
	expect_match 'Reshape : ' "$OUT" "detail during the $kind array's restripe"
	finishes $fio_pid 300 "fio during the $kind array's restripe" ||
		{ cat /tmp/fio-during.out; fail "fio during the $kind array's restripe failed"; }
	expect_rc 0 graidctl set-speed gk --min 100M --max 0
	wait_reshaped gk
	case $kind in
	bitmap) expect_match '"bitmap": *\{' "$OUT" "the bitmap after the restripe" ;;
	log) expect_match '"ppl": *\{' "$OUT" "the log after the restripe" ;;
	esac
	entries=$(json_field entries "$OUT")
	fio_readback $dev 0 8M write 1m-1m "the $kind array's data written before its restripe"
	fio_readback $dev 10M 8M randwrite 4k-64k "the $kind array's data written during its restripe"
	# Writes after the end take the bitmap and the log again.
	fio_verify $dev 20M 4M randwrite 4k-16k
	expect_rc 0 graidctl wait gk
	expect_rc 0 graidctl check gk --wait
	expect_match 'check finished: 0 mismatched sectors' "$OUT" "parity after the $kind array's restripe"
	if [ $kind = log ]; then
		# No room before the data but the log's: its ring gave its end to the data.
		log_after=$(journal_sectors)
		[ "$log_after" -lt "$log_before" ] && [ "$log_after" -ge 536 ] ||
			fail "the log's area went from $log_before to $log_after sectors"
		expect_rc 0 graidctl --json detail gk
		[ "$(json_field entries "$OUT")" -gt "$entries" ] || fail "nothing logged after the restripe"
	fi
	expect_rc 0 graidctl stop gk
	wipe_superblocks $g0 $g1 $g2 $g3
done
for i in 0 1 2 3; do dmsetup --noudevsync remove g$i; done
unload_module
