# md's member-failure rules on RAID 1 and 10, with device-mapper under the members:
# - a read error is repaired from another copy: the bad blocks (dm-dust, cleared by a write)
#   are rewritten, verified reads go on, the member stays, DETAIL counts the corrections;
# - the last copy is never failed: its read errors fail the read only, its write errors fail
#   the write and the array refuses writes from then on ("broken"), reads go on;
# - a discard error fails nothing;
# - a member that cannot take its superblock is failed, and the others record it.
# (A member whose writes fail is failed: 13-member-dies-under-writeback.)
. /graid/lib.sh
need_members 4
# Arrays not in sync keep reading copy 0 (their resync waits to be asked for): the read
# repairs below need every read to go to member 0. Arrays stay marked dirty for a minute after
# a write: the discard case needs its array dirty before its member's writes start failing (the
# superblock write that marks it dirty would fail that member, as md's would). Likewise its
# write-intent bits stay set for ten minutes: a bit cleared while idle is set again by the
# discard, and that bitmap write would fail the member (seen on the debug kernel, whose writes
# and verifies outlast the 5 s looks).
load_module_with auto_resync=0 safe_mode_delay_ms=60000 bitmap_clean_ms=600000
set -- $members
d0=$1 d1=$2 d2=$3 d3=$4
export DM_DISABLE_UDEV=1
modprobe dm-dust || fail "cannot load dm-dust"
modprobe dm-flakey || fail "cannot load dm-flakey"

