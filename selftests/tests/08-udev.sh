# udev names arrays with graid's rules (tools/udev) under the real systemd-udevd that guest-init
# starts: /dev/graid/NAME and /dev/disk/by-id/graid-uuid-UUID point at /dev/graidN, carry I/O,
# survive a replayed change event (the rules ask graidctl) and go away when the array stops.
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

expect_rc 0 graidctl stop $byname
udevadm settle
for l in $byname $byuuid; do
	[ ! -e $l ] && [ ! -L $l ] || fail "$l still exists after stop"
done
for m in $members; do
	expect_rc 0 graidctl zero-superblock "$m"
done
unload_module
