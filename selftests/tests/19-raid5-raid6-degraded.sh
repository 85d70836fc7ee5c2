# RAID 5 and RAID 6 losing members under load: members are dm-linear slices of the NVMe
# drives (two per drive, so 8-member arrays fit the VM); a slice switched to an `error` table
# while fio writes with crc32c verification fails that member, and the job still passes;
# degraded reads rebuild the lost chunks and degraded writes keep parity right (read back
# again). RAID 6 loses two. A RAID 5 that loses a second member fails reads rather than
# return anything (a read error parity cannot cover fails the read alone, md's last-copy rule),
# and the first write to reach it leaves the array taking no more writes. An optimal RAID 6 of 8 survives stop/assemble, and ext4 round-trips on it.
. /graid/lib.sh
need_members 4
modprobe dm-mod 2>/dev/null
# No udev here: dmsetup makes its own nodes and waits for nobody.
export DM_DISABLE_UDEV=1
set -- $members
half=$(($(cat /sys/class/block/${1#/dev/}/size) / 2))

# slice I: /dev/mapper/rI, half of NVMe drive I/2.
slice_table() {
	local disk=$(echo $members | cut -d' ' -f$(($1 / 2 + 1)))
	echo "0 $half linear $disk $((($1 % 2) * half))"
}
make_slices() {
	for i in 0 1 2 3 4 5 6 7; do
		dmsetup --noudevsync create r$i --table "$(slice_table $i)" || fail "dmsetup r$i"
	done
	# Without udev nobody else makes the nodes (a write to a missing one would make a file).
	dmsetup mknodes || fail "dmsetup mknodes failed"
	n=0
	for i in 0 1 2 3 4 5 6 7; do
		while [ ! -b /dev/mapper/r$i ]; do
			n=$((n + 1))
			[ $n -lt 100 ] || { ls -la /dev/mapper; dmsetup ls; dmsetup info r$i; fail "/dev/mapper/r$i never appeared"; }
			usleep 100000
		done
	done
}
remove_slices() {
	for i in 0 1 2 3 4 5 6 7; do dmsetup --noudevsync remove r$i || fail "dmsetup remove r$i"; done
	wipe_superblocks $members
}
# kill_slice I: every I/O to slice I fails from now on.
kill_slice() {
	dmsetup load r$1 --table "0 $half error" || fail "cannot load an error table into r$1"
	dmsetup --noudevsync resume r$1 &
	finishes $! 120 "dmsetup resume r$1" || fail "cannot kill r$1"
	echo "killed r$1"
}
slices() { for i in "$@"; do printf '/dev/mapper/r%s ' $i; done; }

make_slices
wipe_superblocks $(slices 0 1 2 3 4 5 6 7)

echo "--- RAID 5, 8 members, chunk 64K: one member dies under fio"
expect_rc 0 graidctl create d5 --level 5 --chunk 64K --write-zeroes $(slices 0 1 2 3 4 5 6 7)
dev=$(echo "$OUT" | grep -o '/dev/graid[0-9]*' | head -n 1)
# Paced (at least 4 s of writes) so the member dies while they run, however fast the VM is.
fio --name=write $(fio_args "$dev" 0 24M randwrite 4k-256k) --do_verify=0 --rate=6m \
	>/tmp/fio.out 2>&1 &
writer=$!
sleep 2
kill_slice 3
finishes $writer 300 "fio" || { cat /tmp/fio.out; fail "fio failed while a RAID 5 member died"; }
[ "$(array_state d5)" = degraded ] || fail "RAID 5 is $(array_state d5) after losing a member"
graidctl detail d5 | grep -E 'State|faulty'
echo 3 >/proc/sys/vm/drop_caches
fio_readback "$dev" 0 24M randwrite 4k-256k "degraded RAID 5 reads return other data"
fio_verify "$dev" 24M 16M write 4k-1m
echo "--- the same RAID 5 loses a second member: reads fail, nothing wrong is returned"
kill_slice 6
dd if="$dev" of=/dev/null bs=1M count=16 iflag=direct 2>/dev/null &&
	fail "a read across a RAID 5 with two members lost succeeded"
# (Whole stripes: written without reading, so they reach the dead member.)
dd if=/dev/zero of="$dev" bs=1M count=16 oflag=direct 2>/dev/null &&
	fail "a write across a RAID 5 with two members lost succeeded"
s=$(array_state d5)
[ "$s" = failed ] || [ "$s" = broken ] || fail "RAID 5 with two members lost is $s"
expect_rc 0 graidctl stop d5
remove_slices
make_slices
wipe_superblocks $(slices 0 1 2 3 4 5 6 7)

echo "--- RAID 6, 6 members, chunk 4K: two members die under fio"
expect_rc 0 graidctl create d6 --level 6 --chunk 4K --write-zeroes $(slices 0 1 2 3 4 5)
dev=$(echo "$OUT" | grep -o '/dev/graid[0-9]*' | head -n 1)
fio_verify "$dev" 0 16M randwrite 4k-128k &
writer=$!
sleep 2
kill_slice 1
sleep 2
kill_slice 4
finishes $writer 300 "fio" || fail "fio failed while two RAID 6 members died"
echo 3 >/proc/sys/vm/drop_caches
# (fio may end before it touches the second dead member: the read-back then finds it.)
fio_readback "$dev" 0 16M randwrite 4k-128k "RAID 6 without two members returns other data"
[ "$(array_state d6)" = degraded ] || fail "RAID 6 is $(array_state d6) after losing two members"
n=$(graidctl --json detail d6 | grep -c '"state": "faulty"')
[ "$n" = 2 ] || fail "$n members faulty, expected 2"
fio_verify "$dev" 16M 8M randwrite 4k-64k
expect_rc 0 graidctl stop d6
remove_slices
make_slices
wipe_superblocks $(slices 0 1 2 3 4 5 6 7)

echo "--- RAID 6, 8 members, chunk 512K: stop, assemble, ext4"
expect_rc 0 graidctl create e6 --level 6 --chunk 512K --write-zeroes $(slices 0 1 2 3 4 5 6 7)
dev=$(echo "$OUT" | grep -o '/dev/graid[0-9]*' | head -n 1)
fio_verify "$dev" 0 24M randwrite 4k-1m
expect_rc 0 graidctl stop e6
expect_rc 0 graidctl assemble $(slices 7 0 6 1 5 2 4 3)
dev=$(graidctl detail e6 | grep -o '/dev/graid[0-9]*' | head -n 1)
fio_readback "$dev" 0 24M randwrite 4k-1m "RAID 6 data lost across stop/assemble"
mkfs.ext4 -q -F "$dev" || fail "mkfs.ext4 failed"
mkdir -p /mnt/r6
mount -t ext4 "$dev" /mnt/r6 || fail "mount failed"
dd if=/dev/urandom of=/mnt/r6/a bs=1M count=12 2>/dev/null || fail "write a failed"
dd if=/dev/urandom of=/mnt/r6/b bs=4k count=300 2>/dev/null || fail "write b failed"
sums=$(cd /mnt/r6 && sha256sum a b)
umount /mnt/r6 || fail "umount failed"
expect_rc 0 graidctl stop e6
expect_rc 0 graidctl assemble $(slices 0 1 2 3 4 5 6 7)
dev=$(graidctl detail e6 | grep -o '/dev/graid[0-9]*' | head -n 1)
e2fsck -fn "$dev" >/tmp/fsck.out 2>&1 || { cat /tmp/fsck.out; fail "e2fsck finds errors"; }
mount -t ext4 "$dev" /mnt/r6 || fail "mount after assemble failed"
[ "$(cd /mnt/r6 && sha256sum a b)" = "$sums" ] || fail "files changed across stop/assemble"
umount /mnt/r6
expect_rc 0 graidctl stop e6
remove_slices
unload_module
