# Parity writes as shipped, graid against md, in one VM run (`make bench-shipped`; not a test):
#
#   selftests/vm.sh --disks 6 --disk-size 512 --mem 3072 selftests/bench-shipped.sh \
#       [RUNTIME_S [ROUNDS [CHUNKS [LEVELS [MEMBERS]]]]]
#
# RAID 5 and RAID 6 (LEVELS, default "5 6"; left-symmetric) on six drives, at each chunk size of
# CHUNKS (default "512K 64K"). MEMBERS: nvme (default: the VM's six emulated NVMe drives) or
# nullblk (six memory-backed null_blk disks of 512 MiB: no device emulated, so the drivers' own
# CPU cost per write shows). Each array is created four ways:
#
# - md0: md with its defaults at this size (no bitmap, no PPL) and bench.sh's raid456 tuning;
# - bare: graid without bitmap and log (--bitmap none --consistency-policy resync);
# - small: graid as created on these 512 MiB drives (bitmap and partial parity log, each with
#   graid's defaults: the log gets 1 MiB on members this small);
# - large: the same on the drives seen as 64 GiB members (dm: the drive, then a zero target),
#   where graid's default log is what a member of 64 GiB or more gets (64 MiB).
#
# Every shape's members are dm-linear devices over the drives (the same hop for all).
#
# fio (libaio, O_DIRECT) runs 4k random writes, 4 jobs at iodepth 32, and 1M sequential writes
# at iodepth 8, over the array's first 1 GiB (inside the drives' real part on every shape), for
# RUNTIME_S seconds (default 8) after a 1 s ramp, on a fresh array each time, ROUNDS times
# (default 2; the order of the four rotates each round). Prints every run, the means, each
# graid shape's ratio to md and the guest CPU time per I/O. Under QEMU TCG only the same-run
# ratios mean anything.
. /graid/lib.sh
runtime=${1:-8}
rounds=${2:-2}
chunks=${3:-512K 64K}
levels=${4:-5 6}
member_kind=${5:-nvme}
ramp=1
region=1G
results=/tmp/bench-shipped.results
: >$results
export DM_DISABLE_UDEV=1

modprobe -a raid456 dm-mod || fail "cannot load md raid456 or dm"
load_module
case $member_kind in
nvme)
	set -- $(graid_nvme_disks)
	[ $# -ge 6 ] || fail "needs 6 NVMe drives"
	size_mb=$GRAID_DISK_SIZE_MB
	for d in "$@"; do
		dd if=/dev/zero of=$d bs=1M oflag=direct 2>/dev/null
	done
	;;
nullblk)
	# Memory-backed: they read zeroes until written, and zeroing them would only fill memory.
	size_mb=512
	nullblk_devices 6 $size_mb
	set -- $nullblk_devices
	;;
*) fail "MEMBERS is nvme or nullblk, not '$member_kind'" ;;
esac
drives="$1 $2 $3 $4 $5 $6"
# Every shape's members are dm devices over the drives (the same dm-linear hop for all), for
# 'large' with a zero target after each drive up to 64 GiB.
large_sectors=$((64 * 1024 * 2048))
bench_dm_members 0 $drives
members=$bench_members
echo "members: $members over $member_kind $drives (${size_mb} MiB each; 'large' sees them as 64 GiB members), chunks $chunks, levels $levels, ${runtime} s + ${ramp} s ramp per run over the first $region, $rounds rounds"

# cpu_ticks: the guest's busy CPU time so far, in clock ticks (all CPUs, idle and iowait left out).
cpu_ticks() { awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 }' /proc/stat; }

# fio_rate NAME RW BS DEPTH JOBS: "VALUE IOS TICKS" of one run on $dev: IOPS (4k) or MiB/s (1M),
# the I/Os done after the ramp and the guest CPU ticks of the whole run (fio's start and ramp
# too: the per-I/O cost is a little high, alike for every shape).
fio_rate() {
	local t0 t1
	t0=$(cpu_ticks)
	fio --name="$1" --filename="$dev" --rw="$2" --bs="$3" --direct=1 --ioengine=libaio \
		--iodepth="$4" --numjobs="$5" --size=$region --time_based --runtime="$runtime" \
		--ramp_time=$ramp --norandommap --randrepeat=0 --group_reporting --minimal \
		>/tmp/fio.out 2>&1 || { cat /tmp/fio.out; fail "fio $1 failed"; }
	t1=$(cpu_ticks)
	# Terse v3: field 48 write KiB/s, 49 write IOPS, 50 write runtime (ms).
	awk -F';' -v bs="$3" -v ticks=$((t1 - t0)) '$1 == 3 {
		ios = $49 * $50 / 1000
		if (bs == "1M") v = $48 / 1024; else v = $49
		printf "%.1f %d %d\n", v, ios, ticks
	}' /tmp/fio.out
}

