# The rebuild's and the scrub's parity through graid-helper (Documentation/ring-protocol.rst,
# "Offload"), the worker waiting for each job, on RAID 6 over six 24 MiB dm-linear slices:
# - two members failed and removed, one added back: its rebuild's recoveries (each stripe
#   losing two of data, P and Q) go to the helper (recover jobs counted); then the second;
#   everything fio wrote, before and while degraded, reads back;
# - check with the helper finds 0 mismatches; a scribbled P block is found (8 sectors),
#   repaired, and a new check finds 0;
# - a helper that answers right 32 times and then lies (graid-probe hostile turncoat): the
#   rebuild it takes part in writes none of its lies (fio verifies, check finds 0, the lie is
#   counted); nor does a repair;
# - the helper SIGKILLed mid-rebuild: the rebuild goes on in the kernel and completes;
#   SIGSTOPped mid-rebuild: the waiting jobs expire and the kernel computes them, the rebuild
#   completes, and the continued helper attaches again;
# - /sys/kernel/debug/graid/offload shows the same counters as graidctl helper;
# - md, assembled over the same slices at the end, finds every stripe's parity right.
. /graid/lib.sh
unload_module
modprobe raid_gpu offload_balance=0 || fail "modprobe raid_gpu offload_balance=0 failed"
need_members 6
modprobe raid456 || fail "cannot load md raid456"
export DM_DISABLE_UDEV=1

# 4 KiB of random bytes at data-area sector $2 of slice $1 (its data area starts 2 MiB in).
scribble() {
	dd if=/dev/urandom of=/dev/mapper/$1 bs=4096 count=1 seek=$(((4096 + $2) / 8)) oflag=direct \
		conv=notrunc 2>/dev/null || fail "cannot write to $1"
}

small_slices $members
: >/tmp/helper.log
trap 'kill -KILL $helper ${turncoat:-} 2>/dev/null; kill -CONT $helper 2>/dev/null' EXIT
start_helper

echo "--- two members lost, rebuilt one after the other by the helper"
expect_rc 0 graidctl create r6 --level 6 --chunk 64K --layout left-symmetric --write-zeroes $slices
dev=$(array_dev "$OUT")
fio_verify "$dev" 0 32M write 1m-1m
fail_remove r6 s1
fail_remove r6 s4
fio_verify "$dev" 32M 16M randwrite 4k-256k
recoveries=$(helper_field recover_jobs)
background=$(helper_field background_jobs)
add_back r6 s1
wait_rebuilt r6 300
echo "recover jobs: $recoveries -> $(helper_field recover_jobs)"
[ "$(helper_field recover_jobs)" -gt "$recoveries" ] || fail "no recovery of the double rebuild went to the helper"
[ "$(helper_field background_jobs)" -gt "$background" ] || fail "no rebuild job was counted as background"
recoveries=$(helper_field recover_jobs)
add_back r6 s4
wait_rebuilt r6 300
[ "$(helper_field recover_jobs)" -gt "$recoveries" ] || fail "no recovery of the single rebuild went to the helper"
fio_readback "$dev" 0 32M write 1m-1m "data lost across the helper's rebuilds"
fio_readback "$dev" 32M 16M randwrite 4k-256k "degraded writes lost across the helper's rebuilds"

echo "--- check and repair with the helper"
background=$(helper_field background_jobs)
expect_rc 0 graidctl check r6 --wait
expect_match 'check finished: 0 mismatched sectors' "$OUT" "check after the helper's rebuilds"
[ "$(helper_field background_jobs)" -gt "$background" ] || fail "no check job went to the helper"
# Stripe 0 of a left-symmetric RAID 6 of six: P on the last member.
scribble s5 16
expect_rc 0 graidctl check r6 --wait
expect_match 'check finished: 8 mismatched sectors' "$OUT" "check of a scribbled P"
expect_rc 0 graidctl repair r6 --wait
expect_match 'repair finished: 8 mismatched sectors' "$OUT" "repair of a scribbled P"
expect_rc 0 graidctl check r6 --wait
expect_match 'check finished: 0 mismatched sectors' "$OUT" "check after the repair"

