# A restripe's speed, graid against md, in one VM run (`make bench-reshape`; not a test; issue
# 46's "Measure"):
#
#   selftests/vm.sh --disks 6 --disk-size 512 selftests/bench-reshape.sh [ROUNDS]
#
# Two reshapes, each on fresh arrays of the same drives, graid's and md's in turn (graid first
# in odd rounds; ROUNDS, default 1):
# - grow: RAID 5 (64 KiB chunks) of four drives grown to five (md: --add, --grow
#   --raid-devices=5);
# - chunk: RAID 6 of five drives from 64 KiB chunks to 512 KiB (md: --grow --chunk=512).
# Each runs idle, then under a 4 KiB random read load (fio, iodepth 16, over the first 256
# MiB). Neither tool is held back: graid's set-speed --min 10G, md's speed_limit_min/max at
# 10 GB/s. Both move the data offset (md's v1.2 arrays with room before the data, no backup
# file): md's is made with --data-offset=8M; on members under 1 GiB graid lends its unused
# bitmap and log areas (both arrays are made without them).
# Prints each reshape's time and rate (the array's content over the time), the read IOPS
# before and during it, then graid's rates over md's and during over before.
# Under QEMU TCG only the same-run ratios mean anything.
. /graid/lib.sh
rounds=${1:-1}
results=/tmp/bench-reshape.results
: >$results
export DM_DISABLE_UDEV=1

modprobe raid456 || fail "cannot load md raid456"
load_module
set -- $(graid_nvme_disks)
[ $# -ge 5 ] || fail "needs 5 NVMe drives"
drives="$1 $2 $3 $4 $5"
echo "drives: $drives (${GRAID_DISK_SIZE_MB} MiB each), $rounds rounds"
# Every block written once first: the images are sparse files (a first write costs the host an
# allocation).
for d in $drives; do
	dd if=/dev/zero of=$d bs=1M oflag=direct 2>/dev/null
done
echo 10000000 >/proc/sys/dev/raid/speed_limit_min
echo 10000000 >/proc/sys/dev/raid/speed_limit_max

now_ms() { awk '{ printf "%d\n", $1 * 1000 }' /proc/uptime; }

# up TOOL CASE: the array before its reshape; its device in $dev, the extra drive in $extra.
up() {
	set -- "$1" "$2" $drives
	case $2 in
	grow) level=5 m="$3 $4 $5 $6" extra=$7 ;;
	chunk) level=6 m="$3 $4 $5 $6 $7" extra= ;;
	esac
	wipe_superblocks $drives
	if [ "$1" = graid ]; then
		graidctl create rs --level $level --chunk 64K --bitmap none --consistency-policy resync \
			--assume-clean $m >/tmp/create.out 2>&1 || { cat /tmp/create.out; fail "graidctl create failed"; }
		dev=$(array_dev "$(cat /tmp/create.out)")
		[ -z "$extra" ] || graidctl add rs $extra >/dev/null || fail "graidctl add failed"
		graidctl set-speed rs --min 10G --max 0 >/dev/null || fail "graidctl set-speed failed"
	else
		mdadm --create /dev/md0 --run --level=$level --chunk=64K --layout=left-symmetric \
			--bitmap=none --raid-devices=$(echo $m | wc -w) --metadata=1.2 --data-offset=8M \
			--assume-clean $m >/tmp/create.out 2>&1 || { cat /tmp/create.out; fail "mdadm --create failed"; }
		dev=/dev/md0
		[ -z "$extra" ] || mdadm /dev/md0 --add $extra >/dev/null 2>&1 || fail "mdadm --add failed"
	fi
	bytes=$(blockdev --getsize64 $dev)
}

