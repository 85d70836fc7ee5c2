# Parity offload at the array level (`make bench-offload`; not a test): RAID 5 and RAID 6 on
# six NVMe drives, 1 MiB sequential writes (full stripes: what goes to the helper) and a
# rebuild of one member, each with parity computed in the kernel and with graid-helper
# attached, alternating, ROUNDS times, in the same VM run. Prints MiB/s (rebuild: seconds),
# helper/kernel ratios and the helper's counters. Under QEMU TCG only the same-run ratios mean
# anything; the helper's own throughput is measured natively (`make bench-ring`).
. /graid/lib.sh
rounds=${BENCH_ROUNDS:-2}
size=${BENCH_SIZE:-96M}
need_members 6
set -- $members

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

# rebuild_secs NAME LAST: seconds to rebuild member LAST after fail, remove, add.
rebuild_secs() {
	graidctl fail $1 $2 >/dev/null && graidctl remove $1 $2 >/dev/null || fail "fail/remove"
	wipe_superblocks $2
	start=$(cut -d' ' -f1 /proc/uptime)
	graidctl add $1 $2 >/dev/null && graidctl wait $1 >/dev/null 2>&1 || fail "rebuild"
	end=$(cut -d' ' -f1 /proc/uptime)
	echo "$start $end" | awk '{ printf "%.1f", $2 - $1 }'
}

: >/tmp/helper.log
echo "members: 6 NVMe drives, 64K chunks, $size of 1 MiB writes per run, $rounds rounds"
for level in 5 6; do
	wipe_superblocks "$@"
	graidctl create b$level --level $level --chunk 64K --assume-clean "$@" >/tmp/create.out 2>&1 ||
		{ cat /tmp/create.out; fail "create"; }
	dev=$(array_dev "$(cat /tmp/create.out)")
	k_total=0 h_total=0 kr_total=0 hr_total=0
	for r in $(seq $rounds); do
		for mode in kernel helper; do
			[ $mode = helper ] && start_helper
			mib=$(seqwrite $dev)
			secs=$(rebuild_secs b$level $6)
			[ $mode = helper ] && { graidctl helper | grep -E 'Offloaded|In kernel'; stop_helper; }
			echo "RAID $level round $r $mode: seqwrite $mib MiB/s, rebuild ${secs} s"
			if [ $mode = kernel ]; then
				k_total=$((k_total + mib)) kr_total=$(echo "$kr_total $secs" | awk '{print $1 + $2}')
			else
				h_total=$((h_total + mib)) hr_total=$(echo "$hr_total $secs" | awk '{print $1 + $2}')
			fi
		done
	done
	echo "RAID $level: seqwrite kernel $((k_total / rounds)) MiB/s, helper $((h_total / rounds)) MiB/s," \
		"helper/kernel $(echo "$h_total $k_total" | awk '{ printf "%.2f", $1 / $2 }');" \
		"rebuild helper/kernel time $(echo "$hr_total $kr_total" | awk '{ printf "%.2f", $1 / $2 }')"
	graidctl stop b$level >/dev/null || fail "stop"
done
graidctl helper
dmesg | grep -iE "warn|error|bug" | grep -v "member .* failed on request\|rebuilding\|rebuilt" | tail -n 5
