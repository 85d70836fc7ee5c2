# raid_gpu loads and unloads cleanly 20 times: the control device comes and goes with it,
# root-only, and nothing leaks (kmemleak) or warns (dmesg, checked by the runner); then three
# create/stop/rmmod cycles, each rmmod right after the stop.
. /graid/lib.sh
unload_module
i=0
while [ $i -lt 20 ]; do
	modprobe raid_gpu || fail "load $i: modprobe failed"
	[ -c /dev/graid-control ] || fail "load $i: no /dev/graid-control"
	mode=$(stat -c '%a %U %u' /dev/graid-control)
	[ "$mode" = "600 root 0" ] || fail "load $i: /dev/graid-control is '$mode', expected '600 root 0'"
	rmmod raid_gpu || fail "unload $i: rmmod failed"
	[ ! -e /dev/graid-control ] || fail "unload $i: /dev/graid-control still there"
	module_loaded && fail "unload $i: still in /proc/modules"
	i=$((i + 1))
done
dmesg | grep -q 'raid_gpu 0.1.0 loaded' || fail "no load message in dmesg"
echo "20 load/unload cycles"

# An array's sysfs directories are released by the kobject core, possibly after the array
# stopped (the debug kernel's DEBUG_KOBJECT_RELEASE delays it by seconds): an rmmod right after
# a stop must wait for those releases, which run module code (KASAN reports the freed text).
need_members 2
set -- $members
i=0
while [ $i -lt 3 ]; do
	expect_rc 0 graidctl create kr --level 1 --write-zeroes $1 $2
	dev=$(array_dev "$OUT")
	cat /sys/block/${dev#/dev/}/graid/rd0/state >/dev/null || fail "create/stop $i: no rd0/state"
	expect_rc 0 graidctl stop kr
	udevadm settle
	rmmod raid_gpu || fail "create/stop $i: rmmod right after the stop failed"
	module_loaded && fail "create/stop $i: still in /proc/modules"
	load_module
	wipe_superblocks $1 $2
	i=$((i + 1))
done
echo "3 create/stop/rmmod cycles"
unload_module