# up SHAPE LEVEL CHUNK: the array; its device in $dev.
up() {
	case $1 in
	md0)
		md_bench_create $2 $3 $members
		dev=/dev/md0
		;;
	bare)
		graidctl create bs --level $2 --chunk $3 --bitmap none --consistency-policy resync \
			--assume-clean $members >/tmp/create.out 2>&1 ||
			{ cat /tmp/create.out; fail "graidctl create failed"; }
		dev=$(array_dev "$(cat /tmp/create.out)")
		;;
	small | large)
		[ $1 = large ] && bench_dm_members $large_sectors $drives
		graidctl create bs --level $2 --chunk $3 --assume-clean $members >/tmp/create.out 2>&1 ||
			{ cat /tmp/create.out; fail "graidctl create failed"; }
		dev=$(array_dev "$(cat /tmp/create.out)")
		;;
	esac
	[ -b "$dev" ] || fail "no array device for $1"
}

down() {
	if [ $1 = md0 ]; then
		md_bench_stop $members
	else
		graidctl stop bs >/dev/null || fail "graidctl stop failed"
		[ $1 = large ] && bench_dm_members 0 $drives
	fi
	wipe_superblocks $members
}

# cell SHAPE LEVEL CHUNK: both workloads on a fresh array.
cell() {
	up "$@"
	[ $1 = large ] && [ -z "$shown_large" ] && shown_large=1 &&
		graidctl examine /dev/mapper/v0 | grep -E 'Journal|Data Offset'
	for w in "rand4k randwrite 4k 32 4" "seq1m write 1M 8 1"; do
		set -- "$1" "$2" "$3" $w
		res=$(fio_rate $4 $5 $6 $7 $8)
		echo "$1 $2 $3 $4 $res" >>$results
		printf '%-6s RAID%s %-5s %-7s %10s %s\n' $1 $2 $3 $4 ${res%% *} \
			"$([ $6 = 4k ] && echo IOPS || echo MiB/s)"
	done
	[ $1 != md0 ] && graidctl detail bs | grep 'Write Hole'
	down $1
}

echo
echo "=== runs"
shapes="md0 bare small large"
for round in $(seq 1 $rounds); do
	for level in $levels; do
		for chunk in $chunks; do
			# Rotate who goes first, so drift hits every shape alike.
			order=$(echo $shapes | awk -v r=$round '{ for (i = 0; i < NF; i++) printf "%s ", $((i + r - 1) % NF + 1) }')
			for s in $order; do cell $s $level $chunk; done
		done
	done
done

echo
echo "=== means (rand4k: IOPS, seq1m: MiB/s), ratio to md, guest CPU microseconds per I/O"
printf '%-6s %-5s %-7s %9s %9s %9s %9s %6s %6s %6s %6s %6s %6s\n' level chunk load md0 bare small large \
	bare/md small/md large/md us/md us/bare us/large
for level in $levels; do
	for chunk in $chunks; do
		for load in rand4k seq1m; do
			mean() { awk -v s=$1 -v l=$level -v c=$chunk -v w=$load \
				'$1 == s && $2 == l && $3 == c && $4 == w { v += $5; n++ } END { printf "%.1f", n ? v / n : 0 }' $results; }
			# Microseconds of guest CPU per I/O (100 ticks a second).
			cost() { awk -v s=$1 -v l=$level -v c=$chunk -v w=$load \
				'$1 == s && $2 == l && $3 == c && $4 == w { t += $7; n += $6 } END { printf "%.0f", n ? t * 10000 / n : 0 }' $results; }
			md=$(mean md0) bare=$(mean bare) small=$(mean small) big=$(mean large)
			ratio() { awk -v a=$1 -v b=$md 'BEGIN { printf "%.2f", b ? a / b : 0 }'; }
			printf '%-6s %-5s %-7s %9s %9s %9s %9s %6s %6s %6s %6s %6s %6s\n' RAID$level $chunk $load \
				$md $bare $small $big $(ratio $bare) $(ratio $small) $(ratio $big) \
				$(cost md0) $(cost bare) $(cost large)
		done
	done
done

dmesg | grep -iE 'warn|error|bug' | head -n 20
echo "bench-shipped done"
