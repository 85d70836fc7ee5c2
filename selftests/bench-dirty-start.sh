# How long an array takes to start after a crash (a dirty stop: its log is read and replayed
# before the disk appears), RAID 5 on members seen as 64 GiB (`make bench-dirty-start`; not a
# test):
#
#   selftests/vm.sh --disks 6 --disk-size 512 selftests/bench-dirty-start.sh [ROUNDS]
#
# Six emulated NVMe drives of 512 MiB, each seen as a 64 GiB member (dm: the drive, then a
# zero target), so each gets graid's log for members of 64 GiB or more (64 MiB, in the drive's
# part). fio writes 4 KiB blocks at random while every member's table is switched to dm's
# error target at once: no superblock can say clean any more, as after a power cut. The array
# is stopped, the tables switched back, and `graidctl assemble` timed: the dirty start reads
# every member's whole ring (review 3's R3: in 256 KiB reads, before in one synchronous 4 KiB
# read per block) and replays what it finds. ROUNDS (default 3) times, printing each and the
# mean. Under QEMU TCG only a comparison in one VM run or on one kernel means anything.
. /graid/lib.sh
rounds=${1:-3}
export DM_DISABLE_UDEV=1
modprobe dm-mod || fail "cannot load dm"
load_module
set -- $(graid_nvme_disks)
[ $# -ge 6 ] || fail "needs 6 NVMe drives"
drives="$1 $2 $3 $4 $5 $6"
large_sectors=$((64 * 1024 * 2048))
bench_dm_members $large_sectors $drives
members=$bench_members

# error_members: every member fails every I/O from now on, all at once: each is suspended
# first (its I/O waits, it fails nothing), then all get the error target, so no member is failed
# while another still takes the superblocks that would say so.
error_members() {
	local i
	for i in 0 1 2 3 4 5; do dmsetup --noudevsync suspend v$i || fail "dmsetup suspend v$i"; done
	for i in 0 1 2 3 4 5; do
		echo "0 $large_sectors error" | dmsetup --noudevsync load v$i || fail "dmsetup load v$i"
	done
	for i in 0 1 2 3 4 5; do dmsetup --noudevsync resume v$i || fail "dmsetup resume v$i"; done
}

total=0
for r in $(seq 1 $rounds); do
	wipe_superblocks $members
	expect_rc 0 graidctl create bd --level 5 --chunk 64K --assume-clean $members
	dev=$(array_dev "$OUT")
	[ -b "$dev" ] || fail "no array device: $OUT"
	[ $r = 1 ] && graidctl examine /dev/mapper/v0 | grep -E 'Journal|Data Offset'
	fio --name=dirty --filename=$dev --rw=randwrite --bs=4k --direct=1 --ioengine=libaio \
		--iodepth=32 --size=1G --time_based --runtime=60 >/dev/null 2>&1 &
	writer=$!
	sleep 4
	error_members
	wait $writer
	graidctl stop bd >/dev/null 2>&1 || fail "graidctl stop after the members failed"
	bench_dm_members $large_sectors $drives
	state=$(graidctl examine /dev/mapper/v0 | grep -m 1 'State :')
	case "$state" in *dirty*) ;; *) fail "the crash left the superblocks saying: $state" ;; esac
	# busybox's date has no %N: /proc/uptime has hundredths.
	t0=$(cut -d' ' -f1 /proc/uptime)
	expect_rc 0 graidctl assemble $members
	t1=$(cut -d' ' -f1 /proc/uptime)
	ms=$(awk -v a=$t0 -v b=$t1 'BEGIN { printf "%d", (b - a) * 1000 }')
	echo "round $r: assemble after the crash took $ms ms"
	dmesg | grep -E 'graid: bd' | tail -n 2
	total=$((total + ms))
	graidctl stop bd >/dev/null || fail "graidctl stop failed"
done
echo "mean: $((total / rounds)) ms over $rounds rounds"
dmesg | grep -iE 'warn|bug' | head -n 20
echo "bench-dirty-start done"
