# graid-helper --engine vulkan on Mesa's lavapipe, through the real module (Documentation/
# gpu.rst): the Vulkan loader, lavapipe and their libraries come on a read-only disk (vm.sh's
# Vulkan disk, /dev/vda). On RAID 6 over six 24 MiB slices, with every eligible job offloaded:
# - the device imports the helper's pool (zero-copy: "shared with the device" in its log);
# - full-stripe writes go to the Vulkan engine and fio verifies them;
# - a member failed, removed and added back is rebuilt with the recoveries on the Vulkan
#   engine (recover jobs counted, the kernel's checks of the helper's first results pass);
# - check finds 0 mismatches, and md over the same slices finds every stripe's parity right.
# Skipped when the host had no lavapipe to put on the disk.
. /graid/lib.sh
[ -b /dev/vda ] || skip "no Vulkan disk (the host has no lavapipe: make deps installs it)"
mkdir -p /vulkan
mount -t ext4 -o ro /dev/vda /vulkan || fail "cannot mount the Vulkan disk"
export LD_LIBRARY_PATH=/vulkan/lib VK_ICD_FILENAMES=/vulkan/lvp_icd.json HELPER_ENGINE=vulkan
unload_module
# lavapipe is a CPU emulated by TCG here: a batch can take seconds, and a helper that misses
# the default 1 s deadlines is detached before the rebuild's jobs reach it (tests 26 and 27
# test the deadlines; this one the Vulkan engine's results).
modprobe raid_gpu offload_balance=0 offload_deadline_ms=20000 ||
	fail "modprobe raid_gpu offload_balance=0 offload_deadline_ms=20000 failed"
need_members 6
modprobe raid456 || fail "cannot load md raid456"
export DM_DISABLE_UDEV=1

expect_rc 0 graid-helper memory-probe --engine vulkan
echo "$OUT"
expect_match "anonymous \(the helper's pool\): imported" "$OUT" "lavapipe's import of the pool kind"
small_slices $members
: >/tmp/helper.log
trap 'kill -KILL $helper 2>/dev/null' EXIT
start_helper
expect_rc 0 graidctl helper
expect_match 'Helper : vulkan:llvmpipe' "$OUT" "the helper's engine"
expect_match 'shared with the device' "$(cat /tmp/helper.log)" "the pool shared with the device"

echo "--- full-stripe writes on the Vulkan engine"
expect_rc 0 graidctl create r6 --level 6 --chunk 64K --layout left-symmetric --write-zeroes $slices
dev=$(array_dev "$OUT")
jobs=$(helper_field jobs)
fio_verify "$dev" 0 24M write 1m-1m
[ "$(helper_field jobs)" -gt "$jobs" ] || fail "no job went to the Vulkan helper"

echo "--- a rebuild whose recoveries run on the Vulkan engine"
fail_remove r6 s2
fio_verify "$dev" 24M 8M randwrite 4k-256k
recoveries=$(helper_field recover_jobs)
add_back r6 s2
wait_rebuilt r6 600
[ "$(helper_field recover_jobs)" -gt "$recoveries" ] || fail "no recovery went to the Vulkan helper"
[ "$(fallbacks wrong)" = 0 ] || fail "the kernel found a wrong result of the Vulkan engine"
[ "$(helper_field verified_jobs)" -gt 0 ] || fail "the kernel checked none of the helper's results"
fio_readback "$dev" 0 24M write 1m-1m "data lost across the Vulkan rebuild"
fio_readback "$dev" 24M 8M randwrite 4k-256k "degraded writes lost across the Vulkan rebuild"
expect_rc 0 graidctl check r6 --wait
expect_match 'check finished: 0 mismatched sectors' "$OUT" "check after the Vulkan engine's work"
expect_rc 0 graidctl helper
echo "$OUT"
expect_rc 0 graidctl stop r6

echo "--- md over the same slices finds the parity right"
md_agrees 6 20M 24M "after the Vulkan engine's work" $slices
kill -TERM $helper
finishes $helper 30 "the helper after SIGTERM" || fail "the helper did not exit 0 on SIGTERM"
cat /tmp/helper.log
unslice
umount /vulkan
unload_module
