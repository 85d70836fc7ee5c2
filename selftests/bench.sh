# graid vs Linux md on the same members, in one VM run (`make bench`; not a test).
#
#   selftests/vm.sh --disks 4 --disk-size 512 selftests/bench.sh [RUNTIME_S [ROUNDS [CHUNK [MEMBERS]]]]
#
# MEMBERS: nvme (default: the VM's four emulated NVMe drives) or nullblk (four memory-backed
# null_blk devices of 256 MiB: no device emulation, so the drivers' own cost shows; md needs
# members that keep its superblock, so QEMU's null-co drives cannot serve both). RAID 0 and
# RAID 10 (near-2) on four members and RAID 1 on two, created by graidctl (--assume-clean) and
# by mdadm (metadata 1.2, --assume-clean, no bitmap) with the same chunk (default 512K) and
# member order. fio (libaio, O_DIRECT, one job) runs 4k random read and write at iodepth 1 and
# 32 and 1M sequential read and write at iodepth 32, RUNTIME_S seconds each (default 10) after
# a 2 s ramp. Each workload runs on a fresh graid array and a fresh md array back to back,
# ROUNDS times (default 2; graid first in odd rounds, md first in even ones), so background load
# and drift hit both alike; one raw member is the reference. Then the members' aggregate: 4k
# random reads, one job per member at iodepth 32, against RAID 0 with four such jobs. Prints
# every run, one table per level (means, graid/md), the aggregate, and the kernel log's
# warnings and errors. Under QEMU TCG only the same-run ratios mean anything.
. /graid/lib.sh
runtime=${1:-10}
rounds=${2:-2}
chunk=${3:-512K}
member_kind=${4:-nvme}
ramp=2
# name:fio rw:block size:iodepth:metric (iops, or mib = MiB/s)
workloads="randread1:randread:4k:1:iops randread32:randread:4k:32:iops randwrite1:randwrite:4k:1:iops randwrite32:randwrite:4k:32:iops seqread:read:1M:32:mib seqwrite:write:1M:32:mib"
results=/tmp/bench.results
: >$results
fio_errors=0

load_module
dmesg -c >/dev/null   # the report at the end shows only what the bench caused
# Without /sbin/modprobe the kernel cannot load md personalities on demand.
modprobe -a raid0 raid1 raid10 || fail "cannot load md raid0/raid1/raid10"
case $member_kind in
nvme)
	set -- $(graid_nvme_disks)
	[ $# -ge 4 ] || fail "needs 4 NVMe drives"
	size_mb=$GRAID_DISK_SIZE_MB
	;;
nullblk)
	modprobe null_blk nr_devices=0 || fail "cannot load null_blk"
	mount -t configfs none /sys/kernel/config 2>/dev/null
	size_mb=256
	set --
	for i in 0 1 2 3; do
		# configfs null_blk disks take their directory's name.
		d=/sys/kernel/config/nullb/nullb$i
		mkdir $d || fail "cannot make null_blk device $i"
		echo $size_mb >$d/size
		echo 1 >$d/memory_backed
		echo 2 >$d/queue_mode
		nproc >$d/submit_queues
		echo 1 >$d/power || fail "cannot power null_blk device $i"
		set -- "$@" /dev/nullb$i
	done
	udevadm settle 2>/dev/null
	for b in "$@"; do
		n=0
		while ! [ -b $b ] && [ $n -lt 50 ]; do usleep 100000; n=$((n + 1)); done
		[ -b $b ] || fail "no $b"
	done
	;;
*) fail "MEMBERS is nvme or nullblk, not '$member_kind'" ;;
esac
members="$1 $2 $3 $4"
raw=$1
echo "members: $member_kind $members (${size_mb} MiB each), chunk $chunk, ${runtime} s + ${ramp} s ramp per run, $rounds rounds"

# run_workload LEVEL KIND DEVS WORKLOAD: one fio run; appends "LEVEL KIND NAME VALUE". DEVS is
# one device, or several separated by ':' (one job each, results summed).
run_workload() {
	IFS=: read -r name rw bs iodepth metric <<EOF
$4
EOF
	jobs=
	for f in $(echo "$3" | tr ':' ' '); do jobs="$jobs --name=$name --filename=$f"; done
	fio --rw="$rw" --bs="$bs" --direct=1 --ioengine=libaio --iodepth="$iodepth" \
		--time_based --runtime="$runtime" --ramp_time=$ramp --norandommap --randrepeat=0 \
		--group_reporting --minimal $jobs >/tmp/fio.out 2>&1
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
	printf '%-7s %-6s %-12s %10s %s\n' "$1" "$2" "$name" "$v" "$([ "$metric" = iops ] && echo IOPS || echo MiB/s)"
}

# level_members LEVEL: RAID 1 mirrors the first two members, the other levels use all four.
level_members() {
	if [ "$1" = 1 ]; then echo "$members" | cut -d' ' -f1-2; else echo "$members"; fi
}

