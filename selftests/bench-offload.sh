# Parity offload at the array level (`make bench-offload`; not a test): RAID 5 and RAID 6 on
# six NVMe drives, 1 MiB sequential writes (full stripes: what goes to the helper) with parity
# computed in the kernel and with graid-helper attached, alternating, ROUNDS times, in the same
# VM run; twice: with offload_balance=0 (every eligible job to the helper: the helper's own
# cost) and with the default policy (each job to the side that costs less now). Prints MiB/s,
# the helper/kernel ratio and the helper's counters. (Rebuilds recover
# data, which stays in the kernel until the helper does RECOVER: nothing to compare yet.) Under QEMU TCG only the same-run ratios mean
# anything; the helper's own throughput is measured natively (`make bench-ring`).
. /graid/lib.sh
rounds=${BENCH_ROUNDS:-2}
size=${BENCH_SIZE:-64M}
need_members 6

start_helper() {
	graid-helper run --pool-mib 64 >/dev/null 2>>/tmp/helper.log </dev/null &
	helper=$!
	n=0
	until graidctl --json helper | grep -q '"state": "healthy"'; do
		n=$((n + 1))
		[ $n -le 200 ] || fail "the helper did not attach"
		usleep 100000
	done
}
stop_helper() {
	kill -TERM $helper && wait $helper
}

# seqwrite DEV: MiB/s of 1 MiB direct sequential writes, iodepth 16.
seqwrite() {
	fio --name=seq --filename="$1" --rw=write --bs=1M --size=$size --direct=1 \
		--ioengine=libaio --iodepth=16 --minimal >/tmp/fio.out 2>&1 || { cat /tmp/fio.out; fail "fio"; }
	# Terse v3: field 48 is the write bandwidth in KiB/s.
	echo $(($(cut -d';' -f48 /tmp/fio.out) / 1024))
}

# bench_level LEVEL BALANCE: one level's rounds, the ratio on one line.
bench_level() {
	level=$1 balance=$2
	wipe_superblocks $members
	graidctl create b$level --level $level --chunk 64K --assume-clean $members >/tmp/create.out 2>&1 ||
		{ cat /tmp/create.out; fail "create"; }
	dev=$(array_dev "$(cat /tmp/create.out)")
	k_total=0 h_total=0
	for r in $(seq $rounds); do
		# Alternate who goes first, so drift hits both alike.
		order="kernel helper"
		[ $((r % 2)) = 0 ] && order="helper kernel"
		for mode in $order; do
			[ $mode = helper ] && start_helper
			mib=$(seqwrite $dev)
			[ $mode = helper ] && { graidctl helper | grep -E 'Offloaded|In kernel'; stop_helper; }
			echo "RAID $level round $r $mode: seqwrite $mib MiB/s"
			if [ $mode = kernel ]; then
				k_total=$((k_total + mib))
			else
				h_total=$((h_total + mib))
			fi
		done
	done
	echo "RAID $level, offload_balance=$balance: seqwrite kernel $((k_total / rounds)) MiB/s, helper $((h_total / rounds)) MiB/s," \
		"helper/kernel $(echo "$h_total $k_total" | awk '{ printf "%.2f", $1 / $2 }')"
	graidctl stop b$level >/dev/null || fail "stop"
}

: >/tmp/helper.log
echo "members: 6 NVMe drives, 64K chunks, $size of 1 MiB writes per run, $rounds rounds"
for balance in 0 1; do
	unload_module
	modprobe raid_gpu offload_balance=$balance || fail "modprobe"
	for level in 5 6; do
		bench_level $level $balance
	done
	graidctl helper
done
dmesg | grep -iE "warn|error|bug" | grep -v "member .* failed on request\|rebuilding\|rebuilt" | tail -n 5
