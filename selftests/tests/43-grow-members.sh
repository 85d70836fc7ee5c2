# A mirror's copies change online (graidctl grow --raid-devices, GRAID_IOC_RESHAPE; issue 46
# item 2, md's --grow --raid-devices on RAID 1), on 64 MiB dm-linear slices:
# - RAID 1 of two grown to three with --add while fio writes: the new device is rebuilt into the
#   new role, every write before and during reads back, check 0, sysfs grows rd2, a stop and
#   assemble keep three members;
# - fewer: refused while every member is in the array and while one failed but was not removed;
#   once member 1 was removed, member 2 takes its place (md's compaction): optimal, rd2 gone, the
#   data intact, and the array assembles from copy 0 and the moved member, check 0;
# - md's raid1 over the two members left reads every write back, and md's check finds 0
#   mismatches: the copies are md's layout;
# - refusals with their reason, nothing changed: more --add devices than new roles, a count
#   out of range (other levels restripe: 44-restripe);
# - a new array on members of 2 GiB starts its data 4 MiB in: 2 MiB of reshape headroom.
. /graid/lib.sh
# A failing test leaves md stopped, so the runner's clean-up can stop the array and free the slices.
trap 'mdadm --stop /dev/md0 >/dev/null 2>&1' EXIT

need_members 3
export DM_DISABLE_UDEV=1
set -- $members
slice=131072 # 64 MiB
for i in 0 1 2; do
	eval d=\$$((i + 1))
	dmsetup --noudevsync create g$i --table "0 $slice linear $d 0" || fail "dmsetup create g$i"
done
g0=/dev/mapper/g0 g1=/dev/mapper/g1 g2=/dev/mapper/g2
wipe_superblocks $g0 $g1 $g2
# What the third drive held before: the rebuild must replace all of it.
dd if=/dev/urandom of=$g2 bs=1M seek=2 count=40 oflag=direct 2>/dev/null || fail "old content"

