# The write-intent bitmap (Documentation/on-disk-format.rst, "Write-intent bitmap"):
# - create gives RAID 1/10/5/6 one by default, regions of --bitmap-chunk; --bitmap none gives
#   none; detail and examine show it;
# - a write sets its region's bit on the members before it goes; an idle region loses it;
# - a failed and removed member that is re-added is rebuilt only where writes went while it
#   was away (RAID 1 and RAID 5): the rebuild skips the rest, a check then finds every copy
#   or parity matching, and with the other copy failed everything fio wrote, before and while
#   it was away, reads back from it;
# - a device that was away while another filled its role and the array was whole again is
#   rebuilt in full, and so is any re-add without a bitmap.
# On 24 MiB slices with 1 MiB bitmap chunks: 22 regions per array.
. /graid/lib.sh
need_members 3
export DM_DISABLE_UDEV=1
# Idle regions lose their bits after two looks, 2 s apart.
load_module_with bitmap_clean_ms=2000
small_slices $members
set -- $slices
s0=$1 s1=$2 s2=$3

detail_field() { json_field "$2" "$(graidctl --json detail "$1")"; }
dirty() { detail_field "$1" dirty_regions; }
skipped() { detail_field "$1" rebuild_skipped_sectors; }
# disk_bit DEV REGION: bit REGION (< 8) of the first bitmap block on DEV (sector 16). The
# module writes it with bios of its own, which leave the device's page cache as it was: the
# cache goes first.
disk_bit() {
	echo 3 >/proc/sys/vm/drop_caches
	byte=$(dd if="$1" bs=512 skip=16 count=1 iflag=direct 2>/dev/null | od -An -tu1 -N1 | tr -d ' ')
	echo $(((byte >> $2) & 1))
}
# wait_clean ARRAY: until no region of ARRAY has its bit set (10 s at most).
wait_clean() {
	n=0
	until [ "$(dirty "$1")" = 0 ]; do
		n=$((n + 1))
		[ $n -le 100 ] || fail "bits still set after 10 s: $(graidctl detail "$1")"
		usleep 100000
	done
}

echo "--- create: an internal bitmap by default"
# Zeroed, not --assume-clean: the checks below compare every sector, written or not, and the
# drives hold what the tests before left there (after 26-offload the slices' copies differed in
# 1664 sectors that this test never writes).
expect_rc 0 graidctl create bm --level 1 --bitmap-chunk 1M --write-zeroes $s0 $s1
dev=$(array_dev "$OUT")
expect_rc 0 graidctl detail bm
echo "$OUT"
expect_match 'Bitmap : internal, 1 MiB chunks, 0 of 22 dirty' "$OUT" "detail of a new array"
expect_rc 0 graidctl examine $s1
expect_match 'Bitmap : internal, 1 MiB chunks, 2032 sectors' "$OUT" "examine"

echo "--- a write sets its region's bit on every member; idle, it is cleared"
# The region is kept busy while its bits are read: idle, they would be cleared after two of the
# worker's looks, which a slow (debug, loaded) machine can take as long to reach as the reads.
rm -f /tmp/first-write
(
	while :; do
		dd if=/dev/urandom of=$dev bs=64k count=4 seek=48 oflag=direct 2>/dev/null || exit 1
		touch /tmp/first-write
	done
) &
writer=$!
n=0
until [ -e /tmp/first-write ]; do
	n=$((n + 1))
	kill -0 $writer 2>/dev/null || fail "write failed"
	[ $n -le 600 ] || fail "the first write took over 60 s"
	usleep 100000
done
[ "$(dirty bm)" -ge 1 ] || fail "no bit set after a write: $(graidctl detail bm)"
for d in $s0 $s1; do
	[ "$(disk_bit $d 3)" = 1 ] || fail "region 3's bit is not set on $d"
done
kill $writer
wait $writer 2>/dev/null
wait_clean bm
# The bit goes in memory first, then its block is written.
n=0
until [ "$(disk_bit $s0 3)" = 0 ] && [ "$(disk_bit $s1 3)" = 0 ]; do
	n=$((n + 1))
	[ $n -le 100 ] || fail "region 3's bit is still set on disk 10 s after the array was clean"
	usleep 100000
done

