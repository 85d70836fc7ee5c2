# RAID 5/6 under real memory pressure (issue 29, E4): swap lives on a RAID 5 and a tmpfs larger
# than the free memory pushes its pages there, while buffered writes to a RAID 6 wait for
# writeback. The stripe engine's buffers are allocated where reclaim cannot write back (NOIO):
# a fresh buffer must fail fast rather than retry forever in reclaim, and the request fall
# back to the array's reserve or wait for a buffer to be freed. Nothing may hang (the hung-task
# detector watches at 20 s), every block reads back, and the fallback was taken
# (/sys/kernel/debug/graid/stripe_buffers). The arrays keep no buffers for reuse here
# (stripe_cache_kib=0): every slice allocates, as a slice does when the cache holds none.
. /graid/lib.sh
need_members 8
load_module_with stripe_cache_kib=0
set -- $members
dbg=/sys/kernel/debug
[ -f $dbg/graid/stripe_buffers ] || mount -t debugfs none $dbg 2>/dev/null
[ -f $dbg/graid/stripe_buffers ] || fail "no $dbg/graid/stripe_buffers"

# counter NAME: a count of stripe_buffers.
counter() { sed -n "s/^$1: //p" $dbg/graid/stripe_buffers; }

expect_rc 0 graidctl create swap5 --level 5 --chunk 64K --write-zeroes $1 $2 $3 $4
swapdev=$(array_dev "$OUT")
expect_rc 0 graidctl create data6 --level 6 --chunk 64K --write-zeroes $5 $6 $7 $8
datadev=$(array_dev "$OUT")
mkswap $swapdev >/dev/null || fail "mkswap on the RAID 5 failed"
swapon $swapdev || fail "swapon on the RAID 5 failed"
old_timeout=$(cat /proc/sys/kernel/hung_task_timeout_secs)
echo 20 >/proc/sys/kernel/hung_task_timeout_secs
fallbacks_before=$(($(counter reserve) + $(counter waits)))

# Most of the memory pinned in huge pages (freed at the end), so that little has to be written
# before reclaim starts: the pressure is the same, the test shorter.
old_huge=$(cat /proc/sys/vm/nr_hugepages)
avail_kb=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo)
huge_kb=$(awk '/^Hugepagesize:/ {print $2}' /proc/meminfo)
echo $(((avail_kb - 320 * 1024) / huge_kb)) >/proc/sys/vm/nr_hugepages
# A tmpfs that holds the free memory and some swap: filling it swaps.
avail_kb=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo)
swap_kb=$(awk '/^SwapTotal:/ {print $2}' /proc/meminfo)
hog_mb=$((avail_kb / 1024 + 160))
echo "available $((avail_kb / 1024)) MiB, swap $((swap_kb / 1024)) MiB: a tmpfs of $hog_mb MiB"
mkdir -p /mnt/pressure
mount -t tmpfs -o size=$((hog_mb + 8))m tmpfs /mnt/pressure || fail "tmpfs"

# Buffered writes to the RAID 6 meanwhile: dirty pages that only its stripe engine can clean.
fio --name=dirty --filename=$datadev --size=64M --rw=randwrite --bsrange=4k-256k \
	--ioengine=psync --direct=0 --verify=crc32c --do_verify=0 --randrepeat=1 --end_fsync=1 \
	--minimal >/tmp/dirty.out 2>&1 &
dirty=$!
# The hog: written, then read back after much of it went to swap and came back.
fio --name=hog --filename=/mnt/pressure/hog --size=${hog_mb}M --rw=write --bs=1M \
	--ioengine=psync --direct=0 --verify=crc32c --verify_fatal=1 --minimal >/tmp/hog.out 2>&1 &
hog=$!
finishes $hog 600 "the tmpfs writer swapping to the RAID 5" ||
	{ cat /tmp/hog.out; fail "what went to swap on the RAID 5 came back wrong"; }
finishes $dirty 600 "buffered writes to the RAID 6 under pressure" ||
	{ cat /tmp/dirty.out; fail "buffered writes to the RAID 6 failed"; }
echo "swap used at the end: $(awk '/^SwapFree:/ {print $2}' /proc/meminfo) kB free of $swap_kb"
cat $dbg/graid/stripe_buffers
rm -f /mnt/pressure/hog
umount /mnt/pressure
echo "$old_huge" >/proc/sys/vm/nr_hugepages
swapoff $swapdev || fail "swapoff"
echo "$old_timeout" >/proc/sys/kernel/hung_task_timeout_secs
fio --name=dirty --filename=$datadev --size=64M --rw=randwrite --bsrange=4k-256k \
	--ioengine=psync --direct=1 --verify=crc32c --verify_only --verify_fatal=1 --randrepeat=1 \
	--minimal >/tmp/dirty.out 2>&1 || { cat /tmp/dirty.out; fail "the RAID 6 read back wrong"; }
# Under that pressure fresh buffers failed, and requests took the reserve or waited.
fallbacks=$(($(counter reserve) + $(counter waits) - fallbacks_before))
[ "$fallbacks" -gt 0 ] || fail "no stripe buffer fell back to the reserve or waited under pressure"
expect_rc 0 graidctl check data6 --wait
expect_match 'check finished: 0 mismatched sectors' "$OUT" "RAID 6 parity after the pressure"
expect_rc 0 graidctl stop swap5
expect_rc 0 graidctl stop data6
unload_module
