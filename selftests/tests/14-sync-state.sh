# Whether an array's copies are known to be in sync, the resync that makes them so, and the
# dirty/clean marks that say whether a crash needs one (Documentation/on-disk-format.rst,
# "Clean and resync"):
# - CREATE without --assume-clean/--write-zeroes resyncs by itself; DETAIL shows it, `graidctl
#   wait` follows it, and afterwards the array and its superblocks say "in sync";
# - a resync not yet done survives stop and assemble: the superblocks say where it was
#   ("clean, resync pending from sector N"), and it goes on from there;
# - until the resync reaches a range, reads of it come from one fixed copy (the one it keeps);
#   after it, they spread over the copies again;
# - a check waits for the resync (refused); a repair makes a paused one go on;
# - writes mark the array dirty (DETAIL, examine); a quiet period marks it clean again;
# - --assume-clean and --write-zeroes start in sync.
. /graid/lib.sh
need_members 2
set -- $members
d0=$1 d1=$2

# state_line DEV: the State line of `graidctl examine`.
state_line() { graidctl examine "$1" | grep -m1 'State :'; }

echo "--- default: the array resyncs by itself"
expect_rc 0 graidctl create sync --level 1 $d0 $d1
echo "$OUT"
expect_match 'resyncing' "$OUT" "create message"
expect_rc 0 graidctl wait sync
echo "$OUT"
expect_match 'resync finished|no rebuild' "$OUT" "wait for the resync"
expect_rc 0 graidctl --json detail sync
expect_match '"resync_pending": false' "$OUT" "detail after the resync"
expect_rc 0 graidctl stop sync
expect_match 'State : clean$' "$(state_line $d0)" "superblock after the resync and a stop"

echo "--- a resync that waits: kept across stop and assemble, one copy read meanwhile"
load_module_with auto_resync=0
wipe_superblocks $d0 $d1
expect_rc 0 graidctl create sync --level 1 $d0 $d1
for round in 1 2; do
	expect_rc 0 graidctl --json detail sync
	expect_match '"resync_pending": true' "$OUT" "detail before resync $round"
	expect_rc 0 graidctl stop sync
	flag=$(state_line $d0)
	echo "after stop $round: $flag"
	expect_match 'clean, resync pending from sector 0' "$flag" "stop $round kept the resync due"
	expect_rc 0 graidctl assemble $d0 $d1
done
expect_rc 1 graidctl check sync
expect_match 'resyncing' "$OUT" "a check while the resync is due"
dev=$(graidctl detail sync | grep -o '/dev/graid[0-9]*' | head -n 1)
dd if=/dev/urandom of=/tmp/a bs=1M count=4 2>/dev/null
dd if=/dev/urandom of=/tmp/b bs=1M count=4 2>/dev/null
# 64 MiB into the array (member data areas start 2 MiB in).
dd if=/tmp/a of=$dev bs=1M seek=64 oflag=direct 2>/dev/null || fail "write through the array failed"
dd if=/tmp/b of=$d1 bs=1M seek=66 oflag=direct 2>/dev/null || fail "write to member 1 failed"
a_sum=$(sha256sum </tmp/a | cut -d" " -f1)
for i in 1 2 3 4 5 6 7 8; do
	got=$(dd if=$dev bs=64k skip=1024 count=64 iflag=direct 2>/dev/null | sha256sum | cut -d' ' -f1)
	[ "$got" = "$a_sum" ] || fail "read $i returned data of another copy"
done
expect_rc 0 graidctl --json detail sync
reads1=$(echo "$OUT" | tr -d '\n ' | sed 's/.*"role":1[^}]*"reads":\([0-9]*\).*/\1/')
[ "$reads1" = 0 ] || fail "member 1 served $reads1 reads while the copies are not in sync"

echo "--- a repair runs the resync: copy 0 wins, then reads spread"
expect_rc 0 graidctl repair sync --wait
echo "$OUT"
expect_match 'repair finished: [1-9][0-9]* mismatched sectors' "$OUT" "the resync found member 1's data"
expect_rc 0 graidctl --json detail sync
expect_match '"resync_pending": false' "$OUT" "after the resync"
got=$(dd if=$d1 bs=1M skip=66 count=4 iflag=direct 2>/dev/null | sha256sum | cut -d' ' -f1)
[ "$got" = "$a_sum" ] || fail "the resync did not copy copy 0 over member 1"
for i in 1 2 3 4; do
	got=$(dd if=$dev bs=64k skip=1024 count=64 iflag=direct 2>/dev/null | sha256sum | cut -d' ' -f1)
	[ "$got" = "$a_sum" ] || fail "read $i after the resync"
done
expect_rc 0 graidctl --json detail sync
reads1=$(echo "$OUT" | tr -d '\n ' | sed 's/.*"role":1[^}]*"reads":\([0-9]*\).*/\1/')
[ "$reads1" -gt 0 ] || fail "reads not spread over the copies after the resync"