echo "--- RAID 1 re-add: only what changed while it was away is rebuilt"
fio_verify $dev 0 8M write 64k-64k
fio_verify $dev 9M 11M randwrite 4k-64k
wait_clean bm
expect_rc 0 graidctl fail bm $s1
expect_rc 0 graidctl remove bm $s1
fio_verify $dev 8M 1M randwrite 4k-64k
[ "$(dirty bm)" -ge 1 ] || fail "no bit set while degraded"
expect_rc 0 graidctl re-add bm $s1
echo "$OUT"
expect_match 'rebuilding what the write-intent bitmap marks' "$OUT" "re-add's report"
wait_rebuilt bm 120
n=$(skipped bm)
echo "skipped: $n sectors"
# 22 MiB of member, of which the 1 MiB written (and the 1 MiB windows around it) is copied.
[ "$n" -ge 38912 ] || fail "the re-add skipped only $n sectors: $(graidctl detail bm)"
dmesg | grep -q 'role 1 is back' || fail "no log line for the bitmap re-add"
expect_rc 0 graidctl check bm --wait
expect_match 'check finished: 0 mismatched sectors' "$OUT" "copies after the re-add"
expect_rc 0 graidctl fail bm $s0
fio_readback $dev 0 8M write 64k-64k "data written before it left does not read back from it"
fio_readback $dev 9M 11M randwrite 4k-64k "data written before it left (2) does not read back"
fio_readback $dev 8M 1M randwrite 4k-64k "data written while it was away was not rebuilt"

echo "--- a device away while the array was whole again is rebuilt in full"
expect_rc 0 graidctl remove bm $s0
wipe_superblocks $s2
expect_rc 0 graidctl add bm $s2
wait_rebuilt bm 120
expect_rc 0 graidctl fail bm $s2
expect_rc 0 graidctl remove bm $s2
before=$(skipped bm)
expect_rc 0 graidctl re-add bm $s0
wait_rebuilt bm 120
[ "$(skipped bm)" = "$before" ] || fail "a device the bitmap no longer covers skipped sectors"
expect_rc 0 graidctl check bm --wait
expect_match 'check finished: 0 mismatched sectors' "$OUT" "copies after the full re-add"
expect_rc 0 graidctl stop bm

echo "--- RAID 5 re-add"
wipe_superblocks $s0 $s1 $s2
expect_rc 0 graidctl create b5 --level 5 --chunk 64K --bitmap-chunk 1M --write-zeroes $s0 $s1 $s2
dev=$(array_dev "$OUT")
fio_verify $dev 0 16M write 128k-128k
wait_clean b5
expect_rc 0 graidctl fail b5 $s2
expect_rc 0 graidctl remove b5 $s2
fio_verify $dev 4M 512k randwrite 4k-64k
expect_rc 0 graidctl re-add b5 $s2
wait_rebuilt b5 120
n=$(skipped b5)
echo "skipped: $n sectors"
[ "$n" -ge 36864 ] || fail "the RAID 5 re-add skipped only $n sectors"
expect_rc 0 graidctl check b5 --wait
expect_match 'check finished: 0 mismatched sectors' "$OUT" "parity after the re-add"
expect_rc 0 graidctl fail b5 $s0
fio_readback $dev 4M 512k randwrite 4k-64k "RAID 5: data written while it was away was not rebuilt"
expect_rc 0 graidctl stop b5

echo "--- --bitmap none: a re-add rebuilds in full"
wipe_superblocks $s0 $s1 $s2
expect_rc 0 graidctl create nb --level 1 --bitmap none --assume-clean $s0 $s1
expect_match 'Bitmap : none' "$(graidctl detail nb)" "detail without a bitmap"
expect_match 'Bitmap : none' "$(graidctl examine $s0)" "examine without a bitmap"
expect_rc 0 graidctl fail nb $s1
expect_rc 0 graidctl remove nb $s1
expect_rc 0 graidctl re-add nb $s1
expect_match 'rebuilding in full' "$OUT" "re-add's report without a bitmap"
wait_rebuilt nb 120
[ "$(skipped nb)" = 0 ] || fail "a re-add without a bitmap skipped sectors"
expect_rc 0 graidctl stop nb
unslice
unload_module
