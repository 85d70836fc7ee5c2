# The partial parity log (Documentation/on-disk-format.rst, "Partial parity log"):
# - create gives RAID 5 and 6 one by default, --consistency-policy resync none (and ppl is
#   refused for a mirror); detail and examine show it;
# - sequential half-stripe writes in flight together are gathered into whole stripes that log
#   nothing (engine/stripe_hold.rs), on RAID 5 and 6;
# - full-stripe writes log nothing, partial-stripe ones an entry each, and the log wraps when
#   its rings fill (entries that queue for a member's log go out together, several to a
#   write): on an optimal and a degraded RAID 5 and 6 (one and two members lost),
#   every write fio made reads back, and once the members are back a check finds every
#   parity right;
# - a clean stop and assembly keeps the data, and the log starts over;
# - members of 8 GiB get a log of a thousandth of a member (8 MiB), and the data after it.
# What the log is for, a crash while degraded, is the crash rounds' (selftests/crash/lib.sh:
# degraded RAID 5/6 rounds, and the targeted write-hole test).
. /graid/lib.sh
need_members 4
export DM_DISABLE_UDEV=1
small_slices $members
set -- $slices
s0=$1 s1=$2 s2=$3 s3=$4

ppl_field() { json_field "$2" "$(graidctl --json detail "$1" | tr -d '\n ' | sed 's/.*"ppl":{\([^}]*\)}.*/\1/')"; }

# gathered DEV OFFSET MAX_ENTRIES WHAT: 4 MiB of 64 KiB sequential writes, half a 128 KiB stripe
# each, 8 in flight: the write holding a stripe takes in the one that continues it
# (engine/stripe_hold.rs), so stripes go out whole and log nothing (at most MAX_ENTRIES log
# entries, where writing each on its own logs 64 per parity member).
gathered() {
	local e0 c0 entries carried
	e0=$(graid_debug log_writes entries) c0=$(graid_debug held_stripes carried)
	fio_verify $1 $2 4M write 64k-64k
	entries=$(($(graid_debug log_writes entries) - e0))
	carried=$(($(graid_debug held_stripes carried) - c0))
	echo "$4: 64 half-stripe writes: $carried carried by the write before them, $entries log entries"
	[ "$carried" -ge 6 ] || fail "$4: sequential half-stripe writes were not gathered ($carried carried)"
	[ "$entries" -le "$3" ] || fail "$4: gathered stripes were logged ($entries entries for 64 writes)"
}

echo "--- create: RAID 5 and 6 get a partial parity log by default"
expect_rc 0 graidctl create pl --level 5 --chunk 64K --assume-clean $s0 $s1 $s2
dev=$(array_dev "$OUT")
expect_rc 0 graidctl detail pl
echo "$OUT"
expect_match 'Write Hole : closed by the partial parity log \(0 entries, 0 barriers' "$OUT" "detail of a new RAID 5"
expect_rc 0 graidctl examine $s2
expect_match 'Journal : partial parity log, 2048 sectors \(1 MiB\) at sector 2048' "$OUT" "examine"

echo "--- full-stripe writes log nothing, partial ones do, and the log wraps"
# 128 KiB stripes (two 64 KiB data chunks): 1 MiB sequential writes are whole stripes.
fio_verify $dev 0 4M write 1m-1m
[ "$(ppl_field pl entries)" = 0 ] || fail "full-stripe writes were logged: $(graidctl detail pl)"
gathered $dev 20M 56 "RAID 5"
fio_verify $dev 4M 4M randwrite 4k-16k
entries=$(ppl_field pl entries) wraps=$(ppl_field pl wraps)
echo "logged: $entries entries, $wraps wraps"
[ "$entries" -ge 256 ] || fail "partial-stripe writes not logged: $entries entries"
[ "$wraps" -ge 2 ] || fail "the log never wrapped: $wraps"
# Entries that wait while their member's last log write is in flight go out together.
graid_debug log_writes
log_entries=$(graid_debug log_writes entries)
log_writes=$(graid_debug log_writes writes)
[ "${log_entries:-0}" -ge "$entries" ] || fail "the batcher sent $log_entries entries, the log counts $entries"
[ "${log_writes:-0}" -lt "$log_entries" ] || fail "no log write carried two entries: $log_writes writes for $log_entries entries"
log_groups=$(graid_debug log_writes groups)
[ "${log_groups:-0}" -ge 1 ] || fail "no log write carried a group of entries"
# Full stripes written where partial writes were logged in the same busy spell void what is
# logged there (a barrier each); once idle (marked clean) the log starts over.
fio_verify $dev 12M 4M randwrite 4k-1m
barriers=$(ppl_field pl barriers)
echo "barriers: $barriers"
[ "$barriers" -ge 1 ] || fail "no barrier for full stripes over logged ones"

