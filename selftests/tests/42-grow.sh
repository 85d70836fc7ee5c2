# Resize (graidctl grow, GRAID_IOC_RESIZE; issue 46 item 1): arrays on dm-linear slices that then
# grow, as if every member had been replaced by a larger drive, take the room online:
# - RAID 5 as created (bitmap and log) with ext4 mounted: grow --size max changes the disk's
#   size at once, resize2fs grows the mounted filesystem, a file larger than the old filesystem
#   is written into it while the new room resyncs; everything reads back after the resync, a
#   check finds 0 mismatches, and a stop and assemble keep the new size;
# - RAID 1 (bitmap) raw, exported over NVMe-oF (TCP on loopback): its host sees the new size
#   without reconnecting; fio's data before the grow reads back, data written in the new room
#   while it resyncs reads back, check 0;
#   then shrunk: refused while the filesystem reaches past the new end, allowed once resize2fs
#   shrank it (e2fsck clean, the file intact, check 0, the smaller size across a stop);
# - RAID 1 of small slices with 4 KiB bitmap chunks grown ten times: the bitmap's chunks grow
#   coarser (16 KiB), data in the new room reads back, check 0, across a stop;
# - refusals, each with its reason and nothing changed: a shrink of raw data without --force
#   (then with it: the data below the new end intact), more than the members have, a degraded
#   array; members whose superblocks record a reshape in progress (graid-probe mark-reshape),
#   which this graid cannot continue: examine shows it, assembly is refused.
. /graid/lib.sh
# A failing test leaves no filesystem mounted and no export (the runner's clean-up could not
# stop the array).
trap 'umount /mnt/gr 2>/dev/null; nvme disconnect-all >/dev/null 2>&1; graidctl unexport gm >/dev/null 2>&1' EXIT
need_members 4
export DM_DISABLE_UDEV=1
set -- $members
small=49152 # 24 MiB slices
large=131072 # 64 MiB

# slices SECTORS DEV...: dm-linear slices g0, g1, ... of SECTORS at each DEV's start (created, or
# reloaded at the new size while open: a device that grew under the array).
slices() {
	local sectors=$1 i=0 d
	shift
	for d in "$@"; do
		if [ -b /dev/mapper/g$i ]; then
			dmsetup --noudevsync load g$i --table "0 $sectors linear $d 0" &&
				dmsetup --noudevsync resume g$i || fail "dmsetup reload g$i"
		else
			dmsetup --noudevsync create g$i --table "0 $sectors linear $d 0" || fail "dmsetup create g$i"
		fi
		i=$((i + 1))
	done
}
array_sectors() { blockdev --getsz "$1"; }
# old_content DEV...: what a drive held before it came here, past the small slices (4 MiB of it,
# different on each): the new room is not consistent until the resync makes it so.
old_content() {
	for d in "$@"; do
		dd if=/dev/urandom of=$d bs=1M seek=$((small / 2048)) count=4 oflag=direct 2>/dev/null ||
			fail "cannot write old content to $d"
	done
}

