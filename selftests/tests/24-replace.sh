# Replace (graidctl replace OLD --with NEW), on 64 MiB dm-linear slices of the drives:
# - RAID 1 under fio writes: NEW is copied and gets every write, then takes OLD's role; OLD
#   leaves the array (released, in no DETAIL); uevents replace-started, member-replaced; NEW
#   then holds all the data alone;
# - RAID 5 with a spare (no --with) and --wait, under writes: check finds no mismatch after;
#   OLD is refused at assembly, and the data reads back through NEW with another member failed;
# - NEW fails mid-copy (dm's error target): the replace ends (replace-failed), the member stays,
#   nothing is lost, and NEW is refused at assembly;
# - OLD fails mid-copy under writes: NEW goes back to the spares (replace-abandoned) and takes
#   OLD's place by itself (spare-activated), rebuilt; nothing is lost;
# - a stop in the middle leaves NEW a spare; failing NEW cancels a replace; every refusal
#   changes nothing; re-add puts a removed member back in its own role.
. /graid/lib.sh
need_members 4
set -- $members
d0=$1 d1=$2 d2=$3 d3=$4
export DM_DISABLE_UDEV=1

detail_json() { graidctl --json detail rp | tr -d '\n '; }
# no_replace SECONDS: waits until no replace runs.
no_replace() {
	n=0
	while detail_json | grep -q '"replace":{'; do
		n=$((n + 1))
		[ $n -le $(($1 * 5)) ] || fail "the replace still runs after $1 s: $(graidctl detail rp)"
		usleep 200000
	done
}

wipe_superblocks $d0 $d1 $d2 $d3
dm_slices $d0 $d1 $d2 $d3
s0=/dev/mapper/s0 s1=/dev/mapper/s1 s2=/dev/mapper/s2 s3=/dev/mapper/s3

echo "--- RAID 1: replace under writes; the new device takes the role, the old one leaves"
expect_rc 0 graidctl create rp --level 1 --write-zeroes $s0 $s1
dev=$(array_dev "$OUT")
fio_verify "$dev" 0 16M randwrite 4k-128k
uevents_start
fio --name=write $(fio_args "$dev" 16M 16M randwrite 4k-128k) >/tmp/fio.out 2>&1 &
writer=$!
usleep 300000
expect_rc 0 graidctl replace rp $s1 --with $s2
expect_match "replacing $s1 \(role 1\) in $dev \(rp\) by $(dm_node s2)" "$OUT" "replace's report"
expect_rc 0 graidctl wait rp
# On a busy host the replace may be over before wait looks; what follows checks its outcome.
expect_match "replace of role 1 finished: $(dm_node s2) took its place|no rebuild, check or repair running" \
	"$OUT" "wait's report"
finishes $writer 300 "fio" || { cat /tmp/fio.out; fail "fio verify failed across the replace"; }
events=$(uevents_stop)
expect_match "GRAID_EVENT=replace-started GRAID_MEMBER=1 .*GRAID_EVENT=member-replaced GRAID_MEMBER=1 " \
	"$events" "the replace's uevents"
expect_rc 0 graidctl detail rp
expect_match "^ *1 +$(dm_node s2) +active" "$OUT" "the new device in role 1"
echo "$OUT" | grep -q "$(dm_node s1)" && fail "the old device is still in the array: $OUT"
# Released: nothing holds it open any more.
[ "$(dmsetup info -c --noheadings -o open s1 | tr -d ' ')" = 0 ] || fail "the old device is still open"
expect_match '"state":"optimal"' "$(detail_json)" "the array after the replace"
# The new device holds everything alone.
expect_rc 0 graidctl fail rp $s0
echo 3 >/proc/sys/vm/drop_caches
fio_readback "$dev" 0 16M randwrite 4k-128k "data written before the replace lost"
fio_readback "$dev" 16M 16M randwrite 4k-128k "data written during the replace lost"
expect_rc 0 graidctl stop rp