echo "--- a helper right 32 times, then lying: nothing it lies about reaches a member"
# The default offload_verify=1 checks each of a new helper's first 16 results, then one a
# second: the rebuild checks every recovery against the parity on the members before it
# writes it, and the scrub recomputes every mismatch a helper claims (engine/rebuild.rs,
# engine/scrub.rs). Before that, the lies between two sampled checks were written.
kill -TERM $helper
finishes $helper 20 "the helper after SIGTERM" || fail "the helper did not exit 0 on SIGTERM"
wait_helper none 10 || fail "the module still shows the helper after SIGTERM"
wrong=$(fallbacks wrong)
fail_remove r6 s1
graid-probe hostile turncoat=32 >/tmp/turncoat.out 2>&1 </dev/null &
turncoat=$!
wait_helper healthy 20 || { cat /tmp/turncoat.out; fail "the turncoat did not attach"; }
add_back r6 s1
wait_rebuilt r6 300
finishes $turncoat 60 "the turncoat" || { cat /tmp/turncoat.out; fail "the turncoat was not detached"; }
cat /tmp/turncoat.out
[ "$(fallbacks wrong)" -gt "$wrong" ] || fail "the turncoat's lies were not counted"
fio_readback "$dev" 0 32M write 1m-1m "data the turncoat's rebuild lost"
fio_readback "$dev" 32M 16M randwrite 4k-256k "degraded writes the turncoat's rebuild lost"
# Its catch starts a heal of what helpers computed unchecked before (a resync): a check waits.
expect_rc 0 graidctl wait r6
expect_rc 0 graidctl check r6 --wait
expect_match 'check finished: 0 mismatched sectors' "$OUT" "check after the turncoat's rebuild"
# The repair of a scribbled P with a turncoat: it writes the kernel's parity, never a lie.
wrong=$(fallbacks wrong)
scribble s5 16
graid-probe hostile turncoat=16 >/tmp/turncoat.out 2>&1 </dev/null &
turncoat=$!
wait_helper healthy 20 || { cat /tmp/turncoat.out; fail "the turncoat did not attach"; }
expect_rc 0 graidctl repair r6 --wait
expect_match 'repair finished: 8 mismatched sectors' "$OUT" "repair with the turncoat"
finishes $turncoat 60 "the turncoat" || { cat /tmp/turncoat.out; fail "the turncoat was not detached"; }
cat /tmp/turncoat.out
[ "$(fallbacks wrong)" -gt "$wrong" ] || fail "the turncoat's lies were not counted"
expect_rc 0 graidctl wait r6
expect_rc 0 graidctl check r6 --wait
expect_match 'check finished: 0 mismatched sectors' "$OUT" "check after the repair with the turncoat"
start_helper

echo "--- the helper SIGKILLed mid-rebuild: the kernel finishes it"
# Slow enough that the kill and the stop below come mid-rebuild: an idle rebuild of a slice
# runs at full speed and can be over in half a second.
expect_rc 0 graidctl set-speed r6 --min 4M --max 4M
fail_remove r6 s2
add_back r6 s2
usleep 500000
kill -9 $helper
wait $helper 2>/dev/null
wait_helper none 10 || fail "the module still shows a killed helper"
wait_rebuilt r6 300
fio_readback "$dev" 0 32M write 1m-1m "data lost when the helper was killed mid-rebuild"

echo "--- the helper SIGSTOPped mid-rebuild: its jobs expire, the kernel finishes it"
start_helper
expired=$(fallbacks expired)
fail_remove r6 s3
add_back r6 s3
usleep 500000
kill -STOP $helper
wait_rebuilt r6 300
[ "$(fallbacks expired)" -gt "$expired" ] || fail "no rebuild job of the stopped helper expired"
kill -CONT $helper
wait_helper healthy 20 || { cat /tmp/helper.log; fail "the continued helper did not attach again"; }
fio_readback "$dev" 0 32M write 1m-1m "data lost with the helper stopped mid-rebuild"
fio_readback "$dev" 32M 16M randwrite 4k-256k "degraded writes lost with the helper stopped"
expect_rc 0 graidctl check r6 --wait
expect_match 'check finished: 0 mismatched sectors' "$OUT" "check after the kill and the stop"
expect_rc 0 graidctl helper
echo "$OUT"
# The same counters in debugfs.
stats=$(cat /sys/kernel/debug/graid/offload) || fail "no /sys/kernel/debug/graid/offload"
echo "$stats"
for name in jobs recover_jobs background_jobs protocol_errors; do
	[ "$(echo "$stats" | sed -n "s/^$name: //p")" = "$(helper_field $name)" ] ||
		fail "debugfs and graidctl differ on $name"
done
expect_match 'in_kernel.expired: [1-9]' "$stats" "debugfs's fallback counters"
expect_rc 0 graidctl stop r6

echo "--- md over the same slices finds the parity right"
md_agrees 6 20M 32M "after the helper's rebuilds" $slices
kill -TERM $helper
finishes $helper 20 "the helper after SIGTERM" || fail "the helper did not exit 0 on SIGTERM"
unslice
unload_module