echo "--- RAID 5 with ext4 mounted: grown online, resize2fs, a file larger than the old filesystem"
slices $small $1 $2 $3 $4
g="/dev/mapper/g0 /dev/mapper/g1 /dev/mapper/g2 /dev/mapper/g3"
wipe_superblocks $g
expect_rc 0 graidctl create gr --level 5 --chunk 64K --write-zeroes $g
dev=$(array_dev "$OUT")
before=$(array_sectors $dev)
mkfs.ext4 -q -F $dev || fail "mkfs.ext4 failed"
mkdir -p /mnt/gr
mount $dev /mnt/gr || fail "mount failed"
dd if=/dev/urandom of=/mnt/gr/a bs=1M count=16 2>/dev/null || fail "writing a failed"
sum_a=$(md5sum </mnt/gr/a)
old_content $1 $2 $3 $4
expect_rc 0 graidctl grow gr --size max
expect_match 'nothing to change' "$OUT" "grow before the members grew"
slices $large $1 $2 $3 $4
expect_rc 0 graidctl grow gr --size max
echo "$OUT"
expect_match 'grown from .* resyncs in the background' "$OUT" "grow's report"
after=$(array_sectors $dev)
echo "array sectors: $before -> $after"
# 2 MiB of each 64 MiB member is metadata; three members' worth of data.
[ "$after" = $(((large - 4096) * 3)) ] || fail "the disk is $after sectors after the grow"
expect_rc 0 graidctl --json detail gr
expect_match "\"size_bytes\": *$((after * 512))" "$OUT" "detail's size"
resize2fs $dev >/tmp/resize2fs.out 2>&1 || { cat /tmp/resize2fs.out; fail "online resize2fs failed"; }
df -k /mnt/gr
blocks=$(df -k /mnt/gr | awk 'NR == 2 { print $2 }')
[ "$blocks" -gt 150000 ] || fail "the filesystem did not grow: $blocks KiB"
# Larger than the whole old filesystem (about 66 MiB): part of it lands in the new room.
dd if=/dev/urandom of=/mnt/gr/b bs=1M count=96 2>/dev/null || fail "writing b failed"
sync
sum_b=$(md5sum </mnt/gr/b)
expect_rc 0 graidctl wait gr
expect_rc 0 graidctl check gr --wait
expect_match 'check finished: 0 mismatched sectors' "$OUT" "parity after the grow"
echo 3 >/proc/sys/vm/drop_caches
[ "$(md5sum </mnt/gr/a)" = "$sum_a" ] || fail "the file written before the grow changed"
[ "$(md5sum </mnt/gr/b)" = "$sum_b" ] || fail "the file written into the new room changed"
umount /mnt/gr || fail "umount failed"
expect_rc 0 graidctl stop gr
expect_rc 0 graidctl assemble gr $g
dev=$(array_dev "$OUT")
[ "$(array_sectors $dev)" = "$after" ] || fail "assembled at $(array_sectors $dev) sectors, not $after"
mount $dev /mnt/gr || fail "mount after the assembly failed"
[ "$(md5sum </mnt/gr/b)" = "$sum_b" ] || fail "the file in the new room changed across a stop"
rm /mnt/gr/b
umount /mnt/gr
echo "--- the RAID 5 shrunk: refused while ext4 reaches past the new end, then resize2fs'd"
expect_rc 1 graidctl grow gr --size 20M
expect_match 'cannot shrink .* to 60 MiB: it holds an ext4 .* takes 186 MiB.*resize2fs' "$OUT" "a shrink under ext4"
[ "$(array_sectors $dev)" = "$after" ] || fail "a refused shrink changed the size"
e2fsck -fy $dev >/dev/null 2>&1
resize2fs $dev 48M >/tmp/resize2fs.out 2>&1 || { cat /tmp/resize2fs.out; fail "resize2fs to 48M failed"; }
expect_rc 0 graidctl grow gr --size 20M
expect_match 'shrunk from .* to 60 MiB' "$OUT" "the shrink's report"
[ "$(array_sectors $dev)" = 122880 ] || fail "the shrunk RAID 5 is $(array_sectors $dev) sectors"
e2fsck -fn $dev >/tmp/e2fsck.out 2>&1 || { cat /tmp/e2fsck.out; fail "e2fsck after the shrink"; }
expect_rc 0 graidctl check gr --wait
expect_match 'check finished: 0 mismatched sectors' "$OUT" "parity after the shrink"
expect_rc 0 graidctl stop gr
expect_rc 0 graidctl assemble gr $g
dev=$(array_dev "$OUT")
[ "$(array_sectors $dev)" = 122880 ] || fail "assembled at $(array_sectors $dev) sectors after the shrink"
mount $dev /mnt/gr || fail "mount after the shrink failed"
[ "$(md5sum </mnt/gr/a)" = "$sum_a" ] || fail "the file changed across the shrink"
umount /mnt/gr
expect_rc 0 graidctl stop gr
wipe_superblocks $g

echo "--- RAID 1 with 4 KiB bitmap chunks grown ten times: the chunks grow coarser"
slices 16384 $1 $2 $3 $4
expect_rc 0 graidctl create gb --level 1 --bitmap-chunk 4K --write-zeroes /dev/mapper/g0 /dev/mapper/g1
dev=$(array_dev "$OUT")
expect_rc 0 graidctl --json detail gb
expect_match '"chunk_bytes": *4096' "$OUT" "the bitmap's chunk as created"
fio_verify $dev 0 4M randwrite 4k-64k
old_content $1 $2
slices $large $1 $2 $3 $4
expect_rc 0 graidctl grow gb --size max
expect_match 'grown from 6 MiB to 62 MiB' "$OUT" "grow's report"
expect_rc 0 graidctl --json detail gb
# 62 MiB in 4 KiB chunks is more regions than the bitmap keeps states for (four times those it
# started with): 16 KiB chunks.
expect_match '"chunk_bytes": *16384' "$OUT" "the bitmap's chunk after the grow"
fio_verify $dev 40M 8M randwrite 4k-64k
expect_rc 0 graidctl wait gb
fio_readback $dev 0 4M randwrite 4k-64k "data written before the coarser grow does not read back"
expect_rc 0 graidctl check gb --wait
expect_match 'check finished: 0 mismatched sectors' "$OUT" "copies after the coarser grow"
expect_rc 0 graidctl stop gb
expect_rc 0 graidctl assemble gb /dev/mapper/g0 /dev/mapper/g1
expect_rc 0 graidctl --json detail gb
expect_match '"chunk_bytes": *16384' "$OUT" "the bitmap's chunk across a stop"
expect_rc 0 graidctl stop gb
wipe_superblocks /dev/mapper/g0 /dev/mapper/g1