echo "--- RAID 5: replace by a spare with --wait under writes; OLD is refused afterwards"
wipe_superblocks $s0 $s1 $s2 $s3
expect_rc 0 graidctl create rp --level 5 --chunk 64K --write-zeroes $s0 $s1 $s2
dev=$(array_dev "$OUT")
fio_verify "$dev" 0 16M randwrite 4k-128k
expect_rc 0 graidctl add rp $s3
fio --name=write $(fio_args "$dev" 16M 16M randwrite 4k-128k) >/tmp/fio.out 2>&1 &
writer=$!
usleep 300000
expect_rc 0 graidctl replace --wait rp $s0
expect_match "replace of role 0 finished: $(dm_node s3) took its place" "$OUT" "replace --wait"
finishes $writer 300 "fio" || { cat /tmp/fio.out; fail "fio verify failed across the replace"; }
expect_rc 0 graidctl check rp
expect_rc 0 graidctl wait rp
expect_match "check finished: 0 mismatched sectors" "$OUT" "the parity after the replace"
expect_rc 0 graidctl stop rp
expect_rc 1 graidctl assemble rp $s0 $s1 $s2 $s3
expect_match 'stale|faulty' "$OUT" "the replaced device at assembly"
expect_rc 0 graidctl assemble rp $s1 $s2 $s3
dev=$(array_dev "$OUT")
expect_rc 0 graidctl fail rp $s1
echo 3 >/proc/sys/vm/drop_caches
fio_readback "$dev" 0 32M randwrite 4k-128k "data lost through the replacement's data and parity"
expect_rc 0 graidctl stop rp

echo "--- RAID 1: the replacement fails mid-copy: the replace ends, the member stays"
wipe_superblocks $s0 $s1 $s2 $s3
expect_rc 0 graidctl create rp --level 1 --write-zeroes $s0 $s1
dev=$(array_dev "$OUT")
fio_verify "$dev" 0 16M randwrite 4k-128k
expect_rc 0 graidctl set-speed rp --min 1M --max 1M
uevents_start
expect_rc 0 graidctl replace rp $s1 --with $s2
usleep 500000
expect_rc 0 graidctl detail rp
expect_match "Replace : role 1 by $(dm_node s2): copying" "$OUT" "DETAIL during the copy"
slice_error s2
fio --name=write $(fio_args "$dev" 16M 16M randwrite 4k-128k) >/tmp/fio.out 2>&1 &
writer=$!
no_replace 60
finishes $writer 300 "fio" || { cat /tmp/fio.out; fail "fio verify failed as the replacement failed"; }
events=$(uevents_stop)
expect_match "GRAID_EVENT=replace-failed GRAID_MEMBER=1 " "$events" "the failed replace's uevent"
expect_match '"state":"optimal"' "$(detail_json)" "the array after a failed replace"
expect_match '"spares":\[\]' "$(detail_json)" "a failed replacement is no spare"
expect_rc 0 graidctl detail rp
expect_match "^ *1 +$(dm_node s1) +active" "$OUT" "the member kept its role"
expect_rc 0 graidctl fail rp $s0
echo 3 >/proc/sys/vm/drop_caches
fio_readback "$dev" 0 32M randwrite 4k-128k "data lost as the replacement failed"
expect_rc 0 graidctl stop rp
slice_linear s2 $d2
expect_rc 1 graidctl assemble --run rp $s1 $s2
expect_match 'stale|faulty' "$OUT" "the failed replacement at assembly"

echo "--- RAID 1 of 3: the member fails mid-copy under writes; its replacement takes its place"
wipe_superblocks $s0 $s1 $s2 $s3
expect_rc 0 graidctl create rp --level 1 --write-zeroes $s0 $s1 $s2
dev=$(array_dev "$OUT")
fio_verify "$dev" 0 16M randwrite 4k-128k
expect_rc 0 graidctl set-speed rp --min 1M --max 1M
uevents_start
expect_rc 0 graidctl replace rp $s1 --with $s3
usleep 500000
fio --name=write $(fio_args "$dev" 16M 16M randwrite 4k-128k) >/tmp/fio.out 2>&1 &
writer=$!
usleep 300000
slice_error s1
n=0
until graidctl detail rp | grep -Eq "^ *1 +$(dm_node s3) +(rebuilding|active)"; do
	n=$((n + 1))
	[ $n -le 300 ] || fail "the replacement did not take the failed member's place: $(graidctl detail rp)"
	usleep 200000
