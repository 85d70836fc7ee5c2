# The write-intent bitmap's cost and payoff, graid against md, in one VM run (`make
# bench-bitmap`; not a test):
#
#   selftests/vm.sh --disks 6 --disk-size 512 selftests/bench-bitmap.sh [RUNTIME_S [ROUNDS]]
#
# 1. Write cost. RAID 1 on two drives and RAID 5 (64 KiB chunks, left-symmetric) on three, each
#    created six ways on the same members: graid and md, each without a bitmap, with an
#    internal one of 64 MiB chunks (both tools' default) and with one of 1 MiB chunks (more bits
#    to set, so more bitmap writes). fio (libaio, O_DIRECT) runs 4k random writes at iodepth 32 and 1M
#    sequential writes at iodepth 8 for RUNTIME_S seconds (default 8) after a 1 s ramp, on a
#    fresh array each time, ROUNDS times (default 2; graid first in odd rounds). The bits are
#    set in the first moments and stay set while the writes go on, so this is the steady cost;
#    "burst" runs the 4k writes for 2 s after the array sat idle long enough for every bit to be
#    cleared (graid's bitmap_clean_ms and md's daemon sleep are 1 s here), the cost of first
#    writes.
# The resync a crash costs with and without a bitmap is timed by the crash rounds
# (selftests/crash.sh prints each array's resync), where the machine really dies.
# The drives are written whole once before the first cell (sparse images). Prints every run,
# then the means and the ratios with and without a bitmap for each tool.
# Under QEMU TCG only the same-run ratios mean anything.
. /graid/lib.sh
runtime=${1:-8}
rounds=${2:-2}
ramp=1
results=/tmp/bench-bitmap.results
: >$results
export DM_DISABLE_UDEV=1

modprobe -a raid1 raid456 || fail "cannot load md raid1/456"
load_module_with bitmap_clean_ms=1000
set -- $(graid_nvme_disks)
[ $# -ge 3 ] || fail "needs 3 NVMe drives"
d0=$1 d1=$2 d2=$3
echo "members: $d0 $d1 $d2 (${GRAID_DISK_SIZE_MB} MiB each), ${runtime} s + ${ramp} s ramp per run, $rounds rounds"
# Every block of the drives written once first: the images are sparse files, and a first
# write to a block costs the host an allocation, which would load whichever cell runs first.
for d in $d0 $d1 $d2; do
	dd if=/dev/zero of=$d bs=1M oflag=direct 2>/dev/null
done

# fio_rate NAME RW BS DEPTH SECONDS: IOPS (4k) or MiB/s (1M) of one run on $dev.
fio_rate() {
	fio --name="$1" --filename="$dev" --rw="$2" --bs="$3" --direct=1 --ioengine=libaio \
		--iodepth="$4" --time_based --runtime="$5" --ramp_time=$ramp --norandommap \
		--randrepeat=0 --minimal >/tmp/fio.out 2>&1 || { cat /tmp/fio.out; fail "fio $1 failed"; }
	# Terse v3: field 48 write KiB/s, 49 write IOPS.
	awk -F';' -v bs="$3" '$1 == 3 { if (bs == "4k") printf "%d\n", $49; else printf "%.1f\n", $48 / 1024 }' /tmp/fio.out
}

# up TOOL LEVEL BITMAP: the array (graid or md; BITMAP none, 64M or 1M); its device in $dev.
up() {
	case $2 in
	1) m="$d0 $d1" chunk= mdchunk= ;;
	5) m="$d0 $d1 $d2" chunk="--chunk 64K" mdchunk="--chunk=64K --layout=left-symmetric" ;;
	esac
	wipe_superblocks $m
	if [ "$1" = graid ]; then
		b="--bitmap none"
		[ "$3" != none ] && b="--bitmap-chunk $3"
		graidctl create bb --level $2 $chunk $b --assume-clean $m >/tmp/create.out 2>&1 ||
			{ cat /tmp/create.out; fail "graidctl create failed"; }
		dev=$(array_dev "$(cat /tmp/create.out)")
	else
		b="--bitmap=none"
		[ "$3" != none ] && b="--bitmap=internal --bitmap-chunk=$3"
		mdadm --create /dev/md0 --run --level=$2 $mdchunk $b --raid-devices=$(echo $m | wc -w) \
			--metadata=1.2 --assume-clean $m >/tmp/create.out 2>&1 ||
			{ cat /tmp/create.out; fail "mdadm --create failed"; }
		[ -e /sys/block/md0/md/bitmap/time_base ] && echo 1 >/sys/block/md0/md/bitmap/time_base
		dev=/dev/md0
	fi
}

down() {
	if [ "$1" = graid ]; then
		graidctl stop bb >/dev/null || fail "graidctl stop failed"
	else
		mdadm --stop /dev/md0 >/dev/null 2>&1 || fail "mdadm --stop failed"
		mdadm --zero-superblock $m >/dev/null 2>&1
	fi
	wipe_superblocks $m
}

# cell TOOL LEVEL BITMAP: the three workloads on a fresh array.
cell() {
	up "$1" "$2" "$3"
	for w in "rand4k randwrite 4k 32" "seq1m write 1M 8"; do
		set -- "$@" $w
		v=$(fio_rate $4 $5 $6 $7 $runtime)
		echo "$2 $1 $3 $4 $v" >>$results
		printf 'raid%-3s %-6s bitmap %-5s %-7s %10s\n' "$2" "$1" "$3" "$4" "$v"
		set -- "$1" "$2" "$3"
	done
	# Idle until every bit is clear (two looks 1 s apart, md: a few seconds), then a burst.
	sleep 4
	v=$(fio_rate burst randwrite 4k 32 2)
	echo "$2 $1 $3 burst $v" >>$results
	printf 'raid%-3s %-6s bitmap %-5s %-7s %10s\n' "$2" "$1" "$3" burst "$v"
	down "$1"
}

echo
echo "=== write cost"
for r in $(seq 1 $rounds); do
	for level in 1 5; do
		for bitmap in none 64M 1M; do
			if [ $((r % 2)) = 1 ]; then cell graid $level $bitmap; cell md $level $bitmap; else
				cell md $level $bitmap; cell graid $level $bitmap; fi
		done
	done
done

echo
echo "=== means (4k: IOPS, 1M: MiB/s) and ratios to the same tool without a bitmap"
printf '%-6s %-6s %-7s %10s %10s %10s %8s %8s\n' level tool load none 64M 1M 64M/none 1M/none
for level in 1 5; do
	for tool in graid md; do
		for load in rand4k seq1m burst; do
			mean() { awk -v l=$level -v t=$tool -v b=$1 -v w=$load \
				'$1 == l && $2 == t && $3 == b && $4 == w { s += $5; n++ } END { if (n) printf "%.1f", s / n; else print 0 }' $results; }
			none=$(mean none) big=$(mean 64M) small=$(mean 1M)
			printf '%-6s %-6s %-7s %10s %10s %10s %8s %8s\n' raid$level $tool $load $none $big $small \
				$(awk -v a=$big -v b=$none 'BEGIN { printf "%.2f", b ? a / b : 0 }') \
				$(awk -v a=$small -v b=$none 'BEGIN { printf "%.2f", b ? a / b : 0 }')
		done
	done
done

dmesg | grep -iE 'warn|error|bug' | head -n 20
echo "bench-bitmap done"