echo "--- a resync stopped half way goes on from there after a stop and assemble"
expect_rc 0 graidctl stop sync
wipe_superblocks $d0 $d1
expect_rc 0 graidctl create half --level 1 $d0 $d1
expect_rc 0 graidctl set-speed half --min 8M --max 8M
expect_rc 0 graidctl repair half
sleep 3
expect_rc 0 graidctl check --stop half
expect_rc 0 graidctl stop half
flag=$(state_line $d0)
echo "$flag"
at=$(echo "$flag" | sed -n 's/.*resync pending from sector \([0-9]*\).*/\1/p')
[ -n "$at" ] && [ "$at" -gt 0 ] || fail "the stop did not record the resync's position: $flag"
expect_rc 0 graidctl assemble $d0 $d1
expect_rc 0 graidctl --json detail half
done_now=$(echo "$OUT" | tr -d '\n ' | sed -n 's/.*"scrub":{[^}]*"done_sectors":\([0-9]*\).*/\1/p')
[ -z "$done_now" ] || fail "the resync started without auto_resync: $OUT"
expect_rc 0 graidctl set-speed half --min 1M --max 1M
expect_rc 0 graidctl repair half
expect_rc 0 graidctl --json detail half
done_now=$(echo "$OUT" | tr -d '\n ' | sed -n 's/.*"scrub":{[^}]*"done_sectors":\([0-9]*\).*/\1/p')
[ -n "$done_now" ] && [ "$done_now" -ge "$at" ] || fail "the resync started over ($done_now < $at)"
expect_rc 0 graidctl set-speed half --max 0
expect_rc 0 graidctl wait half
expect_rc 0 graidctl stop half
expect_match 'State : clean$' "$(state_line $d0)" "superblock after the resync"
unload_module
load_module

echo "--- writes mark the array dirty, a quiet period clean"
wipe_superblocks $d0 $d1
expect_rc 0 graidctl create clean --level 1 --assume-clean $d0 $d1
dev=$(array_dev "$OUT")
expect_match 'State : clean$' "$(state_line $d0)" "superblock of a new array"
expect_match '"dirty": false' "$(graidctl --json detail clean)" "detail of a new array"
dd if=/dev/zero of=$dev bs=64k count=4000 oflag=direct 2>/dev/null &
writer=$!
usleep 500000
expect_match 'State : dirty' "$(state_line $d0)" "superblock while writing"
expect_match '"dirty": true' "$(graidctl --json detail clean)" "detail while writing"
wait $writer
sleep 1
expect_match 'State : clean$' "$(state_line $d0)" "superblock after a quiet second"
expect_match '"dirty": false' "$(graidctl --json detail clean)" "detail after a quiet second"

echo "--- --assume-clean: in sync, reads spread over the copies"
dd if=/tmp/a of=$dev bs=1M oflag=direct 2>/dev/null || fail "write through the array failed"
dd if=/tmp/b of=$d1 bs=1M seek=2 oflag=direct 2>/dev/null || fail "write to member 1 failed"
got=$(dd if=$dev bs=64k count=64 iflag=direct 2>/dev/null | sha256sum | cut -d' ' -f1)
[ "$got" != "$a_sum" ] || fail "in sync, yet every read came from copy 0"
expect_rc 0 graidctl stop clean
expect_match 'State : clean$' "$(state_line $d0)" "a synced mirror stopped"
expect_rc 0 graidctl assemble $d0 $d1
expect_rc 0 graidctl --json detail clean
expect_match '"resync_pending": false' "$OUT" "detail after assemble"
expect_rc 0 graidctl stop clean

echo "--- --write-zeroes: the drives zero their data areas, in sync"
wipe_superblocks $d0 $d1
dd if=/tmp/a of=$d0 bs=1M seek=2 oflag=direct 2>/dev/null || fail "write to member 0 failed"
dd if=/tmp/b of=$d1 bs=1M seek=2 oflag=direct 2>/dev/null || fail "write to member 1 failed"
expect_rc 0 graidctl create zero --level 1 --write-zeroes $d0 $d1
echo "$OUT"
expect_match 'zeroed' "$OUT" "create message"
expect_rc 0 graidctl --json detail zero
expect_match '"resync_pending": false' "$OUT" "detail after create --write-zeroes"
zeros=$(dd if=/dev/zero bs=1M count=4 2>/dev/null | sha256sum | cut -d' ' -f1)
for d in $d0 $d1; do
	got=$(dd if=$d bs=1M skip=2 count=4 iflag=direct 2>/dev/null | sha256sum | cut -d' ' -f1)
	[ "$got" = "$zeros" ] || fail "$d's data area was not zeroed"
done
expect_rc 0 graidctl stop zero
expect_rc 2 graidctl create both --level 1 --write-zeroes --assume-clean $d0 $d1

wipe_superblocks $d0 $d1
unload_module