echo "--- RAID 1 of two grown to three under fio"
expect_rc 0 graidctl create gc --level 1 --write-zeroes $g0 $g1
dev=$(array_dev "$OUT")
fio_verify $dev 0 24M write 1m-1m
# Writes go on while the new copy is rebuilt: the slowest pace keeps the rebuild running.
expect_rc 0 graidctl set-speed gc --min 1M --max 4M
fio --name=during $(fio_args $dev 32M 16M randwrite 4k-64k) --do_verify=0 >/tmp/fio-during.out 2>&1 &
fio_pid=$!
usleep 300000
expect_rc 0 graidctl grow gc --raid-devices 3 --add $g2
echo "$OUT"
expect_match '3 members, was 2; /dev/[a-z0-9/-]* rebuilding into the new role' "$OUT" "grow's report"
expect_rc 0 graidctl --json detail gc
expect_match '"raid_devices": *3' "$OUT" "detail's member count"
[ -d /sys/block/${dev#/dev/}/graid/rd2 ] || fail "no sysfs rd2 after the grow"
finishes $fio_pid 300 "fio during the grow" || { cat /tmp/fio-during.out; fail "fio during the grow failed"; }
expect_rc 0 graidctl set-speed gc --min 100M --max 0
expect_rc 0 graidctl wait gc
fio_readback $dev 0 24M write 1m-1m "data written before the grow does not read back"
fio_readback $dev 32M 16M randwrite 4k-64k "data written during the grow does not read back"
expect_rc 0 graidctl check gc --wait
expect_match 'check finished: 0 mismatched sectors' "$OUT" "copies after the grow"
# The new copy itself holds the data: its data area, 2 MiB in, byte for byte copy 0's.
copy0=$(dd if=$g0 bs=1M skip=2 count=48 2>/dev/null | md5sum)
[ "$(dd if=$g2 bs=1M skip=2 count=48 2>/dev/null | md5sum)" = "$copy0" ] ||
	fail "the new copy differs from copy 0"
expect_rc 0 graidctl stop gc
expect_rc 0 graidctl assemble gc $g0 $g1 $g2
dev=$(array_dev "$OUT")
expect_rc 0 graidctl --json detail gc
expect_match '"raid_devices": *3' "$OUT" "the member count across a stop"
expect_match '"state": *"optimal"' "$OUT" "the state across a stop"

echo "--- fewer copies: only once a member was failed and removed; the last one takes its place"
expect_rc 1 graidctl grow gc --raid-devices 2
expect_match '3 are in it; fail and remove 1 first' "$OUT" "a shrink with every member in"
expect_rc 0 graidctl fail gc $g1
expect_rc 1 graidctl grow gc --raid-devices 2
expect_match 'member 1 .* failed but is still in it; remove it first' "$OUT" "a shrink with the member failed, not removed"
expect_rc 0 graidctl remove gc $g1
expect_rc 0 graidctl grow gc --raid-devices 2
expect_match '2 members, was 3' "$OUT" "the shrink's report"
expect_rc 0 graidctl --json detail gc
expect_match '"raid_devices": *2' "$OUT" "detail after the shrink"
expect_match '"state": *"optimal"' "$OUT" "optimal after the shrink"
[ ! -d /sys/block/${dev#/dev/}/graid/rd2 ] || fail "sysfs rd2 left after the shrink"
fio_readback $dev 0 24M write 1m-1m "data does not read back after the shrink"
fio_verify $dev 48M 4M randwrite 4k-64k
# The third device is member 1 now, on disk too: the array assembles from it and copy 0.
expect_rc 0 graidctl stop gc
expect_rc 0 graidctl assemble gc $g0 $g2
dev=$(array_dev "$OUT")
expect_rc 0 graidctl --json detail gc
expect_match '"state": *"optimal"' "$OUT" "assembled from the moved member"
fio_readback $dev 0 24M write 1m-1m "data does not read back from the moved member"
fio_readback $dev 48M 4M randwrite 4k-64k "data written after the shrink does not read back"
expect_rc 0 graidctl check gc --wait
expect_match 'check finished: 0 mismatched sectors' "$OUT" "copies after the shrink"

echo "--- refusals"
expect_rc 1 graidctl grow gc --raid-devices 1
expect_match 'not a member count this array can have' "$OUT" "one copy"
expect_rc 2 graidctl grow gc --raid-devices 3 --add $g2 /dev/null
expect_match '2 devices for 1 new role' "$OUT" "more --add than new roles"
expect_rc 0 graidctl stop gc
wipe_superblocks $g0 $g1 $g2

echo "--- md's raid1 reads what graid wrote, and its check agrees"
expect_rc 0 graidctl create gc --level 1 --write-zeroes --bitmap none $g0 $g1
dev=$(array_dev "$OUT")
fio_verify $dev 0 8M write 1m-1m
expect_rc 0 graidctl --json detail gc
data_kib=$(($(json_field member_data_bytes "$OUT") / 1024))
expect_rc 0 graidctl grow gc --raid-devices 3 --add $g2
expect_rc 0 graidctl wait gc
fio_verify $dev 8M 8M randwrite 4k-64k
expect_rc 0 graidctl stop gc
mdadm --create /dev/md0 --run --level=1 --raid-devices=3 --metadata=1.2 --data-offset=2M \
	--size=$data_kib --assume-clean --bitmap=none $g0 $g1 $g2 >/tmp/create.out 2>&1 ||
	{ cat /tmp/create.out; fail "mdadm --create failed"; }
fio_readback /dev/md0 0 8M write 1m-1m "md reads other data than graid wrote before the grow"
fio_readback /dev/md0 8M 8M randwrite 4k-64k "md reads other data than graid wrote after the grow"
md_check_and_stop "after graid's grow to three copies" $g0 $g1 $g2
for i in 0 1 2; do dmsetup --noudevsync remove g$i; done

echo "--- new arrays on members of 1 GiB or more leave reshape headroom before the data"
# Sparse 2 GiB files on the guest's tmpfs: a 1024th of them, 2 MiB, past the usual 2 MiB.
truncate -s 2G /tmp/big0.img /tmp/big1.img
b0=$(losetup -f) && losetup $b0 /tmp/big0.img || fail "losetup big0"
b1=$(losetup -f) && losetup $b1 /tmp/big1.img || fail "losetup big1"
expect_rc 0 graidctl create gh --level 1 --assume-clean --bitmap none $b0 $b1
expect_rc 0 graidctl examine $b0
expect_match 'Data Offset : 8192 sectors' "$OUT" "the data offset of a 2 GiB member"
expect_rc 0 graidctl stop gh
wipe_superblocks $b0 $b1
losetup -d $b0 $b1
rm -f /tmp/big0.img /tmp/big1.img
unload_module
