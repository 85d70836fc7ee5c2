# Parity offload to graid-helper (Documentation/ring-protocol.rst), through the real module,
# emulated NVMe and fio crc32c verification:
# - RAID 5 and RAID 6 with the helper attached: full-stripe writes go to it (its job counter
#   grows, the module's fallbacks do not explain them), the data reads back, and md, assembled
#   over the same members, finds every stripe's parity right (0 mismatches);
# - a second helper is refused while one runs; the module cannot unload while one is attached;
# - the helper SIGKILLed mid-write: fio still verifies, the kernel computed the jobs out, a
#   restarted helper attaches again and takes jobs; the same for buffered writes (the kill meets
#   the page cache's writeback), on the array and stacked under dm-linear;
# - the helper SIGSTOPped mid-write: its jobs expire and are computed by the kernel (counted),
#   after four misses it is detached; once continued it attaches again by itself;
# - SIGTERM: the helper detaches and exits 0;
# - hostile helpers (graid-probe hostile): completions of jobs never sent, of a stale
#   generation, twice, an impossible CQ tail: each detached with EPROTO; one that scribbles
#   over its whole pool while answering, and after it closed; one that answers OK with random
#   parity (a liar: the kernel's check of a new helper's results catches it, "wrong" counted):
#   all data verifies and check finds 0 mismatches;
# - a turncoat (right for the checked first jobs, then lying) under writes: once a sampled
#   check catches it, the regions whose parity came from a helper unchecked are resynced,
#   a member's fail is refused meanwhile (detail, metrics and the kernel log say so); then a
#   check finds 0 mismatches and, with a member failed, everything reads back;
# - a helper that did not take RING_FEATURE_BATCH is sent jobs of one stripe only.
. /graid/lib.sh
# Every eligible job to the helper, however slow it is under emulation (the default sends each
# job to the faster side: under TCG mostly the kernel; tools/graid-engine tests that policy).
unload_module
modprobe raid_gpu offload_balance=0 || fail "modprobe raid_gpu offload_balance=0 failed"
need_members 6
modprobe raid456 || fail "cannot load md raid456"

set -- $members
: >/tmp/helper.log
# A failing test leaves no helper behind (the runner waits for every writer of its output).
# Nor the early writeback that the buffered cases set (the tests after it run in this guest).
dirty_bg=$(cat /proc/sys/vm/dirty_background_ratio)
trap 'kill -KILL $helper 2>/dev/null; kill -CONT $helper 2>/dev/null
	echo $dirty_bg >/proc/sys/vm/dirty_background_ratio' EXIT
expect_rc 0 graidctl helper
expect_match 'Helper : none' "$OUT" "helper status before any helper"
start_helper
expect_rc 0 graidctl helper
echo "$OUT"
expect_match 'Helper : cpu.*healthy' "$OUT" "helper status once attached"

echo "--- a second helper, and unloading, are refused"
expect_rc 1 graid-helper run
expect_match 'another helper is attached' "$OUT" "a second helper"
rmmod raid_gpu 2>/dev/null && fail "rmmod succeeded with a helper attached"

for level in 5 6; do
	echo "--- RAID $level with the helper: full-stripe writes offloaded, md checks the parity"
	expect_rc 0 graidctl create off$level --level $level --chunk 64K --layout left-symmetric --write-zeroes $1 $2 $3 $4 $5
	dev=$(array_dev "$OUT")
	before=$(helper_field jobs)
	fio_verify "$dev" 0 24M write 1m-1m
	after=$(helper_field jobs)
	echo "jobs offloaded: $before -> $after"
	[ "$after" -gt "$before" ] || fail "RAID $level: no job went to the helper"
	expect_rc 0 graidctl detail off$level
	expect_match 'Helper : cpu.*jobs offloaded' "$OUT" "detail's helper line"
	expect_rc 0 graidctl check off$level --wait
	expect_match 'check finished: 0 mismatched sectors' "$OUT" "check after offloaded writes"
	expect_rc 0 graidctl stop off$level
	md_agrees $level 32M 24M "after offload" $1 $2 $3 $4 $5
done

echo "--- the helper SIGKILLed while fio writes, then restarted"
expect_rc 0 graidctl create off5 --level 5 --chunk 64K --write-zeroes $1 $2 $3 $4 $5 $6
dev=$(array_dev "$OUT")
fio --name=write $(fio_args "$dev" 0 40M write 1m-1m) --do_verify=0 --rate=8m >/tmp/fio.out 2>&1 &
writer=$!
sleep 2
kill -9 $helper
wait $helper 2>/dev/null
wait_helper none 10 || fail "the module still shows a killed helper"
finishes $writer 120 "fio after the helper was killed" || { cat /tmp/fio.out; fail "fio failed after the helper was killed"; }
fio_readback "$dev" 0 40M write 1m-1m "data lost when the helper was killed"
attaches=$(helper_field attaches)
start_helper
[ "$(helper_field attaches)" -gt "$attaches" ] || fail "the restarted helper did not attach"
before=$(helper_field jobs)
fio_verify "$dev" 40M 16M write 1m-1m
[ "$(helper_field jobs)" -gt "$before" ] || fail "the restarted helper took no jobs"

