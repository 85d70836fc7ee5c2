# ASSEMBLE: an array comes back from its superblocks alone (members in any order, after the
# module was reloaded, and by --scan) with its data intact; stale, foreign, corrupt, blank,
# busy and missing members are refused with a reason naming the member.
. /graid/lib.sh
need_members 4
set -- $members
d0=$1 d1=$2 d2=$3 d3=$4

sb_read() { echo 3 >/proc/sys/vm/drop_caches; dd if="$1" of="$2" bs=4096 skip=1 count=1 2>/dev/null; }
sb_write() { dd if="$2" of="$1" bs=4096 seek=1 count=1 conv=fsync 2>/dev/null; echo 3 >/proc/sys/vm/drop_caches; }

echo "--- create, write, stop, assemble in another order"
expect_rc 0 graidctl create asm --level 10 --chunk 64K $d0 $d1 $d2 $d3
dev=$(array_dev "$OUT")
fio_verify "$dev" 0 32M randwrite 4k-256k
expect_rc 0 graidctl stop asm
expect_rc 0 graidctl assemble $d2 $d0 $d3 $d1
echo "$OUT"
dev=$(array_dev "$OUT")
[ -b "$dev" ] || fail "no array device after assemble: $OUT"
fio_readback "$dev" 0 32M randwrite 4k-256k "data lost across stop/assemble"
expect_rc 0 graidctl --json detail asm
events=$(json_field events "$OUT")
[ "$events" -ge 3 ] 2>/dev/null || fail "events did not advance across stop/assemble: '$events'"
for role in 0 1 2 3; do
	echo "$OUT" | grep -q "\"role\": $role" || fail "role $role missing from detail"
done
expect_rc 0 graidctl stop asm

echo "--- reload the module (all in-memory state gone) and assemble --scan"
unload_module
load_module
expect_rc 0 graidctl assemble --scan
echo "$OUT"
expect_rc 0 graidctl --json detail asm
fio_readback "$(array_dev "$(graidctl detail asm)")" 0 32M randwrite 4k-256k \
	"data lost across module reload + assemble --scan"

echo "--- a running array's members are busy"
expect_rc 1 graidctl assemble $d0 $d1 $d2 $d3
echo "$OUT"
expect_rc 0 graidctl stop asm

echo "--- stale member"
sb_read $d1 /tmp/old-d1
expect_rc 0 graidctl assemble $d0 $d1 $d2 $d3
expect_rc 0 graidctl stop asm
sb_write $d1 /tmp/old-d1
expect_rc 1 graidctl assemble $d0 $d1 $d2 $d3
echo "$OUT"
expect_match "$d1" "$OUT" "stale refusal names the member"
expect_match "stale" "$OUT" "stale refusal says why"
wipe_superblocks $d1

echo "--- foreign member"
wipe_superblocks $d0 $d2 $d3
# udev's probe of each new disk holds it open a moment (long enough on a debug kernel for
# the stop to find it open): it ends first.
expect_rc 0 graidctl create one --level 1 $d0 $d1
udevadm settle
expect_rc 0 graidctl stop one
expect_rc 0 graidctl create two --level 1 $d2 $d3
udevadm settle
expect_rc 0 graidctl stop two
expect_rc 1 graidctl assemble $d0 $d2
echo "$OUT"
expect_match "$d2" "$OUT" "foreign refusal names the member"

echo "--- missing member (degraded start is not supported yet)"
expect_rc 1 graidctl assemble $d0
echo "$OUT"

echo "--- corrupt superblock"
printf '\377' | dd of=$d1 bs=1 seek=$((4096 + 100)) conv=notrunc,fsync 2>/dev/null
echo 3 >/proc/sys/vm/drop_caches
expect_rc 1 graidctl assemble $d0 $d1
echo "$OUT"
expect_match "$d1" "$OUT" "corrupt refusal names the member"

echo "--- blank member"
wipe_superblocks $d1
expect_rc 1 graidctl assemble $d0 $d1
echo "$OUT"
expect_match "$d1" "$OUT" "blank refusal names the member"

echo "--- shrunk member"
# A member smaller than the data area its superblock describes (a shrunk LV or partition, a
# superblock copied to a smaller disk) would take I/O past its end.
export DM_DISABLE_UDEV=1
wipe_superblocks $d0 $d1
sectors=$(cat /sys/class/block/${d1#/dev/}/size)
dmsetup --noudevsync create small1 --table "0 $sectors linear $d1 0" || fail "dmsetup create failed"
expect_rc 0 graidctl create shrink --level 1 --assume-clean $d0 /dev/mapper/small1
expect_rc 0 graidctl stop shrink
dmsetup load small1 --table "0 $((sectors - 2048)) linear $d1 0" && dmsetup resume small1 ||
	fail "dmsetup reload failed"
expect_rc 1 graidctl assemble $d0 /dev/mapper/small1
echo "$OUT"
expect_match "small1|dm-" "$OUT" "the refusal names the short member"
expect_match "too small" "$OUT" "the refusal says why"
dmsetup --noudevsync remove small1 || fail "dmsetup remove failed"
wipe_superblocks $d0 $d1

# Nothing is left running, and the good array still assembles.
expect_rc 0 graidctl assemble $d2 $d3
expect_rc 0 graidctl stop two
wipe_superblocks $d0 $d1 $d2 $d3
unload_module
