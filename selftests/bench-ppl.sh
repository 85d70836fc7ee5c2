# The partial parity log's write cost, graid against md's PPL, in one VM run (`make bench-ppl`;
# not a test):
#
#   selftests/vm.sh --disks 6 --disk-size 512 selftests/bench-ppl.sh [RUNTIME_S [ROUNDS]]
#
# RAID 5 (64 KiB chunks, left-symmetric) on three drives, created four ways on the same
# members: graid and md, each with its partial parity log (graid's default, md's
# --consistency-policy=ppl) and without (--consistency-policy resync), no bitmap in any (md
# cannot have both; the bitmap's own cost is `make bench-bitmap`'s). fio (libaio, O_DIRECT)
# runs 4k random writes at iodepth 32, 64k random writes at iodepth 8 (partial stripes: a
# stripe holds 128 KiB of data) and 1M sequential writes at iodepth 8 (full stripes, which
# neither tool logs), for RUNTIME_S seconds (default 8) after a 1 s ramp, on a fresh array
# each time, ROUNDS times (default 2; graid first in odd rounds). Prints every run, then the
# means and each tool's ratio with the log to without. The drives are written whole once
# before the first cell (sparse images). Under QEMU TCG only the same-run ratios mean anything.
. /graid/lib.sh
runtime=${1:-8}
rounds=${2:-2}
ramp=1
results=/tmp/bench-ppl.results
: >$results

modprobe raid456 || fail "cannot load md raid456"
load_module
set -- $(graid_nvme_disks)
[ $# -ge 3 ] || fail "needs 3 NVMe drives"
m="$1 $2 $3"
echo "members: $m (${GRAID_DISK_SIZE_MB} MiB each), ${runtime} s + ${ramp} s ramp per run, $rounds rounds"
for d in $m; do
	dd if=/dev/zero of=$d bs=1M oflag=direct 2>/dev/null
done

# fio_rate NAME RW BS DEPTH: IOPS (4k, 64k) or MiB/s (1M) of one run on $dev.
fio_rate() {
	fio --name="$1" --filename="$dev" --rw="$2" --bs="$3" --direct=1 --ioengine=libaio \
		--iodepth="$4" --time_based --runtime="$runtime" --ramp_time=$ramp --norandommap \
		--randrepeat=0 --minimal >/tmp/fio.out 2>&1 || { cat /tmp/fio.out; fail "fio $1 failed"; }
	# Terse v3: field 48 write KiB/s, 49 write IOPS.
	awk -F';' -v bs="$3" '$1 == 3 { if (bs == "1M") printf "%.1f\n", $48 / 1024; else printf "%d\n", $49 }' /tmp/fio.out
}

# up TOOL POLICY: the array (graid or md; POLICY ppl or resync); its device in $dev.
up() {
	wipe_superblocks $m
	if [ "$1" = graid ]; then
		graidctl create pb --level 5 --chunk 64K --bitmap none --consistency-policy $2 \
			--assume-clean $m >/tmp/create.out 2>&1 || { cat /tmp/create.out; fail "graidctl create failed"; }
		dev=$(array_dev "$(cat /tmp/create.out)")
	else
		mdadm --create /dev/md0 --run --level=5 --chunk=64K --layout=left-symmetric \
			--bitmap=none --consistency-policy=$2 --raid-devices=3 --metadata=1.2 --assume-clean $m \
			>/tmp/create.out 2>&1 || { cat /tmp/create.out; fail "mdadm --create failed"; }
		dev=/dev/md0
	fi
}

down() {
	if [ "$1" = graid ]; then
		graidctl stop pb >/dev/null || fail "graidctl stop failed"
	else
		mdadm --stop /dev/md0 >/dev/null 2>&1 || fail "mdadm --stop failed"
		mdadm --zero-superblock $m >/dev/null 2>&1
	fi
	wipe_superblocks $m
}

# cell TOOL POLICY: the three workloads on a fresh array.
cell() {
	up "$1" "$2"
	for w in "rand4k randwrite 4k 32" "rand64k randwrite 64k 8" "seq1m write 1M 8"; do
		set -- "$@" $w
		v=$(fio_rate $3 $4 $5 $6)
		echo "$1 $2 $3 $v" >>$results
		printf '%-6s %-7s %-8s %10s\n' "$1" "$2" "$3" "$v"
		set -- "$1" "$2"
	done
	[ "$1" = graid ] && graidctl detail pb | grep 'Write Hole'
	down "$1"
}

echo
echo "=== write cost"
for r in $(seq 1 $rounds); do
	for policy in resync ppl; do
		if [ $((r % 2)) = 1 ]; then cell graid $policy; cell md $policy; else
			cell md $policy; cell graid $policy; fi
	done
done

echo
echo "=== means (4k, 64k: IOPS; 1M: MiB/s) and each tool's ratio with the log to without"
printf '%-6s %-8s %10s %10s %8s\n' tool load resync ppl ppl/resync
for tool in graid md; do
	for load in rand4k rand64k seq1m; do
		mean() { awk -v t=$tool -v p=$1 -v w=$load \
			'$1 == t && $2 == p && $3 == w { s += $4; n++ } END { if (n) printf "%.1f", s / n; else print 0 }' $results; }
		off=$(mean resync) on=$(mean ppl)
		printf '%-6s %-8s %10s %10s %8s\n' $tool $load $off $on \
			$(awk -v a=$on -v b=$off 'BEGIN { printf "%.2f", b ? a / b : 0 }')
	done
done

dmesg | grep -iE 'warn|error|bug' | head -n 20
echo "bench-ppl done"