echo "--- degraded RAID 5: partial writes logged, everything reads back"
fail_remove pl s1
before=$(ppl_field pl entries)
fio_verify $dev 8M 4M randwrite 4k-64k
[ "$(ppl_field pl entries)" -gt "$before" ] || fail "degraded partial writes not logged"
fio_readback $dev 0 4M write 1m-1m "data lost after the member failed"
add_back pl s1
wait_rebuilt pl 120
expect_rc 0 graidctl check pl --wait
echo "$OUT"
expect_match ' 0 mismatched sectors' "$OUT" "RAID 5's parity after logged writes and a rebuild"

echo "--- a clean stop and assembly: the data stays, the log starts over"
expect_rc 0 graidctl stop pl
expect_rc 0 graidctl assemble pl $s0 $s1 $s2
dev=$(array_dev "$OUT")
expect_match 'Write Hole : closed' "$(graidctl detail pl)" "detail after the assembly"
[ "$(ppl_field pl entries)" = 0 ] || fail "a new start counts from 0"
fio_readback $dev 8M 4M randwrite 4k-64k "data lost across a clean stop"
expect_rc 0 graidctl stop pl
wipe_superblocks $s0 $s1 $s2

echo "--- RAID 6: optimal, one member lost, two lost"
expect_rc 0 graidctl create pl6 --level 6 --chunk 64K --assume-clean $s0 $s1 $s2 $s3
dev=$(array_dev "$OUT")
gathered $dev 12M 112 "RAID 6"
fio_verify $dev 0 4M randwrite 4k-32k
fail_remove pl6 s0
fio_verify $dev 4M 4M randwrite 4k-32k
fail_remove pl6 s3
fio_verify $dev 8M 4M randwrite 4k-32k
for range in "0 4M" "4M 4M"; do
	fio_readback $dev $range randwrite 4k-32k "RAID 6 data lost with two members away"
done
echo "logged: $(ppl_field pl6 entries) entries, $(ppl_field pl6 wraps) wraps"
add_back pl6 s0
wait_rebuilt pl6 120
add_back pl6 s3
wait_rebuilt pl6 120
expect_rc 0 graidctl check pl6 --wait
echo "$OUT"
expect_match ' 0 mismatched sectors' "$OUT" "RAID 6's parity after logged writes and rebuilds"
expect_rc 0 graidctl stop pl6
wipe_superblocks $s0 $s1 $s2 $s3

echo "--- --consistency-policy resync: no log; ppl is for parity arrays"
expect_rc 0 graidctl create nl --level 5 --chunk 64K --consistency-policy resync --assume-clean $s0 $s1 $s2
expect_match 'Write Hole : open: no partial parity log' "$(graidctl detail nl)" "detail without a log"
expect_rc 0 graidctl examine $s0
expect_match 'Journal : none' "$OUT" "examine without a log"
expect_rc 0 graidctl stop nl
wipe_superblocks $s0 $s1 $s2
expect_rc 2 graidctl create m --level 1 --consistency-policy ppl $s0 $s1
expect_match 'ppl is for raid5 and raid6' "$OUT" "ppl on a mirror"

echo "--- members of 8 GiB get an 8 MiB log (a thousandth of a member), then 8 MiB of reshape headroom, then the data"
# The slices seen as 8 GiB members: their 24 MiB, then a zero target (the test writes inside
# the first 24 MiB only).
bigs=
for i in 0 1 2; do
	eval "s=\$s$i"
	printf '0 49152 linear %s 0\n49152 %s zero\n' $s $((8 * 1024 * 2048 - 49152)) |
		dmsetup --noudevsync create b$i || fail "dmsetup create b$i"
	bigs="$bigs /dev/mapper/b$i"
done
expect_rc 0 graidctl create bl --level 5 --chunk 64K --assume-clean $bigs
dev=$(array_dev "$OUT")
expect_rc 0 graidctl examine /dev/mapper/b1
expect_match 'Journal : partial parity log, 16384 sectors \(8 MiB\) at sector 2048' "$OUT" "examine of an 8 GiB member"
expect_match 'Data Offset : 34816 sectors \(17 MiB\)' "$OUT" "examine of an 8 GiB member"
fio_verify $dev 0 8M randwrite 4k-64k
[ "$(ppl_field bl entries)" -ge 64 ] || fail "partial writes not logged: $(graidctl detail bl)"
# (No check: it would read the 16 GiB of the zero targets.)
expect_rc 0 graidctl stop bl
for i in 0 1 2; do dmsetup --noudevsync remove b$i; done
unslice
unload_module
