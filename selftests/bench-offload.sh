# Parity offload at the array level (`make bench-offload`; not a test): RAID 5 and RAID 6 on
# six NVMe drives, 1 MiB sequential writes (full stripes: what goes to the helper) with parity
# computed in the kernel and with graid-helper attached, alternating, ROUNDS times, in the same
# VM run; twice: with offload_balance=0 (every eligible job to the helper: the helper's own
# cost) and with the default policy (each job to the side that costs less now). Prints MiB/s,
# the helper/kernel ratio and the helper's counters. Then the rebuild of one member of a RAID 6
# over 64 MiB slices of the same drives (its recoveries and generations go to the helper, the
# worker waiting for each), kernel and helper alternating, as MiB/s of the member rebuilt. Under
# QEMU TCG only the same-run ratios mean anything; the helper's own throughput is measured
# natively (`make bench-ring`).
. /graid/lib.sh
rounds=${BENCH_ROUNDS:-3}
size=${BENCH_SIZE:-256M}
need_members 6
export DM_DISABLE_UDEV=1

# The lib's helper, with the bench's pool and every CPU.
start_helper() {
	graid-helper run --pool-mib 64 >/dev/null 2>>/tmp/helper.log </dev/null &
	helper=$!
	wait_helper healthy 20 || fail "the helper did not attach"
}
stop_helper() {
	kill -TERM $helper && wait $helper
}

# seqwrite: MiB/s of 1 MiB direct sequential writes to $dev, iodepth 16.
seqwrite() {
	fio --name=seq --filename="$dev" --rw=write --bs=1M --size=$size --direct=1 \
		--ioengine=libaio --iodepth=16 --minimal >/tmp/fio.out 2>&1 || { cat /tmp/fio.out; fail "fio"; }
	# Terse v3: field 48 is the write bandwidth in KiB/s.
	echo $(($(cut -d';' -f48 /tmp/fio.out) / 1024))
}

# uptime_cs: centiseconds since boot (busybox date has no nanoseconds).
uptime_cs() { awk '{ printf "%d", $1 * 100 }' /proc/uptime; }

# rebuild_mibs: MiB/s of rebuilding member s1 of array $name (failed, removed, blanked, added
# back, waited for).
rebuild_mibs() {
	graidctl fail $name /dev/mapper/s1 >/dev/null && graidctl remove $name /dev/mapper/s1 >/dev/null ||
		fail "fail/remove"
	wipe_superblocks /dev/mapper/s1
	t0=$(uptime_cs)
	graidctl add $name /dev/mapper/s1 >/dev/null || fail "add"
	graidctl wait $name >/dev/null 2>&1 || fail "wait"
	t1=$(uptime_cs)
	# 62 MiB of member data (64 MiB slices, 2 MiB reserved).
	echo "62 $t0 $t1" | awk '{ printf "%.1f", $1 * 100 / ($3 - $2 > 0 ? $3 - $2 : 1) }'
}

# compare WHAT MEASURE: MEASURE (a command printing MiB/s) with parity in the kernel and with
# the helper attached, $rounds times each, alternating who goes first so drift hits both alike;
# each result, then the averages and the helper/kernel ratio on one line.
compare() {
	what=$1 measure=$2
	k_total=0 h_total=0
	for r in $(seq $rounds); do
		order="kernel helper"
		[ $((r % 2)) = 0 ] && order="helper kernel"
		for mode in $order; do
			[ $mode = helper ] && start_helper
			mibs=$($measure)
			[ $mode = helper ] && { graidctl helper | grep -E 'Offloaded|Background|In kernel'; stop_helper; }
			echo "$what round $r $mode: $mibs MiB/s"
			if [ $mode = kernel ]; then
				k_total=$(echo "$k_total $mibs" | awk '{ print $1 + $2 }')
			else
				h_total=$(echo "$h_total $mibs" | awk '{ print $1 + $2 }')
			fi
		done
	done
	echo "$what: kernel $(echo "$k_total $rounds" | awk '{ printf "%.1f", $1 / $2 }') MiB/s," \
		"helper $(echo "$h_total $rounds" | awk '{ printf "%.1f", $1 / $2 }') MiB/s," \
		"helper/kernel $(echo "$h_total $k_total" | awk '{ printf "%.2f", $1 / $2 }')"
}

# bench_level LEVEL BALANCE: sequential writes to a RAID LEVEL of the six drives.
bench_level() {
	level=$1 balance=$2 name=b$1
	wipe_superblocks $members
	graidctl create $name --level $level --chunk 64K --bitmap none --assume-clean $members >/tmp/create.out 2>&1 ||
		{ cat /tmp/create.out; fail "create"; }
	dev=$(array_dev "$(cat /tmp/create.out)")
	compare "RAID $level seqwrite, offload_balance=$balance" seqwrite
	graidctl stop $name >/dev/null || fail "stop"
}

# bench_rebuild BALANCE: rebuilds of one member of a RAID 6 over 64 MiB slices of the drives.
bench_rebuild() {
	balance=$1 name=rb
	wipe_superblocks $members
	dm_slices $members
	slices="/dev/mapper/s0 /dev/mapper/s1 /dev/mapper/s2 /dev/mapper/s3 /dev/mapper/s4 /dev/mapper/s5"
	graidctl create $name --level 6 --chunk 64K --bitmap none --assume-clean $slices >/tmp/create.out 2>&1 ||
		{ cat /tmp/create.out; fail "create"; }
	compare "RAID 6 rebuild, offload_balance=$balance" rebuild_mibs
	graidctl stop $name >/dev/null || fail "stop"
	for i in 0 1 2 3 4 5; do dmsetup --noudevsync remove s$i; done
}

: >/tmp/helper.log
echo "members: 6 NVMe drives, 64K chunks, $size of 1 MiB writes per run, $rounds rounds"
for balance in 0 1; do
	unload_module
	modprobe raid_gpu offload_balance=$balance || fail "modprobe"
	for level in 5 6; do
		bench_level $level $balance
	done
	bench_rebuild $balance
	graidctl helper
done
dmesg | grep -iE "warn|error|bug" | grep -v "member .* failed on request\|rebuilding\|rebuilt" | tail -n 5
