# graidctl check and repair (md's sync_action check/repair) on RAID 1 and RAID 5:
# - a clean array checks with 0 mismatches;
# - 4 KiB scribbled on a member's raw device (a mirror copy, a RAID 5 parity block) is found:
#   check counts 8 mismatched sectors and changes nothing, repair counts them and rewrites
#   them (the copy from the first, the parity from the data), a new check finds 0;
# - the repaired block is then used: RAID 1 reads the repaired copy alone, RAID 5 rebuilds
#   data from the repaired parity, and fio verifies everything it wrote;
# - refusals: a RAID 0 (nothing to compare), a degraded array.
. /graid/lib.sh
need_members 4
set -- $members
d0=$1 d1=$2 d2=$3 d3=$4

# scribble DEV SECTOR: 4 KiB of random bytes at data-area sector SECTOR of member DEV (its
# data area starts 2 MiB in), behind the array's back.
scribble() {
	dd if=/dev/urandom of="$1" bs=4096 count=1 seek=$(((4096 + $2) / 8)) oflag=direct \
		conv=notrunc 2>/dev/null || fail "cannot write to $1"
}

for level in 1 5; do
	case $level in
	# RAID 1: the second copy of array sector 2048 (1 MiB in).
	1) m="$d0 $d1" chunk= victim=$d1 sector=2048 survivor_fails=$d0 ;;
	# RAID 5 of four, 64K chunks, left-symmetric: stripe 0's P is on the last member, rows
	# 0..127; its data read back rebuilt from that P once the first member fails.
	5) m="$d0 $d1 $d2 $d3" chunk="--chunk 64K" victim=$d3 sector=16 survivor_fails=$d0 ;;
	esac
	echo "--- RAID $level: check, scribble on $victim, check, repair, check"
	wipe_superblocks $d0 $d1 $d2 $d3
	expect_rc 0 graidctl create cr --level $level $chunk --write-zeroes $m
	dev=$(array_dev "$OUT")
	fio_verify "$dev" 0 16M randwrite 4k-128k
	expect_rc 0 graidctl check cr --wait
	expect_match 'check finished: 0 mismatched sectors' "$OUT" "check of a clean array"
	scribble $victim $sector
	expect_rc 0 graidctl check cr --wait
	expect_match 'check finished: 8 mismatched sectors' "$OUT" "check after the scribble"
	expect_rc 0 graidctl detail cr
	expect_match 'Mismatches : 8 sectors' "$OUT" "detail's mismatch count"
	expect_rc 0 graidctl check cr --wait
	expect_match 'check finished: 8 mismatched sectors' "$OUT" "check changed something"
	expect_rc 0 graidctl repair cr --wait
	expect_match 'repair finished: 8 mismatched sectors' "$OUT" "repair"
	expect_rc 0 graidctl check cr --wait
	expect_match 'check finished: 0 mismatched sectors' "$OUT" "check after the repair"
	# The repaired copy or parity now serves the data alone.
	expect_rc 0 graidctl fail cr $survivor_fails
	echo 3 >/proc/sys/vm/drop_caches
	fio_readback "$dev" 0 16M randwrite 4k-128k "data lost after the repair"
	expect_rc 1 graidctl check cr
	expect_match 'not optimal.*EBUSY' "$OUT" "check of a degraded array"
	expect_rc 0 graidctl stop cr
done

echo "--- RAID 0: nothing to compare"
wipe_superblocks $d0 $d1 $d2 $d3
expect_rc 0 graidctl create r0 --level 0 --chunk 64K $d0 $d1
expect_rc 1 graidctl check r0
expect_match 'no copy or parity.*EOPNOTSUPP' "$OUT" "check of a RAID 0"
expect_rc 0 graidctl stop r0
wipe_superblocks $d0 $d1 $d2 $d3
unload_module
