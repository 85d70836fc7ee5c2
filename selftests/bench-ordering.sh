# What a small write costs the members in forced writes, graid against md, counted (not timed)
# in one VM run (`make bench-ordering`; not a test):
#
#   selftests/vm.sh --disks 6 --disk-size 512 selftests/bench-ordering.sh [WRITES [LEVELS [CHUNK]]]
#
# On real NVMe without power-loss protection a FUA write or a flush is the expensive part of a
# small write; QEMU's images make both free, so a time cannot show them: they are counted.
# RAID 5 and RAID 6 (LEVELS, default "5 6"; left-symmetric, CHUNK default 64K) on six emulated
# NVMe drives, created as:
#
# - md0: md with its defaults at this size (no bitmap, no PPL; bench.sh's raid456 tuning);
# - md-ppl: RAID 5: md with its partial parity log (--consistency-policy=ppl), md's answer to
#   the write hole. md has no PPL on RAID 6: there md-bitmap, md with an internal bitmap;
# - small: graid as created on these 512 MiB drives (bitmap and log, graid's defaults: a 1 MiB
#   log);
# - log: the same without its write-intent bitmap (--bitmap none): what the bitmap adds;
# - large: the same on the drives seen as 64 GiB members (a dm zero target after each drive),
#   where graid's log is what a member of 64 GiB or more gets (64 MiB).
#
# Every shape's members are dm-linear devices over the drives. fio (libaio, O_DIRECT) writes
# WRITES (default 2048) random 4 KiB blocks over the array's first 256 MiB, at iodepth 32 and at
# iodepth 1, on a fresh array each time, with every request the drives complete traced (the
# block layer's block_rq_complete event). Printed per 1000 array writes: member reads and writes, FUA writes,
# flushes, and the forced writes (FUA writes + flushes) that on a drive with a volatile cache
# each wait for the media.
. /graid/lib.sh
writes=${1:-2048}
levels=${2:-5 6}
chunk=${3:-64K}
region=256M
results=/tmp/bench-ordering.results
: >$results
export DM_DISABLE_UDEV=1

modprobe -a raid456 dm-mod || fail "cannot load md raid456 or dm"
load_module
[ -d /sys/kernel/tracing/events/block ] || mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
[ -d /sys/kernel/tracing/events/block ] || fail "needs tracefs and a kernel with the block events"
set -- $(graid_nvme_disks)
[ $# -ge 6 ] || fail "needs 6 NVMe drives"
drives="$1 $2 $3 $4 $5 $6"
for d in $drives; do
	dd if=/dev/zero of=$d bs=1M count=300 oflag=direct 2>/dev/null
	echo "$d: fua $(cat /sys/class/block/${d#/dev/}/queue/fua)," \
		"write cache $(cat /sys/class/block/${d#/dev/}/queue/write_cache)"
done
# The drives' device numbers as the trace prints them (" 259,0 259,1 ... ").
drive_numbers=" "
for d in $drives; do drive_numbers="$drive_numbers$(tr : , </sys/class/block/${d#/dev/}/dev) "; done
large_sectors=$((64 * 1024 * 2048))
bench_dm_members 0 $drives
members=$bench_members
echo "members: $members over $drives, chunk $chunk, $writes 4 KiB writes per run over the first $region"

# count NAME DEPTH: fio's writes on $dev, every request the drives complete traced (the block
# layer's block_rq_complete event); appends "NAME DEPTH reads writes fua flushes" to the
# results. Not blktrace's own records: on 7.x they lose the FUA flag (blktrace.c's MASK_TC_BIT
# shifts REQ_FUA out) and have no issue record for the data part of a flush sequence; the
# event's flags come from blk_fill_rwbs, as the request had them.
count() {
	local t=/sys/kernel/tracing
	echo 0 >$t/tracing_on
	echo 32768 >$t/buffer_size_kb
	echo >$t/trace
	echo 1 >$t/events/block/block_rq_complete/enable
	echo 1 >$t/tracing_on
	fio --name=ord --filename="$dev" --rw=randwrite --bs=4k --direct=1 --ioengine=libaio \
		--iodepth="$2" --size=$region --io_size=$((writes * 4))k --norandommap --randrepeat=0 \
		--minimal >/tmp/fio.out 2>&1 || { cat /tmp/fio.out; fail "fio $1 failed"; }
	echo 0 >$t/tracing_on
	echo 0 >$t/events/block/block_rq_complete/enable
	grep -q '^overrun: [1-9]' $t/per_cpu/cpu*/stats && fail "the trace buffer overran"
	# The drives only (not graid's own disk, a request-based device as well). RWBS: F first for
	# a preflush, then the operation (R, W, D, F for a flush, N none), then F for FUA.
	awk -v n="$1 $2" -v drives="$drive_numbers" '{
		for (i = 1; i < NF; i++) if ($i == "block_rq_complete:") break
		if (i >= NF || index(drives, " " $(i + 1) " ") == 0) next
		rwbs = $(i + 2)
		if (rwbs ~ /W/) { w++; if (rwbs ~ /WF/) fua++; if (rwbs ~ /^FW/) flush++ }
		else if (rwbs ~ /R/) r++
		else if (rwbs ~ /^F/) flush++
	} END { printf "%s %d %d %d %d\n", n, r, w, fua, flush }' $t/trace >>$results
	tail -n 1 $results
}

# up SHAPE LEVEL: the array; its device in $dev.
up() {
	case $1 in
	md0) md_bench_create $2 $chunk $members ;;
	md-ppl) MD_BENCH_POLICY=ppl md_bench_create $2 $chunk $members ;;
	md-bitmap) MD_BENCH_BITMAP=internal md_bench_create $2 $chunk $members ;;
	small | log | large)
		[ $1 = large ] && bench_dm_members $large_sectors $drives
		bitmap=
		[ $1 = log ] && bitmap="--bitmap none"
		graidctl create bo --level $2 --chunk $chunk $bitmap --assume-clean $members \
			>/tmp/create.out 2>&1 ||
			{ cat /tmp/create.out; fail "graidctl create failed"; }
		;;
	esac
	case $1 in md*) dev=/dev/md0 ;; *) dev=$(array_dev "$(cat /tmp/create.out)") ;; esac
	[ -b "$dev" ] || fail "no array device for $1"
}

down() {
	case $1 in
	md*) md_bench_stop $members ;;
	*)
		graidctl stop bo >/dev/null || fail "graidctl stop failed"
		[ $1 = large ] && bench_dm_members 0 $drives
		;;
	esac
	wipe_superblocks $members
}

echo
echo "=== runs: shape level depth, then the drives' issued reads, writes, FUA writes, flushes"
for level in $levels; do
	md=md-ppl
	[ $level = 6 ] && md=md-bitmap
	for shape in md0 $md small log large; do
		for depth in 32 1; do
			up $shape $level
			count "$shape RAID$level" $depth
			down $shape
		done
	done
done

echo
echo "=== per 1000 array writes: member reads, member writes, FUA writes, flushes, forced (FUA + flush)"
printf '%-10s %-6s %5s %8s %8s %8s %8s %8s\n' shape level depth reads writes fua flushes forced
awk -v n=$writes '{ k = 1000 / n
	printf "%-10s %-6s %5s %8.0f %8.0f %8.0f %8.0f %8.0f\n", $1, $2, $3, $4 * k, $5 * k, $6 * k, $7 * k, ($6 + $7) * k }' $results

dmesg | grep -iE 'warn|error|bug' | head -n 20
echo "bench-ordering done"