# Buffered writes: the flusher writes the page cache back from the first MiB dirty on (the default
# threshold, a tenth of the guest's memory, would leave it all to fio's closing fsync), so the
# kill meets writeback under way; then through dm-linear on the array, whose clones of the
# writeback's bios reach it. Each writes a region nothing wrote before (zeroed at create): a lost
# write reads back as zeros, not as an earlier pass's identical blocks.
echo 1048576 >/proc/sys/vm/dirty_background_bytes || fail "cannot set dirty_background_bytes"
for stacked in no yes; do
	echo "--- the helper SIGKILLed under buffered writeback (dm-linear on top: $stacked), then restarted"
	target=$dev
	off=56M
	if [ $stacked = yes ]; then
		export DM_DISABLE_UDEV=1
		dmsetup --noudevsync create top --table "0 $(blockdev --getsz $dev) linear $dev 0" ||
			fail "dmsetup create top failed"
		target=/dev/mapper/top
		off=80M
	fi
	before=$(helper_field jobs)
	fio --name=write $(fio_args "$target" $off 24M write 1m-1m) --direct=0 --end_fsync=1 --do_verify=0 \
		--rate=8m >/tmp/fio.out 2>&1 &
	writer=$!
	sleep 2
	kill -0 $writer 2>/dev/null || { cat /tmp/fio.out; fail "buffered fio ended before the kill (stacked: $stacked)"; }
	at=$(helper_field jobs)
	[ "$at" -gt "$before" ] || fail "no job of the writeback reached the helper before the kill (stacked: $stacked)"
	# Best effort: the kill while the helper holds jobs (if none is out within half a second, anyway).
	n=0
	while [ "$(helper_field queued)" = 0 ] && [ $n -lt 5 ]; do n=$((n + 1)); usleep 100000; done
	kill -9 $helper
	echo "jobs offloaded before the kill: $before -> $at;" $(grep -E '^(Dirty|Writeback):' /proc/meminfo)
	wait $helper 2>/dev/null
	wait_helper none 10 || fail "the module still shows a killed helper"
	finishes $writer 120 "buffered fio after the helper was killed" ||
		{ cat /tmp/fio.out; fail "buffered fio failed after the helper was killed (stacked: $stacked)"; }
	sync
	echo 3 >/proc/sys/vm/drop_caches
	fio_readback "$target" $off 24M write 1m-1m "buffered data lost when the helper was killed (stacked: $stacked)"
	if [ $stacked = yes ]; then
		dmsetup --noudevsync remove top || fail "dmsetup remove top failed"
	fi
	start_helper
done
echo $dirty_bg >/proc/sys/vm/dirty_background_ratio

echo "--- the helper SIGSTOPped while fio writes: deadlines, detach, re-attach"
expired=$(fallbacks expired)
fio --name=write $(fio_args "$dev" 0 24M write 1m-1m) --do_verify=0 --rate=4m >/tmp/fio.out 2>&1 &
writer=$!
sleep 1
kill -STOP $helper
finishes $writer 180 "fio with the helper stopped" || { cat /tmp/fio.out; fail "fio failed with the helper stopped"; }
wait_helper none 30 || fail "a stopped helper was never detached"
[ "$(fallbacks expired)" -gt "$expired" ] || fail "no job of the stopped helper expired"
fio_readback "$dev" 0 24M write 1m-1m "data lost with the helper stopped"
kill -CONT $helper
wait_helper healthy 20 || { cat /tmp/helper.log; fail "the continued helper did not attach again"; }
before=$(helper_field jobs)
fio_verify "$dev" 0 16M write 1m-1m
[ "$(helper_field jobs)" -gt "$before" ] || fail "the re-attached helper took no jobs"
expect_rc 0 graidctl check off5 --wait
expect_match 'check finished: 0 mismatched sectors' "$OUT" "check after the kill and the stop"
expect_rc 0 graidctl helper
echo "$OUT"

echo "--- SIGTERM: the helper detaches and exits"
kill -TERM $helper
finishes $helper 20 "the helper after SIGTERM" || { cat /tmp/helper.log; fail "the helper did not exit 0 on SIGTERM"; }
expect_match 'stopping: detached' "$(cat /tmp/helper.log)" "the helper's log"
wait_helper none 5 || fail "the module still shows the helper after SIGTERM"

