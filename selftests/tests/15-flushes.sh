# Flush ordering, counted at the members (/sys/block/*/stat field 16: flushes completed):
# - superblock writes are PREFLUSH|FUA: the "clean" superblock a stop writes is preceded by a
#   flush of every member (FUA alone would make only that block durable, not the data
#   acknowledged before it);
# - a PREFLUSH|FUA write (a journal commit) flushes each member once: the block layer sends
#   the array the preflush as a flush of its own, so the members' copies of the data carry FUA
#   only (they used to carry PREFLUSH too, flushing every member twice).
. /graid/lib.sh
# The array stays dirty through the count: on a slow kernel (the debug one takes 300 ms an fsync)
# an idle spell between two fsyncs would mark it clean and dirty again, and those superblock
# updates flush the members too.
load_module_with safe_mode_delay_ms=60000
need_members 2
set -- $members
d0=$1 d1=$2

flushes() { awk '{ print $16 }' /sys/block/${1#/dev/}/stat; }

echo "--- a stop flushes every member before the clean superblock"
expect_rc 0 graidctl create fl --level 1 --assume-clean $d0 $d1
dev=$(echo "$OUT" | grep -o '/dev/graid[0-9]*' | head -n 1)
dd if=/dev/urandom of=$dev bs=1M count=4 oflag=direct 2>/dev/null || fail "write failed"
before0=$(flushes $d0) before1=$(flushes $d1)
expect_rc 0 graidctl stop fl
after0=$(flushes $d0) after1=$(flushes $d1)
echo "member flushes across the stop: $before0 -> $after0, $before1 -> $after1"
[ "$after0" -gt "$before0" ] && [ "$after1" -gt "$before1" ] ||
	fail "the stop's superblock write did not flush the members"

echo "--- one member flush per PREFLUSH|FUA write (ext4 journal commits)"
expect_rc 0 graidctl assemble $d0 $d1
dev=$(graidctl detail fl | grep -o '/dev/graid[0-9]*' | head -n 1)
mkfs.ext4 -q -F "$dev" || fail "mkfs.ext4 failed"
mkdir -p /mnt/fl
mount -t ext4 -o barrier=1 "$dev" /mnt/fl || fail "mount failed"
sync
array_before=$(flushes $dev) before0=$(flushes $d0) before1=$(flushes $d1)
i=0
while [ $i -lt 20 ]; do
	dd if=/dev/urandom of=/mnt/fl/f bs=4k count=1 conv=fsync 2>/dev/null || fail "fsync $i failed"
	i=$((i + 1))
done
array_flushes=$(($(flushes $dev) - array_before))
m0=$(($(flushes $d0) - before0)) m1=$(($(flushes $d1) - before1))
echo "20 fsyncs: $array_flushes flushes at the array, $m0 and $m1 at the members"
[ "$array_flushes" -ge 20 ] || fail "fewer array flushes ($array_flushes) than fsyncs: nothing to count"
for m in $m0 $m1; do
	[ "$m" -le $((array_flushes + 2)) ] || fail "members flushed $m times for $array_flushes array flushes"
done
umount /mnt/fl || fail "umount failed"
expect_rc 0 graidctl stop fl

wipe_superblocks $d0 $d1
unload_module
