# udev names arrays with graid's rules (tools/udev) under the real systemd-udevd that guest-init
# starts: /dev/graid/NAME and /dev/disk/by-id/graid-uuid-UUID point at /dev/graidN, carry I/O,
# survive a replayed change event (the rules ask graidctl) and go away when the array stops.
# What an array holds is known to udev as a disk's contents are (blkid's properties, the
# /dev/disk/by-uuid and by-label links, lsblk -f), from the moment mkfs closes it (the watch), as
# for its partitions; the array's device unit has its systemd alias (GRAID_UUID_HEX).
. /graid/lib.sh
pidof systemd-udevd >/dev/null || skip "systemd-udevd is not running"
need_members 2
set -- $members

expect_rc 0 graidctl create udevtest --level 1 $members
echo "$OUT"
dev=$(echo "$OUT" | grep -o '/dev/graid[0-9]*' | head -n 1)
[ -b "$dev" ] || fail "no block device in: $OUT"
expect_rc 0 graidctl --json detail "$dev"
uuid=$(json_field uuid "$OUT")
expect_match '^[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}$' "$uuid" "array UUID"
byname=/dev/graid/udevtest
byuuid=/dev/disk/by-id/graid-uuid-$uuid

check_links() {
	for l in $byname $byuuid; do
		[ -L $l ] || fail "$1: $l is missing; /dev/graid: $(ls /dev/graid 2>&1)"
		[ "$(readlink -f $l)" = "$dev" ] || fail "$1: $l points at $(readlink -f $l), not $dev"
	done
}
udevadm settle
check_links "after create"
echo "links: $byname $byuuid -> $dev"

# I/O through the name link reaches the array.
dd if=/dev/urandom of=/tmp/pattern bs=1M count=4 2>/dev/null
dd if=/tmp/pattern of=$byname bs=1M oflag=direct conv=fsync 2>/dev/null || fail "write via $byname failed"
dd if=$byname of=/tmp/back bs=1M count=4 iflag=direct 2>/dev/null || fail "read via $byname failed"
cmp -s /tmp/pattern /tmp/back || fail "data read back via $byname differs"
dd if=$byuuid of=/tmp/back bs=1M count=4 iflag=direct 2>/dev/null || fail "read via $byuuid failed"
cmp -s /tmp/pattern /tmp/back || fail "data read back via $byuuid differs"

# A replayed event has no GRAID_* variables: the links stay only if the rules import them.
udevadm trigger --action=change "$dev"
udevadm settle
check_links "after udevadm trigger"
props=$(udevadm info --query=property --name="$dev")
expect_match '^GRAID_LEVEL=raid1$' "$props" "properties after udevadm trigger"

expect_match "^GRAID_UUID_HEX=$(echo "$uuid" | tr -d -)\$" "$props" "properties after udevadm trigger"
expect_match "^SYSTEMD_ALIAS=/sys/subsystem/graid/arrays/$(echo "$uuid" | tr -d -)\$" "$props" "the device unit's alias"

# A filesystem made on the array: udev reads it again as mkfs closes the array (the watch), and
# the links fstab's UUID= and LABEL= go through lead to the array.
mkfs.ext4 -q -F -L graid-udev "$dev" || fail "mkfs.ext4 on $dev"
udevadm settle
fs_uuid=$(blkid -o value -s UUID "$dev")
[ -n "$fs_uuid" ] || fail "blkid finds no filesystem on $dev"
props=$(udevadm info --query=property --name="$dev")
expect_match '^ID_FS_TYPE=ext4$' "$props" "udev's properties after mkfs"
expect_match "^ID_FS_UUID=$fs_uuid\$" "$props" "udev's properties after mkfs"
for l in /dev/disk/by-uuid/$fs_uuid /dev/disk/by-label/graid-udev; do
	[ "$(readlink -f $l)" = "$dev" ] || fail "$l leads to '$(readlink -f $l)', not $dev"
done
[ "$(lsblk -n -d -o FSTYPE,UUID "$dev" | tr -s ' ')" = "ext4 $fs_uuid" ] ||
	fail "lsblk -f: $(lsblk -f "$dev")"
echo "filesystem: /dev/disk/by-uuid/$fs_uuid /dev/disk/by-label/graid-udev -> $dev"

# A partition of the array: its own filesystem's links, and its partition's.
echo 'label: gpt
size=8MiB, type=linux' | sfdisk -q "$dev" || fail "sfdisk on $dev"
udevadm settle
part=${dev}p1
[ -b "$part" ] || fail "no partition $part after sfdisk: $(ls /dev/graid*)"
mkfs.ext4 -q -F -L graid-part "$part" || fail "mkfs.ext4 on $part"
udevadm settle
part_uuid=$(blkid -o value -s UUID "$part")
entry=$(blkid -p -o value -s PART_ENTRY_UUID "$part")
for l in /dev/disk/by-uuid/$part_uuid /dev/disk/by-label/graid-part /dev/disk/by-partuuid/$entry; do
	[ "$(readlink -f $l)" = "$part" ] || fail "$l leads to '$(readlink -f $l)', not $part"
done
[ ! -e /dev/disk/by-uuid/$fs_uuid ] || fail "the whole array's old filesystem link stayed after sfdisk"
echo "partition: /dev/disk/by-uuid/$part_uuid /dev/disk/by-partuuid/$entry -> $part"
wipefs -q -a "$dev" || fail "wipefs $dev"
udevadm settle

expect_rc 0 graidctl stop $byname
udevadm settle
for l in $byname $byuuid /dev/disk/by-uuid/$part_uuid /dev/disk/by-label/graid-part; do
	[ ! -e $l ] && [ ! -L $l ] || fail "$l still exists after stop"
done
for m in $members; do
	expect_rc 0 graidctl zero-superblock "$m"
done
unload_module
