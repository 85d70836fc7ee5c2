# RAID 1 and 10 with one member returning read errors (dm-dust under it): verified reads keep
# being served from the other copy, the member is marked faulty (superblock events bumped),
# writes and reads go on degraded, and the array reports itself degraded.
. /graid/lib.sh
need_members 4
set -- $members
d0=$1 d1=$2 d2=$3 d3=$4
export DM_DISABLE_UDEV=1
modprobe dm-dust || fail "cannot load dm-dust"

readback() { fio_readback "$1" 0 32M randwrite 4k-256k "$2"; }

for level in 1 10; do
	echo "--- RAID $level, member 1 behind dm-dust"
	wipe_superblocks $d0 $d1 $d2 $d3
	sectors=$(cat /sys/class/block/${d1#/dev/}/size)
	dmsetup --noudevsync create dust1 --table "0 $sectors dust $d1 0 4096" || fail "dmsetup create failed"
	dust=/dev/mapper/dust1
	[ -b $dust ] || fail "no $dust"
	if [ $level = 1 ]; then members="$d0 $dust"; else members="$d0 $dust $d2 $d3"; fi
	expect_rc 0 graidctl create "mf$level" --level $level $members
	dev=$(echo "$OUT" | grep -o '/dev/graid[0-9]*' | head -n 1)
	fio_verify "$dev" 0 32M randwrite 4k-256k
	expect_rc 0 graidctl --json detail "mf$level"
	events_before=$(json_field events "$OUT")

	# Bad blocks all over the first 32 MiB of member 1's data area (2 MiB = block 512).
	for b in 520 700 1100 1800 2600 3300 4000 4500 5200 6000 7000 8000 8700; do
		dmsetup message dust1 0 addbadblock $b >/dev/null || fail "addbadblock $b failed"
	done
	dmsetup message dust1 0 enable >/dev/null || fail "dust enable failed"

	readback "$dev" "verified read-back failed with a failing member"
	readback "$dev" "second verified read-back failed"
	expect_rc 0 graidctl --json detail "mf$level"
	detail=$OUT
	expect_match '"state": "degraded"' "$detail" "array state"
	expect_match '"state": "faulty"' "$detail" "member state"
	events_after=$(json_field events "$detail")
	[ "$events_after" -gt "$events_before" ] || fail "events did not advance ($events_before -> $events_after)"
	expect_rc 0 graidctl detail "mf$level"
	echo "$OUT"

	# Degraded writes and reads stay correct.
	fio_verify "$dev" 32M 16M randwrite 4k-128k
	echo 3 >/proc/sys/vm/drop_caches
	# The healthy members' superblocks recorded the failure.
	expect_rc 0 graidctl examine $d0
	echo "$OUT" | grep -i -E 'events|faulty' | head -n 5
	expect_match '[Ff]aulty' "$OUT" "superblock slot table"

	expect_rc 0 graidctl stop "mf$level"
	dmsetup --noudevsync remove dust1 || fail "dmsetup remove failed"
done
wipe_superblocks $d0 $d1 $d2 $d3
unload_module
kmemleak_check
