# raid_gpu loads and unloads cleanly 20 times: the control device comes and goes with it,
# root-only, and nothing leaks (kmemleak) or warns (dmesg, checked by the runner).
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
