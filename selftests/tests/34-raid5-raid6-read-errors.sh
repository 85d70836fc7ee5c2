# md's read-error rules on RAID 5 and 6 (issue 29, E5 and S2), dm-dust bad blocks under member 0
# (64 MiB slices of the drives, so a resync is short):
# - optimal RAID 5: verified reads over bad blocks return the right data, the blocks are
#   rewritten from parity (dust drops a block once written), the member stays, DETAIL counts the
#   corrections; a check rewrites the bad blocks no read met (parity ones) and finds 0
#   mismatches;
# - a block whose rewrite fails (dust fails its writes) fails the member, the read still right;
# - degraded RAID 5: a bad block on a survivor fails the read that needs it and nothing else (the
#   member stays, the array is degraded, not broken, and takes writes); a RAID 6 missing one
#   member rebuilds around it and repairs it;
# - the initial resync over bad blocks rewrites them and ends in sync, a check then finds 0
#   mismatches.
. /graid/lib.sh
need_members 4
# The resync case starts its resync by hand, over bad blocks already there.
load_module_with auto_resync=0
set -- $members
d0=$1 d1=$2 d2=$3 d3=$4
export DM_DISABLE_UDEV=1
modprobe dm-dust || fail "cannot load dm-dust"
size=131072

# Member 0 is dust0 over the first 64 MiB of d0, the others 64 MiB slices. dust0 starts as a
# linear slice: dm-dust does not zero with write-zeroes (--write-zeroes), so it becomes dust
# (`to_dust`) once the array is made; the data under it is the same.
make_members() {
	dmsetup --noudevsync create dust0 --table "0 $size linear $d0 0" || fail "dmsetup dust0"
	dmsetup --noudevsync create s1 --table "0 $size linear $d1 0" || fail "dmsetup s1"
	dmsetup --noudevsync create s2 --table "0 $size linear $d2 0" || fail "dmsetup s2"
	dmsetup --noudevsync create s3 --table "0 $size linear $d3 0" || fail "dmsetup s3"
	dmsetup mknodes || fail "dmsetup mknodes failed"
	m="/dev/mapper/dust0 /dev/mapper/s1 /dev/mapper/s2 /dev/mapper/s3"
	wipe_superblocks $m
}
remove_members() {
	for t in dust0 s1 s2 s3; do dmsetup --noudevsync remove $t || fail "dmsetup remove $t"; done
}
# bad BLOCK [WRITE_FAILS]...: 4 KiB blocks of dust0 (its data area starts at block 512) whose
# reads fail (and whose next WRITE_FAILS writes too), from now on.
bad() {
	for b in "$@"; do
		dmsetup message dust0 0 addbadblock ${b%:*} $([ "${b#*:}" = "$b" ] || echo ${b#*:}) \
			>/dev/null || fail "addbadblock $b failed"
	done
	dmsetup message dust0 0 enable >/dev/null || fail "dust enable failed"
}
to_dust() {
	dmsetup --noudevsync suspend dust0 && dmsetup load dust0 --table "0 $size dust $d0 0 4096" &&
		dmsetup --noudevsync resume dust0 || fail "cannot switch dust0 to dm-dust"
}
bad_left() { dmsetup message dust0 0 countbadblocks 2>&1; }
detail_json() { expect_rc 0 graidctl --json detail rr; detail=$OUT; }
json_count() { echo "$2" | grep -c "$1"; }
corrected0() { echo "$detail" | sed -n 's/.*"corrected": \([0-9]*\).*/\1/p' | head -n 1; }

echo "--- RAID 5, optimal: read errors are repaired from parity"
make_members
expect_rc 0 graidctl create rr --level 5 --chunk 64K --write-zeroes $m
dev=$(array_dev "$OUT")
to_dust
fio_verify "$dev" 0 8M randwrite 4k-128k
# Data and parity blocks of member 0 inside the first 8 MiB of the array (2.7 MiB of it).
bad 520 700 900 1000 1150
echo 3 >/proc/sys/vm/drop_caches
fio_readback "$dev" 0 8M randwrite 4k-128k "verified read-back failed with bad blocks on a RAID 5"
detail_json
expect_match '"state": "optimal"' "$detail" "array state after repairs"
[ "$(json_count '"state": "active"' "$detail")" = 4 ] || fail "a member was failed: $detail"
[ "$(corrected0)" -ge 1 ] || fail "no corrected read error on member 0: $detail"
expect_rc 0 graidctl check rr --wait
expect_match 'check finished: 0 mismatched sectors' "$OUT" "check after the repairs"
expect_match 'countbadblocks: 0 badblock' "$(bad_left)" "bad blocks left after the check"
expect_rc 0 graidctl detail rr
echo "$OUT"
fio_readback "$dev" 0 8M randwrite 4k-128k "read-back after the check"

echo "--- RAID 5: a block that cannot be rewritten fails the member, the read stays right"
# Member 0's block 520 is array sector 64 (stripe 0, its first data chunk): its writes fail.
bad 520:200
expect_rc 0 dd if="$dev" of=/tmp/blk bs=4096 skip=8 count=1 iflag=direct
detail_json
[ "$(json_count '"state": "faulty"' "$detail")" = 1 ] || fail "member 0 not failed: $detail"
echo 3 >/proc/sys/vm/drop_caches
fio_readback "$dev" 0 8M randwrite 4k-128k "degraded read-back after the failed rewrite"
expect_rc 0 graidctl stop rr
remove_members

echo "--- RAID 5, degraded: a survivor's bad block fails only the read that needs it"
make_members
expect_rc 0 graidctl create rr --level 5 --chunk 64K --write-zeroes $m
dev=$(array_dev "$OUT")
to_dust
fio_verify "$dev" 0 4M randwrite 4k-64k
expect_rc 0 graidctl fail rr /dev/mapper/s3
bad 520
dd if="$dev" of=/dev/null bs=4096 skip=8 count=1 iflag=direct 2>/dev/null &&
	fail "a read no member or parity can give succeeded"
expect_rc 0 dd if="$dev" of=/dev/null bs=4096 skip=9 count=1 iflag=direct
detail_json
expect_match '"state": "degraded"' "$detail" "array state after the failed read"
[ "$(json_count '"state": "active"' "$detail")" = 3 ] || fail "a survivor was failed: $detail"
fio_verify "$dev" 4M 2M randwrite 4k-64k
expect_rc 0 graidctl stop rr
remove_members

echo "--- RAID 6 missing one member: a bad block is rebuilt around and repaired"
make_members
expect_rc 0 graidctl create rr --level 6 --chunk 64K --write-zeroes $m
dev=$(array_dev "$OUT")
to_dust
fio_verify "$dev" 0 4M randwrite 4k-64k
expect_rc 0 graidctl fail rr /dev/mapper/s3
# Member 0's blocks in the first 4 MiB of the array (2 MiB of it): data and parity.
bad 530 560 600 700
echo 3 >/proc/sys/vm/drop_caches
fio_readback "$dev" 0 4M randwrite 4k-64k "degraded RAID 6 read-back with bad blocks"
detail_json
[ "$(json_count '"state": "active"' "$detail")" = 3 ] || fail "a survivor was failed: $detail"
[ "$(corrected0)" -ge 1 ] || fail "no corrected read error on member 0: $detail"
expect_rc 0 graidctl stop rr
remove_members

echo "--- RAID 5: the initial resync over bad blocks rewrites them and ends in sync"
make_members
to_dust
expect_rc 0 graidctl create rr --level 5 --chunk 64K $m
dev=$(array_dev "$OUT")
bad 513 1000 3000 9000
expect_rc 0 graidctl repair rr --wait
expect_match 'finished' "$OUT" "the resync"
detail_json
expect_match '"resync_pending": false' "$detail" "in sync after the resync"
[ "$(json_count '"state": "active"' "$detail")" = 4 ] || fail "a member was failed: $detail"
[ "$(json_field scrub_read_errors "$detail")" = 4 ] || fail "unreadable blocks: $detail"
[ "$(corrected0)" = 4 ] || fail "member 0's corrected read errors: $detail"
expect_match 'countbadblocks: 0 badblock' "$(bad_left)" "bad blocks left after the resync"
expect_rc 0 graidctl check rr --wait
expect_match 'check finished: 0 mismatched sectors' "$OUT" "check after the resync"
expect_rc 0 graidctl detail rr
echo "$OUT"
expect_rc 0 graidctl stop rr
remove_members
unload_module