# up_graid LEVEL, up_md LEVEL: create the array on the members; its device in $dev.
# down_graid LEVEL, down_md LEVEL: stop it and blank the members' superblocks.
up_graid() {
	c="--chunk $chunk"
	[ "$1" = 1 ] && c=
	graidctl create "bench$1" --level "$1" $c --assume-clean $(level_members $1) >/tmp/create.out 2>&1 ||
		{ cat /tmp/create.out; fail "graidctl create failed"; }
	dev=$(grep -o '/dev/graid[0-9]*' /tmp/create.out | head -n 1)
	[ -b "$dev" ] || { cat /tmp/create.out; fail "no graid block device"; }
}

down_graid() {
	detail=$(graidctl --json detail "bench$1")
	echo "$detail" | grep -q '"errors": [1-9]' && { echo "graid member errors:"; echo "$detail"; }
	graidctl stop "bench$1" >/dev/null || fail "graidctl stop failed"
	for m in $(level_members $1); do
		graidctl zero-superblock "$m" >/dev/null || fail "zero-superblock $m failed"
	done
}

up_md() {
	opts="--chunk=$chunk"
	[ "$1" = 10 ] && opts="$opts --layout=n2 --bitmap=none"
	[ "$1" = 1 ] && opts="--bitmap=none"
	m=$(level_members $1)
	mdadm --create /dev/md0 --run --level="$1" $opts --raid-devices=$(echo $m | wc -w) \
		--metadata=1.2 --assume-clean $m >/tmp/create.out 2>&1 ||
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
	mdadm --zero-superblock $(level_members $1) || fail "mdadm --zero-superblock failed"
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
for level in 0 1 10; do
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

echo "--- the members' aggregate 4k random read vs RAID 0 (one job per member, iodepth 32 each)"
agg="aggregate:randread:4k:32:iops"
r=1
while [ $r -le "$rounds" ]; do
	run_workload members raw "$(echo $members | tr ' ' ':')" "$agg"
	for kind in graid md; do
		up_$kind 0
		run_workload raid0 $kind "$dev:$dev:$dev:$dev" "$agg"
		down_$kind 0
	done
	r=$((r + 1))
done

echo
echo "fio libaio O_DIRECT, ${runtime} s per run after ${ramp} s ramp, iodepth as named (QD);"
echo "graid and md: mean of $rounds runs each, paired back to back; pairs: the median of the"
echo "rounds' graid/md ratios; raw member: one run on $raw."
echo "IOPS for 4k, MiB/s for 1M. QEMU TCG: absolute numbers mean nothing, compare ratios."
for level in 0 1 10; do
	echo
	echo "RAID $level, $(echo $(level_members $level) | wc -w) $member_kind members, chunk $([ $level = 1 ] && echo - || echo $chunk)"
	awk -v lv="raid$level" '
	{ k = $1 " " $2 " " $3; sum[k] += $4; n[k]++; v[k, n[k]] = $4; runs[k] = runs[k] " " $4 }
	END {
		printf "%-18s %-6s %10s %10s %9s %8s %11s   %s\n", "workload", "unit", "graid", "md", "graid/md", "pairs", "raw member", "runs: graid | md"
		split("randread1 randread32 randwrite1 randwrite32 seqread seqwrite", ws, " ")
		split("4k randread QD1|4k randread QD32|4k randwrite QD1|4k randwrite QD32|1M seq read|1M seq write", label, "|")
		for (i = 1; i <= 6; i++) {
			w = ws[i]
			kg = lv " graid " w; km = lv " md " w
			g = sum[kg] / n[kg]
			m = sum[km] / n[km]
			r = sum["raw raw " w] / n["raw raw " w]
			# pairs: the median of each round'"'"'s graid/md ratio (the two runs of a round are
			# back to back, so drift of the host cancels within a pair).
			np = 0
			for (j = 1; j <= n[kg] && j <= n[km]; j++) {
				if (v[km, j] <= 0) continue
				x = v[kg, j] / v[km, j]
				for (q = np; q > 0 && pr[q] > x; q--) pr[q + 1] = pr[q]
				pr[q + 1] = x; np++
			}
			med = np == 0 ? 0 : (np % 2 ? pr[(np + 1) / 2] : (pr[np / 2] + pr[np / 2 + 1]) / 2)
			printf "%-18s %-6s %10.1f %10.1f %9.2f %8.2f %11.1f  %s |%s\n", label[i], (i <= 4 ? "IOPS" : "MiB/s"),
				g, m, (m > 0 ? g / m : 0), med, r, runs[kg], runs[km]
		}
	}' $results
done
echo
awk '$3 == "aggregate" { k = $1 " " $2; s[k] += $4; n[k]++; runs[k] = runs[k] " " $4 }
END {
	m = s["members raw"] / n["members raw"]; g = s["raid0 graid"] / n["raid0 graid"]
	d = s["raid0 md"] / n["raid0 md"]
	printf "4k randread, 4 jobs x QD32, IOPS: members %.1f, graid RAID 0 %.1f (%.2f of the members), md RAID 0 %.1f (%.2f)\n", m, g, (m > 0 ? g / m : 0), d, (m > 0 ? d / m : 0)
	printf "runs: members%s | graid%s | md%s\n", runs["members raw"], runs["raid0 graid"], runs["raid0 md"]
}' $results

unload_module
echo
echo "--- kernel log during the bench (warn|bug|error):"
dmesg | grep -iE 'warn|bug|error' || echo "(none)"
[ $fio_errors = 0 ] || fail "$fio_errors fio runs failed"