# reshape TOOL CASE: starts it and waits for its end; the milliseconds in $took.
reshape() {
	start=$(now_ms)
	if [ "$1" = graid ]; then
		case $2 in
		grow) graidctl grow rs --raid-devices 5 >/tmp/grow.out 2>&1 ;;
		chunk) graidctl grow rs --chunk 512K >/tmp/grow.out 2>&1 ;;
		esac || { cat /tmp/grow.out; fail "graidctl grow failed"; }
		graidctl wait rs >/dev/null 2>&1 || fail "graidctl wait failed"
	else
		case $2 in
		grow) mdadm --grow /dev/md0 --raid-devices=5 >/tmp/grow.out 2>&1 ;;
		chunk) mdadm --grow /dev/md0 --chunk=512 >/tmp/grow.out 2>&1 ;;
		esac || { cat /tmp/grow.out; fail "mdadm --grow failed"; }
		# mdadm --wait returns before a reshape starts: until sync_action says idle.
		usleep 200000
		until [ "$(cat /sys/block/md0/md/sync_action)" = idle ]; do usleep 100000; done
	fi
	took=$(($(now_ms) - start))
}

down() {
	if [ "$1" = graid ]; then
		graidctl stop rs >/dev/null || fail "graidctl stop failed"
	else
		mdadm --stop /dev/md0 >/dev/null 2>&1 || fail "mdadm --stop failed"
		mdadm --zero-superblock $drives >/dev/null 2>&1
	fi
	wipe_superblocks $drives
}

# reads SECONDS: fio's arguments for 4 KiB random reads over the first 256 MiB of $dev for
# SECONDS (fio itself is run in the background, not a function: a signal must reach it).
reads() {
	echo --name=reads --filename=$dev --size=256M --rw=randread --bs=4k --direct=1 \
		--ioengine=libaio --iodepth=16 --time_based --runtime=$1 --norandommap \
		--randrepeat=0 --minimal
}
iops() { awk -F';' '$1 == 3 { print $8 }' /tmp/reads.out; }

# cell TOOL CASE LOAD: one reshape on a fresh array, idle or under reads.
cell() {
	up "$1" "$2"
	if [ "$3" = idle ]; then
		reshape "$1" "$2"
		before=0 during=0
	else
		fio $(reads 5) >/tmp/reads.out 2>&1 || fail "fio reads before the reshape"
		before=$(iops)
		fio $(reads 600) >/tmp/reads.out 2>&1 &
		fio=$!
		usleep 500000
		reshape "$1" "$2"
		kill -INT $fio 2>/dev/null
		wait $fio
		during=$(iops)
	fi
	rate=$(awk -v b=$bytes -v t=$took 'BEGIN { printf "%.1f", b / 1048576 / (t / 1000) }')
	echo "$2 $3 $1 $took $rate $before $during" >>$results
	printf '%-6s %-5s %-6s %8d ms %8s MiB/s  reads %6s IOPS before, %6s during\n' \
		"$2" "$3" "$1" "$took" "$rate" "$before" "$during"
	down "$1"
}

for r in $(seq 1 $rounds); do
	for case in grow chunk; do
		for load in idle reads; do
			if [ $((r % 2)) = 1 ]; then cell graid $case $load; cell md $case $load; else
				cell md $case $load; cell graid $case $load; fi
		done
	done
done

echo
echo "=== means: reshape MiB/s, graid over md; reads during over before"
printf '%-6s %-5s %10s %10s %8s %12s %12s\n' case load graid md ratio graid-reads md-reads
for case in grow chunk; do
	for load in idle reads; do
		mean() { awk -v c=$case -v l=$load -v t=$1 -v f=$2 \
			'$1 == c && $2 == l && $3 == t { s += $f; n++ } END { if (n) printf "%.1f", s / n; else print 0 }' $results; }
		g=$(mean graid 5) m=$(mean md 5)
		ratio=$(awk -v a=$g -v b=$m 'BEGIN { printf "%.2f", b ? a / b : 0 }')
		kept() { awk -v a="$(mean $1 7)" -v b="$(mean $1 6)" 'BEGIN { printf "%.2f", b ? a / b : 0 }'; }
		printf '%-6s %-5s %10s %10s %8s %12s %12s\n' $case $load $g $m $ratio $(kept graid) $(kept md)
	done
done

dmesg | grep -iE 'warn|error|bug' | head -n 20
echo "bench-reshape done"