echo "--- RAID 1 raw, exported over NVMe-oF: data before the grow, and in the new room while it resyncs"
slices $small $1 $2 $3 $4
expect_rc 0 graidctl create gm --level 1 --write-zeroes /dev/mapper/g0 /dev/mapper/g1
dev=$(array_dev "$OUT")
fio_verify $dev 0 16M randwrite 4k-64k
# The export's host sees the new size without reconnecting (nvmet's namespace-changed notice).
ip link set lo up || fail "no loopback device"
modprobe nvme-tcp || fail "modprobe nvme-tcp"
host=nqn.2014-08.org.nvmexpress:uuid:11111111-2222-3333-4444-555555555555
rm -f /etc/graid/exports.conf
uuid=$(json_field uuid "$(graidctl --json detail gm)")
expect_rc 0 graidctl export gm --addr 127.0.0.1 --allow-host $host
# On a lockdep kernel the host's own revalidation (nvme_update_ns_info: the disk's capacity set
# with its queue frozen) is reported as a circular dependency, a known one of the NVMe host
# driver (linux-nvme/nvme-cli#3113, blktests nvme/005): there the export is told and the host is
# left out.
host_side=1
grep -Eqs 'debug_locks: +1$' /proc/lockdep_stats && host_side=
if [ -n "$host_side" ]; then
	nvmf_connect tcp 127.0.0.1 nqn.2014-08.org.nvmexpress:uuid:$uuid $host ||
		{ cat /tmp/nvme.out; fail "the host could not connect"; }
	fab=$(fabric_dev $uuid)
	[ "$(array_sectors $fab)" = 45056 ] || fail "the host sees $(array_sectors $fab) sectors before"
fi
old_content $1 $2
slices $large $1 $2 $3 $4
# A size, not max: each member's data area 40 MiB (ext4 or not, md's --size counts the same).
expect_rc 0 graidctl grow gm --size 40M
expect_match 'grown from 22 MiB to 40 MiB.*NVMe-oF hosts told' "$OUT" "grow's report"
[ "$(array_sectors $dev)" = 81920 ] || fail "the RAID 1 is $(array_sectors $dev) sectors"
n=0
until [ -z "$host_side" ] || [ "$(cat /sys/block/${fab#/dev/}/size)" = 81920 ]; do
	n=$((n + 1))
	[ $n -le 50 ] || fail "the host still sees $(cat /sys/block/${fab#/dev/}/size) sectors"
	usleep 100000
done
if [ -n "$host_side" ]; then
	nvme disconnect -n nqn.2014-08.org.nvmexpress:uuid:$uuid >/dev/null || fail "nvme disconnect"
fi
expect_rc 0 graidctl unexport gm
fio_verify $dev 24M 16M randwrite 4k-64k
expect_rc 0 graidctl wait gm
fio_readback $dev 0 16M randwrite 4k-64k "data written before the grow does not read back"
expect_rc 0 graidctl check gm --wait
expect_match 'check finished: 0 mismatched sectors' "$OUT" "copies after the grow"

echo "--- refusals: raw data shrunk without --force, more than the members have, degraded"
expect_rc 1 graidctl grow gm --size 30M
expect_match 'holds no filesystem, volume or partition table .* --force' "$OUT" "a shrink of raw data"
[ "$(array_sectors $dev)" = 81920 ] || fail "a refused shrink changed the size"
expect_rc 0 graidctl grow gm --size 30M --force
expect_match 'shrunk from 40 MiB to 30 MiB' "$OUT" "a forced shrink"
fio_readback $dev 0 16M randwrite 4k-64k "data below the new end does not read back after the shrink"
expect_rc 0 graidctl check gm --wait
expect_match 'check finished: 0 mismatched sectors' "$OUT" "copies after the shrink"
expect_rc 1 graidctl grow gm --size 1G
expect_match 'has room for 62 MiB' "$OUT" "more than the members have"
expect_rc 0 graidctl fail gm /dev/mapper/g1
expect_rc 1 graidctl grow gm --size max
expect_match 'not optimal' "$OUT" "a degraded array"
[ "$(array_sectors $dev)" = 61440 ] || fail "a refused grow changed the size"
expect_rc 0 graidctl stop gm

echo "--- a reshape recorded in the superblocks, which this graid cannot continue: refused, nothing changed"
graid-probe mark-reshape /dev/mapper/g0 /dev/mapper/g1 || fail "graid-probe mark-reshape"
expect_rc 0 graidctl examine /dev/mapper/g0
expect_match 'Reshape : backwards at sector 0' "$OUT" "examine of a member in a reshape"
sum_sb=$(dd if=/dev/mapper/g0 bs=4096 skip=1 count=1 2>/dev/null | md5sum)
expect_rc 1 graidctl assemble gm /dev/mapper/g0 /dev/mapper/g1
expect_match 'a reshape is in progress on these members, which this version of graid cannot continue' "$OUT" "assembly of a reshape"
expect_match 'graid: gm: a reshape is in progress' "$(dmesg)" "the module's reason"
[ "$(dd if=/dev/mapper/g0 bs=4096 skip=1 count=1 2>/dev/null | md5sum)" = "$sum_sb" ] ||
	fail "a refused assembly changed the superblock"
wipe_superblocks /dev/mapper/g0 /dev/mapper/g1
for i in 0 1 2 3; do dmsetup --noudevsync remove g$i; done
unload_module
