# Whether a mirror's copies are known to be in sync, and what the array does about it:
# - CREATE says how the mirrors start: resync pending (the default), --assume-clean, or
#   --write-zeroes (the drives zero their data areas, which then read back as zeroes);
# - the "not in sync" state survives stop and assemble (a stop never writes "clean" over it);
# - while not in sync, every read of a range comes from one fixed copy (the same data every
#   time), while in sync reads are spread over the copies.
. /graid/lib.sh
need_members 2
set -- $members
d0=$1 d1=$2

# clean_flag DEV: the State line of `graidctl examine`.
clean_flag() { graidctl examine "$1" | grep -m1 'State :'; }

echo "--- default: resync pending, kept across stop/assemble"
expect_rc 0 graidctl create sync --level 1 $d0 $d1
echo "$OUT"
expect_match 'resync pending' "$OUT" "create message"
expect_rc 0 graidctl --json detail sync
expect_match '"resync_pending": true' "$OUT" "detail after create"
for round in 1 2; do
	expect_rc 0 graidctl stop sync
	flag=$(clean_flag $d0)
	echo "after stop $round: $flag"
	expect_match 'dirty' "$flag" "stop $round kept the unsynced state"
	expect_rc 0 graidctl assemble $d0 $d1
	expect_rc 0 graidctl --json detail sync
	expect_match '"resync_pending": true' "$OUT" "detail after assemble $round"
done

echo "--- not in sync: reads come from one copy"
dev=$(graidctl detail sync | grep -o '/dev/graid[0-9]*' | head -n 1)
dd if=/dev/urandom of=/tmp/a bs=1M count=4 2>/dev/null
dd if=/dev/urandom of=/tmp/b bs=1M count=4 2>/dev/null
dd if=/tmp/a of=$dev bs=1M oflag=direct 2>/dev/null || fail "write through the array failed"
# Member 1 holds other data now (its data area starts 2 MiB in).
dd if=/tmp/b of=$d1 bs=1M seek=2 oflag=direct 2>/dev/null || fail "write to member 1 failed"
a_sum=$(sha256sum </tmp/a | cut -d" " -f1)
for i in 1 2 3 4 5 6 7 8; do
	got=$(dd if=$dev bs=64k count=64 iflag=direct 2>/dev/null | sha256sum | cut -d' ' -f1)
	[ "$got" = "$a_sum" ] || fail "read $i returned data of another copy"
done
expect_rc 0 graidctl --json detail sync
# Member 1 (copy 1) served no read.
reads1=$(echo "$OUT" | tr -d '\n ' | sed 's/.*"role":1[^}]*"reads":\([0-9]*\).*/\1/')
[ "$reads1" = 0 ] || fail "member 1 served $reads1 reads while the copies are not in sync"
expect_rc 0 graidctl stop sync

echo "--- --assume-clean: in sync, reads spread over the copies"
wipe_superblocks $d0 $d1
expect_rc 0 graidctl create clean --level 1 --assume-clean $d0 $d1
echo "$OUT"
expect_match 'assume-clean' "$OUT" "create message"
dev=$(array_dev "$OUT")
expect_rc 0 graidctl --json detail clean
expect_match '"resync_pending": false' "$OUT" "detail after create --assume-clean"
dd if=/tmp/a of=$dev bs=1M oflag=direct 2>/dev/null || fail "write through the array failed"
dd if=/tmp/b of=$d1 bs=1M seek=2 oflag=direct 2>/dev/null || fail "write to member 1 failed"
got=$(dd if=$dev bs=64k count=64 iflag=direct 2>/dev/null | sha256sum | cut -d' ' -f1)
[ "$got" != "$a_sum" ] || fail "in sync, yet every read came from copy 0"
expect_rc 0 graidctl stop clean
flag=$(clean_flag $d0)
echo "after stop: $flag"
expect_match 'State : clean' "$flag" "a synced mirror stopped"
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
dev=$(array_dev "$OUT")
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
