# Where the CPU goes on writes, md and graid in one VM run (`make profile-writes`; not a test):
#
#   VM_EXTRA_BINARIES=/usr/bin/perf VM_KERNEL_ARGS=kmemleak=off \
#       selftests/vm.sh --disks 6 --disk-size 512 --mem 3072 selftests/profile-writes.sh \
#       [LEVEL [CHUNK [LOAD [RUNTIME_S [MEMBERS]]]]]
#
# A RAID LEVEL (default 5) of six drives (MEMBERS: nvme, the VM's emulated NVMe drives, the
# default; or nullblk, memory-backed null_blk disks of 512 MiB) at CHUNK (default 64K), made
# three ways in turn: md0 (md, no bitmap, bench.sh's raid456 tuning), bare (graid without
# bitmap and log) and shipped (graid with its defaults). fio runs LOAD (rand4k, the default: 4k
# random writes, 4 jobs at iodepth 32; seq1m: 1M sequential writes at iodepth 8) for RUNTIME_S
# seconds (default 8) over the first GiB under `perf record -a -g` (cpu-clock samples: QEMU TCG
# has no PMU); prints each run's rate, fio's own CPU and context switches per write, and its
# profile: symbols by their own share, by DSO, and with their callees. Under TCG the guest's
# MMIO (the NVMe doorbell) shows up on the instruction after it (`_raw_spin_unlock` in
# `nvme_queue_rq`).
. /graid/lib.sh
level=${1:-5}
chunk=${2:-64K}
load=${3:-rand4k}
runtime=${4:-8}
member_kind=${5:-nvme}
case $load in
rand4k) fio_jobs=4 fio_load="--rw=randwrite --bs=4k --iodepth=32 --numjobs=4" ;;
seq1m) fio_jobs=1 fio_load="--rw=write --bs=1M --iodepth=8 --numjobs=1" ;;
*) fail "LOAD is rand4k or seq1m, not '$load'" ;;
esac
command -v perf >/dev/null || fail "no perf in the guest: VM_EXTRA_BINARIES=/usr/bin/perf (Debian's linux-perf)"
modprobe raid456 || fail "cannot load md raid456"
load_module
case $member_kind in
nvme)
	set -- $(graid_nvme_disks)
	[ $# -ge 6 ] || fail "needs 6 NVMe drives"
	;;
nullblk)
	nullblk_devices 6 512
	set -- $nullblk_devices
	;;
*) fail "MEMBERS is nvme or nullblk, not '$member_kind'" ;;
esac
members="$1 $2 $3 $4 $5 $6"
echo 0 >/proc/sys/kernel/kptr_restrict
echo -1 >/proc/sys/kernel/perf_event_paranoid

# report NAME: the profile of the last run.
report() {
	local r="perf report -i /tmp/perf.$1 --stdio -g none"
	echo "--- $1: symbols by own share"
	$r --no-children --sort sym 2>/dev/null | grep -v '^#' | grep -v '^$' | head -n 40
	echo "--- $1: by DSO"
	$r --no-children --sort dso 2>/dev/null | grep -v '^#' | grep -v '^$' | head -n 8
	echo "--- $1: with callees"
	$r --children --sort sym 2>/dev/null | grep -v '^#' | grep -v '^$' | head -n 50
}

for shape in md0 bare shipped; do
	case $shape in
	md0)
		md_bench_create $level $chunk $members
		dev=/dev/md0
		;;
	bare)
		expect_rc 0 graidctl create pw --level $level --chunk $chunk --bitmap none \
			--consistency-policy resync --assume-clean $members
		dev=$(array_dev "$OUT")
		;;
	shipped)
		expect_rc 0 graidctl create pw --level $level --chunk $chunk --assume-clean $members
		dev=$(array_dev "$OUT")
		;;
	esac
	echo "=== $shape: RAID $level, chunk $chunk, $load"
	# fio reads the clock per I/O: through the vDSO on the TSC, by a system call otherwise.
	echo "clocksource: $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)"
	perf record -q -a -g -e cpu-clock -F 2000 -o /tmp/perf.$shape -- \
		fio --name=w --filename=$dev $fio_load --direct=1 --ioengine=libaio \
		--size=1G --time_based --runtime=$runtime --ramp_time=1 \
		--norandommap --randrepeat=0 --group_reporting --minimal >/tmp/fio.out 2>/tmp/perf.err ||
		{ cat /tmp/perf.err /tmp/fio.out; fail "perf or fio failed"; }
	# fio's own CPU (its jobs' user and system time, fields 88-89 a job's mean share of the run)
	# and its context switches (90), per write: how often a job slept for a completion.
	awk -F';' -v jobs=$fio_jobs '$1 == 3 {
		ios = $49 * $50 / 1000
		printf "IOPS %s, MiB/s %.1f\n", $49, $48 / 1024
		if (ios > 0)
			printf "fio: %.1f us CPU and %.2f context switches per write\n",
				($88 + $89) / 100 * jobs * $50 * 1000 / ios, $90 / ios
	}' /tmp/fio.out
	if [ $shape = shipped ]; then
		echo "log entries and the writes that carried them:" $(graid_debug log_writes)
	fi
	report $shape
	if [ $shape = md0 ]; then
		md_bench_stop $members
	else
		expect_rc 0 graidctl stop pw
	fi
	wipe_superblocks $members
done
unload_module
dmesg | grep -i clocksource
echo "profile-writes done"
