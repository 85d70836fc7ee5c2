# graid vs Linux md on the same four NVMe members, in one VM run (`make bench`; not a test).
#
#   selftests/vm.sh --disks 4 --disk-size 512 selftests/bench.sh [RUNTIME_S [ROUNDS [CHUNK]]]
#
# RAID 0 and RAID 10 (near-2), created by graidctl and by mdadm (metadata 1.2, --assume-clean,
# no bitmap) with the same chunk (default 512K) and member order. fio (libaio, O_DIRECT,
# iodepth 32, one job) runs 4k random read, 4k random write, 1M sequential read and 1M
# sequential write for RUNTIME_S seconds (default 10) after a 2 s ramp. Each workload runs on a
# fresh graid array and a fresh md array back to back, ROUNDS times (default 2; graid first in
# odd rounds, md first in even ones), so background load and drift hit both alike; one raw
# member is the reference. Prints every run, then one table per level (means, graid/md), then
# the kernel log's warnings and errors. Under QEMU TCG only the same-run ratios mean anything.
. /graid/lib.sh
runtime=${1:-10}
rounds=${2:-2}
chunk=${3:-512K}
ramp=2
iodepth=32
# name:fio rw:block size:metric (iops, or mib = MiB/s)
workloads="randread:randread:4k:iops randwrite:randwrite:4k:iops seqread:read:1M:mib seqwrite:write:1M:mib"
results=/tmp/bench.results
: >$results
fio_errors=0

