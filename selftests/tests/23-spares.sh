# Spares (RAID 5 and RAID 1, on 64 MiB dm-linear slices of the drives):
# - graidctl add to an optimal array makes a spare: DETAIL lists it, its superblock says so,
#   a uevent announces it, it comes back with the array at assembly; adding or failing it
#   again is refused;
# - a member failed by hand while fio writes and verifies: the spare takes its place by itself
#   (the failed device is released), is rebuilt, and then holds its part alone;
# - a member failed by I/O errors (its slice switched to dm's error target) under writes: the
#   same, with no command at all; the failure, the takeover and the rebuild's end each come
#   with a uevent;
# - a degraded assembly (--run, a member missing) puts the spare in the missing role at once;
# - graidctl remove releases a spare; its slot is retired, so it is refused if it comes back.
. /graid/lib.sh
need_members 4
set -- $members
d0=$1 d1=$2 d2=$3 d3=$4
export DM_DISABLE_UDEV=1

detail_json() { graidctl --json detail sp | tr -d '\n '; }
# wait_taken_over ROLE SLICE SECONDS: waits until no spare is left and SLICE holds ROLE.
wait_taken_over() {
	n=0
	while ! detail_json | grep -q "\"spares\":\[\]"; do
		n=$((n + 1))
		[ $n -le $(($3 * 5)) ] || fail "no takeover in $3 s: $(graidctl detail sp)"
		usleep 200000
	done
	expect_rc 0 graidctl detail sp
	expect_match "^ *$1 +$(dm_node $2) +(rebuilding|active)" "$OUT" "the spare $2 in role $1"
}

wipe_superblocks $d0 $d1 $d2 $d3
dm_slices $d0 $d1 $d2 $d3
s0=/dev/mapper/s0 s1=/dev/mapper/s1 s2=/dev/mapper/s2 s3=/dev/mapper/s3

echo "--- RAID 5: add makes a spare; it survives a stop and assembly"
expect_rc 0 graidctl create sp --level 5 --chunk 64K --write-zeroes $s0 $s1 $s2
dev=$(array_dev "$OUT")
fio_verify "$dev" 0 16M randwrite 4k-128k
uevents_start
expect_rc 0 graidctl add sp $s3
expect_match "added $s3 to $dev \(sp\) as a spare" "$OUT" "add's report"
expect_rc 0 graidctl detail sp
expect_match "Spares : $(dm_node s3)" "$OUT" "DETAIL lists the spare"
expect_match '"state":"optimal"' "$(detail_json)" "the array with a spare"
expect_rc 0 graidctl examine $s3
expect_match 'Device Role : spare' "$OUT" "the spare's superblock"
expect_rc 1 graidctl add sp $s3
expect_match 'a spare of it already' "$OUT" "adding a spare twice"
expect_rc 1 graidctl fail sp $s3
expect_match 'a spare of it already' "$OUT" "failing a spare"
expect_rc 0 graidctl stop sp
expect_rc 0 graidctl assemble sp $s0 $s1 $s2 $s3
dev=$(array_dev "$OUT")
expect_match "\"spares\":\[\{\"device\":\"$(dm_node s3)\"" "$(detail_json)" "the spare after assembly"

echo "--- RAID 5: a member failed by hand under writes is replaced by the spare"
fio --name=write $(fio_args "$dev" 16M 16M randwrite 4k-128k) >/tmp/fio.out 2>&1 &
writer=$!
usleep 300000
expect_rc 0 graidctl fail sp $s1
wait_taken_over 1 s3 60
finishes $writer 300 "fio" || { cat /tmp/fio.out; fail "fio verify failed across the takeover"; }
expect_rc 0 graidctl wait sp
events=$(uevents_stop)
expect_match "GRAID_EVENT=spare-added GRAID_MEMBER=spare " "$events" "the spare's uevent"
expect_match "GRAID_EVENT=spare-activated GRAID_MEMBER=1 " "$events" "the takeover's uevent"
expect_match '"state":"optimal"' "$(detail_json)" "the array after the takeover"
# The former spare now holds its part alone.
expect_rc 0 graidctl fail sp $s0
echo 3 >/proc/sys/vm/drop_caches
fio_readback "$dev" 0 16M randwrite 4k-128k "data written before the takeover lost"
fio_readback "$dev" 16M 16M randwrite 4k-128k "data written during the takeover lost"
expect_rc 0 graidctl stop sp

echo "--- RAID 1: I/O errors fail a member under writes; the spare takes over by itself"
wipe_superblocks $s0 $s1 $s2 $s3
expect_rc 0 graidctl create sp --level 1 --write-zeroes $s0 $s1
dev=$(array_dev "$OUT")
fio_verify "$dev" 0 16M randwrite 4k-128k
expect_rc 0 graidctl add sp $s2
uevents_start
fio --name=write $(fio_args "$dev" 16M 16M randwrite 4k-128k) >/tmp/fio.out 2>&1 &
writer=$!
usleep 300000
slice_error s1
wait_taken_over 1 s2 60
finishes $writer 300 "fio" || { cat /tmp/fio.out; fail "fio verify failed across the takeover"; }
expect_rc 0 graidctl wait sp
# The failure the array decided itself, the takeover and the rebuild's end, each announced.
events=$(uevents_stop)
expect_match "GRAID_EVENT=member-failed GRAID_MEMBER=1 .*GRAID_EVENT=spare-activated GRAID_MEMBER=1 " \
	"$events" "the failure's and the takeover's uevents"
expect_match "GRAID_EVENT=rebuild-finished GRAID_MEMBER=1 " "$events" "the rebuild's uevent"
expect_rc 0 graidctl fail sp $s0
echo 3 >/proc/sys/vm/drop_caches
fio_readback "$dev" 0 32M randwrite 4k-128k "data lost across an automatic takeover"
expect_rc 0 graidctl stop sp
slice_linear s1 $d1

echo "--- RAID 1: a degraded assembly puts the spare in the missing role"
wipe_superblocks $s0 $s1 $s2 $s3
expect_rc 0 graidctl create sp --level 1 --write-zeroes $s0 $s1
dev=$(array_dev "$OUT")
fio_verify "$dev" 0 16M randwrite 4k-128k
expect_rc 0 graidctl add sp $s2
expect_rc 0 graidctl stop sp
expect_rc 0 graidctl assemble --run sp $s0 $s2
dev=$(array_dev "$OUT")
wait_taken_over 1 s2 60
expect_rc 0 graidctl wait sp
expect_rc 0 graidctl fail sp $s0
fio_readback "$dev" 0 16M randwrite 4k-128k "data lost through a spare taken at assembly"
expect_rc 0 graidctl stop sp

echo "--- RAID 1: remove releases a spare, which is then refused"
wipe_superblocks $s0 $s1 $s2 $s3
expect_rc 0 graidctl create sp --level 1 --write-zeroes $s0 $s1
expect_rc 0 graidctl add sp $s2
expect_rc 0 graidctl remove sp $s2
expect_match "removed spare $s2" "$OUT" "remove's report"
expect_match '"spares":\[\]' "$(detail_json)" "the spares after remove"
expect_rc 0 graidctl stop sp
expect_rc 1 graidctl assemble sp $s0 $s1 $s2
expect_match 'stale|faulty' "$OUT" "a removed spare at assembly"
expect_rc 0 graidctl assemble sp $s0 $s1
expect_rc 0 graidctl stop sp

for i in 0 1 2 3; do dmsetup --noudevsync remove s$i; done
wipe_superblocks $d0 $d1 $d2 $d3
unload_module