echo "--- hostile helpers: each is detached, the kernel computes its jobs, nothing is lost"
errors=$(helper_field protocol_errors)
wrong=$(fallbacks wrong)
for mode in wrong-id stale twice garbage scribble liar; do
	fio --name=write $(fio_args "$dev" 0 16M write 1m-1m) --do_verify=0 --rate=8m >/tmp/fio.out 2>&1 &
	writer=$!
	expect_rc 0 graid-probe hostile $mode
	echo "$mode: $OUT"
	finishes $writer 120 "fio beside the $mode helper" || { cat /tmp/fio.out; fail "fio failed beside the $mode helper"; }
	wait_helper none 10 || fail "the $mode helper is still attached"
	fio_readback "$dev" 0 16M write 1m-1m "data lost to the $mode helper"
done
[ "$(helper_field protocol_errors)" -ge $((errors + 5)) ] || fail "protocol errors were not counted"
[ "$(fallbacks wrong)" -gt "$wrong" ] || fail "the liar's wrong result was not counted"

echo "--- a helper without RING_FEATURE_BATCH gets jobs of one stripe only"
# 1 MiB writes make jobs of several stripes (kept in the kernel, counted as "op"); whole-stripe
# writes (320 KiB on six members at 64 KiB chunks, stripe-aligned, after the 1 MiB writes' 16 MiB)
# jobs of one, which it gets.
op=$(fallbacks op)
fio --name=write $(fio_args "$dev" 0 16M write 1m-1m) --do_verify=0 --rate=4m >/tmp/fio.out 2>&1 &
writer=$!
fio --name=stripes $(fio_args "$dev" 16640k 15M write 320k-320k) --do_verify=0 --rate=4m \
	>/tmp/fio2.out 2>&1 &
stripes=$!
expect_rc 0 graid-probe hostile no-batch
echo "$OUT"
finishes $writer 120 "fio beside the no-batch helper" || { cat /tmp/fio.out; fail "fio failed beside the no-batch helper"; }
finishes $stripes 120 "fio beside the no-batch helper" || { cat /tmp/fio2.out; fail "fio failed beside the no-batch helper"; }
[ "$(fallbacks op)" -gt "$op" ] || fail "no job of several stripes was kept from the no-batch helper"
fio_readback "$dev" 0 16M write 1m-1m "data lost beside the no-batch helper"
fio_readback "$dev" 16640k 15M write 320k-320k "data lost beside the no-batch helper"
# The liar's catch started a heal of what helpers computed unchecked (a resync): a check waits.
expect_rc 0 graidctl wait off5
expect_rc 0 graidctl check off5 --wait
expect_match 'check finished: 0 mismatched sectors' "$OUT" "check after the hostile helpers"
expect_rc 0 graidctl helper
echo "$OUT"

echo "--- a turncoat under writes: the parity it got on unchecked is healed before a member may go"
# Right for its first 16 jobs (the kernel checks each of a new helper's first 16), then lying:
# after those the kernel checks one result a second, so lies reach the members until a sample
# catches one. Then every region whose parity a helper computed unchecked is resynced (slowly
# here, 64 KiB/s: the fail below must come before it passed them), and a member may not be
# failed until that ends; afterwards one can, and everything reads back right through the
# parity.
expect_rc 0 graidctl set-speed off5 --min 64K --max 64K
wrong=$(fallbacks wrong)
fio --name=write $(fio_args "$dev" 0 32M write 1m-1m) --do_verify=0 --rate=8m >/tmp/fio.out 2>&1 &
writer=$!
expect_rc 0 graid-probe hostile turncoat=16
echo "$OUT"
expect_match 'lied about' "$OUT" "the turncoat's report"
[ "$(fallbacks wrong)" -gt "$wrong" ] || fail "the turncoat was not caught"
expect_rc 1 graidctl fail off5 $3
expect_match 'a resync heals the parity a helper caught lying' "$OUT" "a fail during the heal"
expect_rc 0 graidctl detail off5
expect_match 'Sync : healing' "$OUT" "detail during the heal"
graidctl metrics | grep -q '^graid_array_parity_heal{.*} 1$' || fail "metrics do not show the heal"
dmesg | grep 'caught lying: resyncing the' || fail "the kernel did not say it heals"
finishes $writer 180 "fio beside the turncoat" || { cat /tmp/fio.out; fail "fio failed beside the turncoat"; }
expect_rc 0 graidctl set-speed off5 --max 0
expect_rc 0 graidctl wait off5
expect_rc 0 graidctl detail off5
expect_match 'Sync : in sync' "$OUT" "detail after the heal"
expect_rc 0 graidctl check off5 --wait
expect_match 'check finished: 0 mismatched sectors' "$OUT" "check after the heal"
expect_rc 0 graidctl fail off5 $3
fio_readback "$dev" 0 32M write 1m-1m "degraded read-back after the turncoat's heal"
expect_rc 0 graidctl stop off5
cat /tmp/helper.log
unload_module
