# The module cannot be unloaded while its control device is open, nor while an array runs (as
# md's personality modules refuse: "in use"), and unloads once both are gone.
. /graid/lib.sh
load_module
exec 3<>/dev/graid-control || fail "cannot open /dev/graid-control"
rmmod raid_gpu 2>/tmp/rmmod.err && fail "rmmod succeeded while /dev/graid-control was open"
echo "rmmod while open: $(cat /tmp/rmmod.err)"
module_loaded || fail "module gone while open"
exec 3>&-

echo "--- an array running, nobody holding it open"
need_members 2
set -- $members
expect_rc 0 graidctl create un --level 1 --write-zeroes $1 $2
dev=$(array_dev "$OUT")
echo unloaded >/tmp/pattern
dd if=/tmp/pattern of="$dev" bs=4096 count=1 conv=sync oflag=direct 2>/dev/null || fail "write failed"
udevadm settle
[ "$(cat /sys/module/raid_gpu/refcnt)" -ge 1 ] ||
	fail "a running array holds no module reference: refcnt $(cat /sys/module/raid_gpu/refcnt)"
rmmod raid_gpu 2>/tmp/rmmod.err && fail "rmmod succeeded while an array ran"
expect_match "in use|temporarily unavailable" "$(cat /tmp/rmmod.err)" "rmmod with an array running"
echo "rmmod with an array running: $(cat /tmp/rmmod.err)"
head -c 8 "$dev" | grep -q unloaded || fail "the array's data after the refused rmmod"
expect_rc 0 graidctl --json detail un
expect_match '"state": *"optimal"' "$OUT" "the array after the refused rmmod"
expect_rc 0 graidctl stop un
udevadm settle
rmmod raid_gpu || fail "rmmod failed once the array stopped"
wipe_superblocks $1 $2