sectors_of() { cat /sys/class/block/${1#/dev/}/size; }
# flakey NAME DEV [FEATURE]: (re)loads NAME over DEV, healthy, or failing FEATURE
# (error_reads, error_writes) from now on.
flakey() {
	if [ -n "${3:-}" ]; then t="0 $(sectors_of $2) flakey $2 0 0 1 1 $3"; else t="0 $(sectors_of $2) flakey $2 0 1 0"; fi
	if [ -b /dev/mapper/$1 ]; then
		dmsetup load $1 --table "$t" && dmsetup resume $1
	else
		dmsetup --noudevsync create $1 --table "$t"
	fi || fail "dmsetup $1 ($t) failed"
}
json_count() { echo "$2" | grep -c "$1"; }

for level in 1 10; do
	echo "--- RAID $level: read errors on member 0 are repaired from the other copy"
	wipe_superblocks $d0 $d1 $d2 $d3
	dmsetup --noudevsync create dust0 --table "0 $(sectors_of $d0) dust $d0 0 4096" || fail "dmsetup dust0"
	if [ $level = 1 ]; then m="/dev/mapper/dust0 $d1"; else m="/dev/mapper/dust0 $d1 $d2 $d3"; fi
	# Not in sync (no --assume-clean): every read goes to copy 0, so to member 0.
	expect_rc 0 graidctl create mf --level $level $m
	dev=$(array_dev "$OUT")
	fio_verify "$dev" 0 32M randwrite 4k-256k
	# Bad blocks in member 0's part of the first 32 MiB (its data area starts at block 512).
	for b in 520 700 1100 1800 2600 3300 4000 4500; do
		dmsetup message dust0 0 addbadblock $b >/dev/null || fail "addbadblock $b failed"
	done
	dmsetup message dust0 0 enable >/dev/null || fail "dust enable failed"
	fio_readback "$dev" 0 32M randwrite 4k-256k "verified read-back failed with bad blocks on a mirror"
	expect_rc 0 graidctl --json detail mf
	detail=$OUT
	expect_match '"state": "optimal"' "$detail" "array state after repairs"
	[ "$(json_count '"state": "active"' "$detail")" = $(echo $m | wc -w) ] || fail "a member was failed: $detail"
	expect_match '"corrected": [1-9]' "$detail" "repaired read errors in DETAIL"
	left=$(dmsetup message dust0 0 countbadblocks 2>&1)
	expect_match 'countbadblocks: 0 badblock' "$left" "bad blocks left after the repairs"
	fio_readback "$dev" 0 32M randwrite 4k-256k "second read-back failed"
	expect_rc 0 graidctl detail mf
	echo "$OUT"
	expect_rc 0 graidctl stop mf
	dmsetup --noudevsync remove dust0 || fail "dmsetup remove dust0"
done

echo "--- RAID 1: the last copy is never failed"
wipe_superblocks $d0 $d1
flakey fl0 $d0
flakey fl1 $d1
expect_rc 0 graidctl create last --level 1 --assume-clean /dev/mapper/fl0 /dev/mapper/fl1
dev=$(array_dev "$OUT")
fio_verify "$dev" 0 16M randwrite 4k-64k
flakey fl1 $d1 error_writes
fio_verify "$dev" 16M 8M randwrite 4k-64k
expect_rc 0 graidctl --json detail last
expect_match '"state": "degraded"' "$OUT" "after member 1's writes failed"
# Member 0 is the last copy now: its read errors fail the reads, nothing else.
flakey fl0 $d0 error_reads
dd if="$dev" of=/dev/null bs=64k count=16 iflag=direct 2>/dev/null && fail "a read of a failing last copy succeeded"
expect_rc 0 graidctl --json detail last
expect_match '"state": "degraded"' "$OUT" "after the last copy's read errors"
[ "$(json_count '"state": "active"' "$OUT")" = 1 ] || fail "the last copy was failed on a read error: $OUT"
# Its write errors fail the write, and the array takes no more writes; reads go on.
flakey fl0 $d0 error_writes
dd if=/dev/zero of="$dev" bs=4k count=1 oflag=direct 2>/dev/null && fail "a write to a failing last copy succeeded"
expect_rc 0 graidctl --json detail last
expect_match '"state": "broken"' "$OUT" "after the last copy's write error"
[ "$(json_count '"state": "active"' "$OUT")" = 1 ] || fail "the last copy was failed on a write error: $OUT"
flakey fl0 $d0
dd if=/dev/zero of="$dev" bs=4k count=1 oflag=direct 2>/dev/null && fail "a broken array took a write"
fio_readback "$dev" 0 16M randwrite 4k-64k "a broken array stopped serving reads"
expect_rc 0 graidctl stop last
dmsetup --noudevsync remove fl0 || fail "dmsetup remove fl0"

echo "--- RAID 1: a discard error fails nothing"
wipe_superblocks $d0 $d1
flakey fl1 $d1
expect_rc 0 graidctl create disc --level 1 --assume-clean $d0 /dev/mapper/fl1
dev=$(array_dev "$OUT")
fio_verify "$dev" 0 8M randwrite 4k-64k
flakey fl1 $d1 error_writes
blkdiscard -o 0 -l 4194304 "$dev" || fail "a discard failed on one copy was reported"
flakey fl1 $d1
expect_rc 0 graidctl --json detail disc
expect_match '"state": "optimal"' "$OUT" "after a discard error"
expect_rc 0 graidctl stop disc

echo "--- RAID 1: a member that cannot take its superblock is failed"
wipe_superblocks $d0 $d1 $d2
expect_rc 0 graidctl create sbw --level 1 --assume-clean $d0 /dev/mapper/fl1 $d2
dev=$(array_dev "$OUT")
fio_verify "$dev" 0 8M randwrite 4k-64k
# No data writes from here on: the stop's superblock update is the only write member 1 fails.
flakey fl1 $d1 error_writes
expect_rc 0 graidctl stop sbw
flakey fl1 $d1
expect_rc 0 graidctl examine $d0
echo "$OUT" | grep -i -E 'events|slot|faulty' | head -n 8
expect_match '[Ff]aulty' "$OUT" "member 1 recorded as faulty on member 0"
expect_rc 1 graidctl assemble $d0 /dev/mapper/fl1 $d2
expect_match 'fl1|dm-' "$OUT" "the refusal names the failed member"
echo "$OUT"

dmsetup --noudevsync remove fl1 || fail "dmsetup remove fl1"
wipe_superblocks $d0 $d1 $d2 $d3
unload_module