done
expect_rc 0 graidctl set-speed rp --min 100M --max 0
expect_rc 0 graidctl wait rp
finishes $writer 300 "fio" || { cat /tmp/fio.out; fail "fio verify failed as the member failed"; }
events=$(uevents_stop)
expect_match "GRAID_EVENT=replace-abandoned GRAID_MEMBER=1 .*GRAID_EVENT=spare-activated GRAID_MEMBER=1 " \
	"$events" "the abandoned replace's uevents"
# The former replacement, rebuilt, holds everything alone.
expect_rc 0 graidctl fail rp $s0
expect_rc 0 graidctl fail rp $s2
echo 3 >/proc/sys/vm/drop_caches
fio_readback "$dev" 0 32M randwrite 4k-128k "data lost as the member being replaced failed"
expect_rc 0 graidctl stop rp
slice_linear s1 $d1

echo "--- a stop in the middle leaves the replacement a spare; refusals change nothing"
wipe_superblocks $s0 $s1 $s2 $s3
expect_rc 0 graidctl create rp --level 1 --write-zeroes $s0 $s1
dev=$(array_dev "$OUT")
fio_verify "$dev" 0 8M randwrite 4k-128k
expect_rc 0 graidctl set-speed rp --min 1M --max 1M
expect_rc 0 graidctl replace rp $s1 --with $s2
expect_rc 1 graidctl replace rp $s0 --with $s3
expect_match 'a replace of role 1 runs already' "$OUT" "a second replace"
expect_rc 1 graidctl check rp
expect_rc 0 graidctl stop rp
expect_rc 0 graidctl assemble rp $s0 $s1 $s2
dev=$(array_dev "$OUT")
expect_match "\"spares\":\[\{\"device\":\"$(dm_node s2)\"" "$(detail_json)" "the replacement after a stop"
echo "$(detail_json)" | grep -q '"replace":{' && fail "a replace after assembly: $(graidctl detail rp)"
expect_rc 1 graidctl replace rp $s0 --with $s1
expect_match 'a member of it already' "$OUT" "replacing by a member"
fio_readback "$dev" 0 8M randwrite 4k-128k "data lost across a stop in the middle of a replace"
# Failing the replacement cancels the replace (no --with: the spare is taken). The speed is
# the assembled array's default again: held low, or the copy can end before the fail.
expect_rc 0 graidctl set-speed rp --min 1M --max 1M
expect_rc 0 graidctl replace rp $s1
expect_rc 0 graidctl fail rp $s2
expect_match "the replacement of role 1 in $dev \(rp\): the replace stops" "$OUT" "failing a replacement"
no_replace 30
expect_match '"spares":\[\]' "$(detail_json)" "a failed replacement is released"
expect_rc 0 graidctl set-speed rp --max 0
expect_rc 0 graidctl fail rp $s1
expect_rc 1 graidctl replace rp $s1 --with $s3
expect_match 'it is faulty' "$OUT" "replacing a failed member"
expect_rc 1 graidctl replace rp $s0 --with $s3
expect_match 'degraded' "$OUT" "replacing in a degraded array"
expect_match '"spares":\[\]' "$(detail_json)" "a refused replace adds no spare"
# re-add: the failed member, removed, goes back in its own role (the write-intent bitmap
# covers its absence: only what changed meanwhile is rebuilt; test 29 times that part).
expect_rc 0 graidctl remove rp $s1
expect_rc 1 graidctl re-add rp $s3
expect_match 'no readable graid superblock' "$OUT" "re-adding a blank device"
expect_rc 0 graidctl re-add rp $s1
expect_match "re-added $s1 \(role 1\) to $dev \(rp\), rebuilding what the write-intent bitmap marks" "$OUT" "re-add's report"
expect_rc 0 graidctl wait rp
expect_rc 0 graidctl fail rp $s0
echo 3 >/proc/sys/vm/drop_caches
fio_readback "$dev" 0 8M randwrite 4k-128k "data lost through a re-added member"
expect_rc 0 graidctl stop rp
wipe_superblocks $s0 $s1 $s2 $s3
expect_rc 0 graidctl create rp --level 0 --chunk 64K $s0 $s1
expect_rc 1 graidctl replace rp $s0 --with $s2
expect_match 'RAID 0' "$OUT" "replacing a RAID 0 member"
expect_rc 0 graidctl stop rp

for i in 0 1 2 3; do dmsetup --noudevsync remove s$i; done
wipe_superblocks $d0 $d1 $d2 $d3
unload_module
