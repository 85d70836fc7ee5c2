# A filesystem on an array: mkfs.ext4, mount, files with checksums, unmount, stop, assemble,
# mount again and the checksums match. An array with a mounted filesystem refuses to stop.
. /graid/lib.sh
need_members 4
set -- $members
expect_rc 0 graidctl create fs --level 10 --chunk 128K "$@"
dev=$(echo "$OUT" | grep -o '/dev/graid[0-9]*' | head -n 1)
mkfs.ext4 -q -F "$dev" || fail "mkfs.ext4 failed"
mkdir -p /mnt/fs
mount -t ext4 "$dev" /mnt/fs || fail "mount failed"
i=0
while [ $i -lt 6 ]; do
	dd if=/dev/urandom of=/mnt/fs/file$i bs=64k count=$((i * 16 + 3)) 2>/dev/null || fail "write file$i failed"
	i=$((i + 1))
done
(cd /mnt/fs && sha256sum file*) >/tmp/sums
expect_rc 1 graidctl stop fs
echo "stop while mounted: $OUT"
umount /mnt/fs || fail "umount failed"
expect_rc 0 graidctl stop fs
expect_rc 0 graidctl assemble "$@"
dev=$(echo "$OUT" | grep -o '/dev/graid[0-9]*' | head -n 1)
echo 3 >/proc/sys/vm/drop_caches
mount -t ext4 "$dev" /mnt/fs || fail "mount after assemble failed"
(cd /mnt/fs && sha256sum -c /tmp/sums) || fail "file checksums differ after stop/assemble"
umount /mnt/fs
expect_rc 0 graidctl stop fs
wipe_superblocks "$@"
unload_module
