# A restripe that loses a member goes on degraded, as md's reshape does (issue 46 item 4,
# engine/reshape_move.rs), on 32 MiB dm-linear slices (two per drive):
# - RAID 5 of three plus a spare grown to four under fio; a member dies in the middle (its slice
#   turns into dm-error): the spare takes its place at once, the restripe moves on degraded,
#   every write reads back; once it ended the spare is rebuilt in the new geometry, check 0,
#   and md's raid5 over the four reads every write and its check agrees;
# - a stop in the middle of a restripe and an assemble --run without one member: it starts
#   degraded and the restripe goes on to its end; the member added back (its superblock from
#   before) is rebuilt whole, not through the bitmap (the restripe moved what it holds), check 0;
# - bad blocks (dm-dust) under a member's old rows: the restripe reads them through the parity,
#   ends, and everything reads back; check 0.
. /graid/lib.sh
trap 'mdadm --stop /dev/md0 >/dev/null 2>&1' EXIT

need_members 4
export DM_DISABLE_UDEV=1
modprobe dm-dust || fail "cannot load dm-dust"
set -- $members
d0=$1 d1=$2 d2=$3 d3=$4
slice=65536 # 32 MiB
# drive I: the drive under slice I (the first 32 MiB of drive I % 4 for I < 4, the next 32 MiB after).
drive() { eval echo \$d$(($1 % 4)); }
slice_table() { echo "0 $slice linear $(drive $1) $(($1 / 4 * slice))"; }
for i in 0 1 2 3 4; do
	dmsetup --noudevsync create r$i --table "$(slice_table $i)" || fail "dmsetup create r$i"