load_module
dmesg -c >/dev/null   # the report at the end shows only what the bench caused
# Without /sbin/modprobe the kernel cannot load md personalities on demand.
modprobe -a raid0 raid10 || fail "cannot load md raid0/raid10"
set -- $(graid_nvme_disks)
[ $# -ge 4 ] || fail "needs 4 NVMe drives"
members="$1 $2 $3 $4"
raw=$1
echo "members: $members (${GRAID_DISK_SIZE_MB} MiB each), chunk $chunk, ${runtime} s + ${ramp} s ramp per run, $rounds rounds"

# run_workload LEVEL KIND DEV WORKLOAD: one fio run; appends "LEVEL KIND NAME VALUE".
run_workload() {
	IFS=: read -r name rw bs metric <<EOF
$4
EOF
	fio --name="$name" --filename="$3" --rw="$rw" --bs="$bs" --direct=1 --ioengine=libaio \
		--iodepth=$iodepth --numjobs=1 --time_based --runtime="$runtime" --ramp_time=$ramp \
		--norandommap --randrepeat=0 --minimal >/tmp/fio.out 2>&1
	rc=$?
	# Terse v3: field 5 error, 7/8 read KiB/s and IOPS, 48/49 write KiB/s and IOPS.
	v=$(awk -F';' -v m="$metric" -v w="$rw" '$1 == 3 {
		if ($5 != 0) exit 1
		wr = (w ~ /write/)
		if (m == "iops") v = wr ? $49 : $8; else v = (wr ? $48 : $7) / 1024
		printf "%.1f\n", v
	}' /tmp/fio.out)
	if [ $rc != 0 ] || [ -z "$v" ]; then
		echo "fio $name on $3 failed (exit $rc):"
		cat /tmp/fio.out
		fio_errors=$((fio_errors + 1))
		v=0
	fi
	echo "$1 $2 $name $v" >>$results
	printf '%-7s %-6s %-10s %10s %s\n' "$1" "$2" "$name" "$v" "$([ "$metric" = iops ] && echo IOPS || echo MiB/s)"
}

# up_graid LEVEL, up_md LEVEL: create the array on the members; its device in $dev.
# down_graid LEVEL, down_md: stop it and blank the members' superblocks.
up_graid() {
	graidctl create "bench$1" --level "$1" --chunk "$chunk" $members >/tmp/create.out 2>&1 ||
		{ cat /tmp/create.out; fail "graidctl create failed"; }
	dev=$(grep -o '/dev/graid[0-9]*' /tmp/create.out | head -n 1)
	[ -b "$dev" ] || { cat /tmp/create.out; fail "no graid block device"; }
}

down_graid() {
	detail=$(graidctl --json detail "bench$1")
	echo "$detail" | grep -q '"errors": [1-9]' && { echo "graid member errors:"; echo "$detail"; }
	graidctl stop "bench$1" >/dev/null || fail "graidctl stop failed"
	for m in $members; do
		graidctl zero-superblock "$m" >/dev/null || fail "zero-superblock $m failed"
	done
}

up_md() {
	opts=
	[ "$1" = 10 ] && opts="--layout=n2 --bitmap=none"
	mdadm --create /dev/md0 --run --level="$1" $opts --raid-devices=4 --chunk="$chunk" \
		--metadata=1.2 --assume-clean $members >/tmp/create.out 2>&1 ||
		{ cat /tmp/create.out; dmesg | tail -n 5; fail "mdadm --create failed"; }
	dev=/dev/md0
	[ -b $dev ] || fail "no /dev/md0"
	if [ -z "$md_shown" ]; then
		md_shown=1
		grep md0 /proc/mdstat
		mdadm --examine "$raw" | grep -E 'Data Offset|Chunk Size|Layout'
	fi
}

down_md() {
	mdadm --stop /dev/md0 >/dev/null 2>&1 || fail "mdadm --stop failed"
	mdadm --zero-superblock $members || fail "mdadm --zero-superblock failed"
}

# Write every member once, so no run meets never-written (sparse) backing blocks first.
fill=
for m in $members; do fill="$fill --name=fill-${m#/dev/} --filename=$m"; done
fio --rw=write --bs=1M --direct=1 --ioengine=libaio --iodepth=8 $fill --minimal >/dev/null ||
	fail "prefill failed"
wipe_superblocks $members

echo "--- raw member $raw"
for w in $workloads; do run_workload raw raw "$raw" "$w"; done
# Each workload runs on graid and md back to back, so both see the same background load.
for level in 0 10; do
	echo "--- RAID $level"
	md_shown=
	for w in $workloads; do
		r=1
		while [ $r -le "$rounds" ]; do
			if [ $((r % 2)) = 1 ]; then order="graid md"; else order="md graid"; fi
			for kind in $order; do
				up_$kind $level
				run_workload "raid$level" $kind "$dev" "$w"
				down_$kind $level
			done
			r=$((r + 1))
		done
	done
done

echo
echo "fio libaio O_DIRECT, iodepth $iodepth, 1 job, ${runtime} s per run after ${ramp} s ramp;"
echo "graid and md: mean of $rounds runs each, paired back to back; raw member: one run on $raw."
echo "IOPS for 4k, MiB/s for 1M. QEMU TCG: absolute numbers mean nothing, compare ratios."
for level in 0 10; do
	echo
	echo "RAID $level, 4 members, chunk $chunk"
	awk -v lv="raid$level" '
	{ k = $1 " " $2 " " $3; sum[k] += $4; n[k]++; runs[k] = runs[k] " " $4 }
	END {
		printf "%-14s %-6s %10s %10s %9s %11s   %s\n", "workload", "unit", "graid", "md", "graid/md", "raw member", "runs: graid | md"
		split("randread randwrite seqread seqwrite", ws, " ")
		split("4k randread|4k randwrite|1M seq read|1M seq write", label, "|")
		for (i = 1; i <= 4; i++) {
			w = ws[i]
			g = sum[lv " graid " w] / n[lv " graid " w]
			m = sum[lv " md " w] / n[lv " md " w]
			r = sum["raw raw " w] / n["raw raw " w]
			printf "%-14s %-6s %10.1f %10.1f %9.2f %11.1f  %s |%s\n", label[i], (i <= 2 ? "IOPS" : "MiB/s"),
				g, m, (m > 0 ? g / m : 0), r, runs[lv " graid " w], runs[lv " md " w]
		}
	}' $results
done

unload_module
echo
echo "--- kernel log during the bench (warn|bug|error):"
dmesg | grep -iE 'warn|bug|error' || echo "(none)"
[ $fio_errors = 0 ] || fail "$fio_errors fio runs failed"