done
dmsetup mknodes || fail "dmsetup mknodes failed"
r() { for i in "$@"; do printf '/dev/mapper/r%s ' $i; done; }
wipe_superblocks $(r 0 1 2 3 4)
# kill_slice I: every I/O to slice I fails from now on (a drive that died).
kill_slice() {
	dmsetup load r$1 --table "0 $slice error" || fail "cannot load an error table into r$1"
	dmsetup --noudevsync resume r$1 &
	finishes $! 120 "dmsetup resume r$1" || fail "cannot kill r$1"
}
# revive_slice I: slice I is a plain slice again.
revive_slice() {
	dmsetup load r$1 --table "$(slice_table $1)" || fail "cannot load r$1 again"
	dmsetup --noudevsync resume r$1 || fail "cannot resume r$1"
}
position() { cat /sys/block/${dev#/dev/}/graid/reshape_position; }

echo "--- RAID 5 of three plus a spare grown to four; a member dies in the middle"
expect_rc 0 graidctl create dg --level 5 --chunk 64K --write-zeroes $(r 0 1 2)
dev=$(array_dev "$OUT")
expect_rc 0 graidctl --json detail dg
data_kib=$(($(json_field member_data_bytes "$OUT") / 1024))
fio_verify $dev 0 16M write 1m-1m
expect_rc 0 graidctl add dg $(r 4)
expect_rc 0 graidctl set-speed dg --min 1M --max 2M
fio --name=during $(fio_args $dev 20M 12M randwrite 4k-64k) --do_verify=0 --rate=2m \
	>/tmp/fio-during.out 2>&1 &
fio_pid=$!
usleep 300000
# The spare added first (r4) takes the fourth role; r3 stays a spare.
expect_rc 0 graidctl grow dg --raid-devices 4 --add $(r 3)
echo "$OUT"
kill_slice 1
n=0
until [ "$(array_state dg)" = degraded ]; do
	n=$((n + 1)); [ $n -le 100 ] || { graidctl detail dg; fail "r1's death was not noticed"; }
	usleep 100000
done
expect_rc 0 graidctl detail dg
echo "$OUT"
expect_match 'Reshape : ' "$OUT" "the restripe after the member died"
n=0
until graidctl detail dg | grep -Eq "^ *1 +$(dm_node r3) +(rebuilding|active)"; do
	n=$((n + 1)); [ $n -le 100 ] || { graidctl detail dg; fail "the spare r3 did not take role 1"; }
	usleep 100000
done
at=$(position)
sleep 3
[ "$(position)" = none ] || [ "$(position)" != "$at" ] || fail "the restripe stands still degraded at $at"
finishes $fio_pid 300 "fio during the degraded restripe" ||
	{ cat /tmp/fio-during.out; fail "fio during the degraded restripe failed"; }
expect_rc 0 graidctl set-speed dg --min 100M --max 0
wait_reshaped dg
expect_match '"raid_devices": *4' "$OUT" "the member count after the degraded restripe"
fio_readback $dev 0 16M write 1m-1m "data written before the degraded restripe does not read back"
fio_readback $dev 20M 12M randwrite 4k-64k "data written during the degraded restripe does not read back"
expect_rc 0 graidctl wait dg
[ "$(array_state dg)" = optimal ] || fail "the array is $(array_state dg) after the spare's rebuild"
expect_rc 0 graidctl check dg --wait
expect_match 'check finished: 0 mismatched sectors' "$OUT" "parity after the degraded restripe"
offset_kib=$(data_offset_kib $(r 0))
expect_rc 0 graidctl stop dg
echo "--- md's raid5 over the four (r3 in r1's role, r4 the fourth) reads it all"
mdadm --create /dev/md0 --run --level=5 --raid-devices=4 --metadata=1.2 --chunk=64 \
	--layout=left-symmetric --data-offset=${offset_kib}K --size=$data_kib --assume-clean \
	--bitmap=none $(r 0 3 2 4) >/tmp/create.out 2>&1 ||
	{ cat /tmp/create.out; fail "mdadm --create failed"; }
fio_readback /dev/md0 0 16M write 1m-1m "md reads other data than graid wrote before the degraded restripe"
fio_readback /dev/md0 20M 12M randwrite 4k-64k "md reads other data than graid wrote during it"
md_check_and_stop "after the degraded restripe" $(r 0 3 2 4)
revive_slice 1
wipe_superblocks $(r 0 1 2 3 4)

echo "--- a stop in the middle of a restripe, assembled without one member"
expect_rc 0 graidctl create dh --level 5 --chunk 64K --bitmap internal --consistency-policy resync \
	--write-zeroes $(r 0 1 2)
dev=$(array_dev "$OUT")
fio_verify $dev 0 24M randwrite 4k-64k
expect_rc 0 graidctl set-speed dh --min 128K --max 128K
expect_rc 0 graidctl grow dh --raid-devices 4 --add $(r 3)
usleep 1500000
expect_rc 0 graidctl stop dh
expect_rc 1 graidctl assemble dh $(r 0 2 3)
expect_rc 0 graidctl assemble --run dh $(r 0 2 3)
dev=$(array_dev "$OUT")
expect_rc 0 graidctl detail dh
expect_match 'Reshape : ' "$OUT" "the restripe after a degraded assembly"
[ "$(array_state dh)" = degraded ] || fail "dh is $(array_state dh) started without r1"
expect_rc 0 graidctl set-speed dh --min 100M --max 0
wait_reshaped dh
fio_readback $dev 0 24M randwrite 4k-64k "data does not read back after a degraded assembly's restripe"
fio_verify $dev 32M 8M randwrite 4k-64k
# r1 comes back with its superblock from before the stop: the restripe moved what it holds.
expect_rc 0 graidctl add dh $(r 1)
echo "$OUT"
case "$(dmesg | tail -n 20)" in *"rebuilding what changed while it was away"*)
	fail "r1 was re-added through the bitmap across a restripe" ;;
esac
expect_rc 0 graidctl wait dh
[ "$(array_state dh)" = optimal ] || fail "dh is $(array_state dh) after r1's rebuild"
expect_rc 0 graidctl check dh --wait
expect_match 'check finished: 0 mismatched sectors' "$OUT" "parity after the degraded assembly's restripe"
fio_readback $dev 0 24M randwrite 4k-64k "data does not read back after r1's rebuild"
fio_readback $dev 32M 8M randwrite 4k-64k "data written degraded does not read back after r1's rebuild"
expect_rc 0 graidctl stop dh
wipe_superblocks $(r 0 1 2 3 4)

echo "--- bad blocks under a member's old rows during a restripe"
expect_rc 0 graidctl create dd --level 5 --chunk 64K --bitmap none --consistency-policy resync \
	--write-zeroes $(r 0 1 2)
dev=$(array_dev "$OUT")
fio_verify $dev 0 24M write 1m-1m
expect_rc 0 graidctl stop dd
# r2 becomes dust over the same sectors, with bad 4 KiB blocks spread over its first rows.
dmsetup --noudevsync suspend r2 && dmsetup load r2 --table "0 $slice dust $d2 0 4096" &&
	dmsetup --noudevsync resume r2 || fail "cannot switch r2 to dm-dust"
offset_blocks=$(($(data_offset_kib $(r 0)) / 4))
for b in 3 200 1111 2048 3000; do
	dmsetup message r2 0 addbadblock $((offset_blocks + b)) >/dev/null || fail "addbadblock $b"
done
dmsetup message r2 0 enable >/dev/null || fail "dust enable failed"
expect_rc 0 graidctl assemble dd $(r 0 1 2)
dev=$(array_dev "$OUT")
expect_rc 0 graidctl grow dd --raid-devices 4 --add $(r 3)
wait_reshaped dd
expect_match '"raid_devices": *4' "$OUT" "the member count after a restripe over bad blocks"
[ "$(array_state dd)" = optimal ] || fail "dd is $(array_state dd) after a restripe over bad blocks"
fio_readback $dev 0 24M write 1m-1m "data under bad blocks does not read back after the restripe"
expect_rc 0 graidctl wait dd
expect_rc 0 graidctl check dd --wait
expect_match 'check finished: 0 mismatched sectors' "$OUT" "parity after a restripe over bad blocks"
expect_rc 0 graidctl stop dd
dmsetup --noudevsync suspend r2 && dmsetup load r2 --table "$(slice_table 2)" &&
	dmsetup --noudevsync resume r2 || fail "cannot switch r2 back"
wipe_superblocks $(r 0 1 2 3 4)
for i in 0 1 2 3 4; do dmsetup --noudevsync remove r$i; done
unload_module
