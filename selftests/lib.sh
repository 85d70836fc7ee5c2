# Helpers for graid's in-guest selftests (busybox sh). Source it: . /graid/lib.sh
# A test exits 0 to pass, 4 to skip (kselftest's KSFT_SKIP), anything else to fail.

KSFT_SKIP=4

fail() {
	echo "FAIL: $*"
	exit 1
}

skip() {
	echo "SKIP: $*"
	exit $KSFT_SKIP
}

# expect_rc WANT CMD...: runs CMD, fails the test unless it exits with WANT. Output in $OUT.
expect_rc() {
	local want=$1 got
	shift
	OUT=$("$@" 2>&1)
	got=$?
	[ "$got" = "$want" ] || fail "'$*' exited $got, expected $want; output: $OUT"
}

# expect_match PATTERN TEXT WHAT: fails unless TEXT matches the extended regex PATTERN.
expect_match() {
	echo "$2" | grep -Eq -- "$1" || fail "$3: '$2' does not match /$1/"
}

module_loaded() {
	grep -q '^raid_gpu ' /proc/modules
}

load_module() {
	module_loaded || modprobe raid_gpu || fail "modprobe raid_gpu failed"
	[ -c /dev/graid-control ] || fail "/dev/graid-control did not appear"
}

# load_module_with PARAM=VALUE...: the module (re)loaded with these parameters (the test
# unloads it at its end, as every test does, so the next one gets the defaults).
load_module_with() {
	unload_module
	modprobe raid_gpu "$@" || fail "modprobe raid_gpu $* failed"
	[ -c /dev/graid-control ] || fail "/dev/graid-control did not appear"
}

unload_module() {
	module_loaded || return 0
	# udev's rules run graidctl for an array's events (holding the control device, so the
	# module) a moment after the array changed or went away: let them finish, then retry.
	udevadm settle 2>/dev/null
	n=0
	until rmmod raid_gpu 2>/dev/null; do
		n=$((n + 1))
		[ $n -lt 50 ] || { rmmod raid_gpu; fail "rmmod raid_gpu failed"; }
		usleep 100000
	done
}

# NVMe namespaces of the emulated drives (serial graid-nvme*), one block device path per line.
graid_nvme_disks() {
	for c in /sys/class/nvme/nvme*; do
		case $(cat "$c/serial" 2>/dev/null) in graid-nvme*) ;; *) continue ;; esac
		for ns in "$c"/nvme*n*; do
			[ -e "$ns/size" ] && echo "/dev/${ns##*/}"
		done
	done | sort
}

# kmemleak_check: fails the test if kmemleak reports an unreferenced object (the runner scans
# after every test too; this is for a check in the middle of one). Objects younger than ~5 s
# are not reported yet, hence the wait.
kmemleak_check() {
	k=/sys/kernel/debug/kmemleak
	[ -e $k ] || { echo "kmemleak not available, leak check skipped"; return 0; }
	sleep 6
	echo scan >$k
	echo scan >$k
	leaks=$(cat $k)
	if [ -n "$leaks" ]; then
		echo "$leaks" | head -n 60
		fail "kmemleak reports leaked objects"
	fi
}

# fio_args DEV OFFSET SIZE RW BS: the fio options of graid's verified I/O pattern; the same
# arguments always give the same blocks and contents (fixed random seed).
fio_args() {
	echo --filename="$1" --offset="$2" --size="$3" --rw="$4" --bsrange="$5" --direct=1 \
		--ioengine=libaio --iodepth=8 --verify=crc32c --verify_fatal=1 --randrepeat=1 \
		--group_reporting --minimal
}

# dm_slices DEV...: a 64 MiB dm-linear slice of each DEV, /dev/mapper/s0, s1, ... (short
# rebuilds). DM_DISABLE_UDEV=1 must be exported.
dm_slices() {
	i=0
	for d in "$@"; do
		dmsetup --noudevsync create s$i --table "0 131072 linear $d 0" || fail "dmsetup create failed"
		i=$((i + 1))
	done
}

# slice_error SLICE: switches slice SLICE (s0, s1, ...) to dm's error target: every I/O fails.
slice_error() {
	dmsetup --noudevsync suspend $1 && dmsetup --noudevsync load $1 --table "0 131072 error" &&
		dmsetup --noudevsync resume $1 || fail "cannot switch $1 to the error target"
}

# slice_linear SLICE DEV: switches slice SLICE back to DEV's first 64 MiB.
slice_linear() {
	dmsetup --noudevsync suspend $1 && dmsetup --noudevsync load $1 --table "0 131072 linear $2 0" &&
		dmsetup --noudevsync resume $1 || fail "cannot restore $1"
}

# uevents_start: records the block subsystem's kernel uevents from now on (udevadm monitor in
# the background, given half a second to listen). uevents_stop: ends the recording, half a
# second after the last event may have been sent, and prints what it saw on one line.
uevents_start() {
	udevadm monitor --kernel --property --subsystem-match=block >/tmp/uevents 2>&1 &
	uevent_monitor=$!
	usleep 500000
}
uevents_stop() {
	usleep 500000
	kill $uevent_monitor
	tr '\n' ' ' </tmp/uevents
}

# dm_node NAME: the /dev/dm-N that DETAIL names the dm device NAME by.
dm_node() {
	for b in /sys/block/dm-*; do
		[ "$(cat $b/dm/name)" = "$1" ] && echo /dev/${b##*/}
	done
}

# nullblk_devices COUNT SIZE_MB: COUNT memory-backed null_blk disks (configfs, blk-mq, a submit
# queue per CPU) of SIZE_MB each, for benches where the drivers' own CPU cost should show (no
# device emulated); their paths in $nullblk_devices.
nullblk_devices() {
	local count=$1 size_mb=$2 i d b n
	modprobe null_blk nr_devices=0 || fail "cannot load null_blk"
	mount -t configfs none /sys/kernel/config 2>/dev/null
	nullblk_devices=""
	for i in $(seq 0 $((count - 1))); do
		# configfs null_blk disks take their directory's name.
		d=/sys/kernel/config/nullb/nullb$i
		mkdir $d || fail "cannot make null_blk device $i"
		echo $size_mb >$d/size
		echo 1 >$d/memory_backed
		echo 2 >$d/queue_mode
		nproc >$d/submit_queues
		echo 1 >$d/power || fail "cannot power null_blk device $i"
		nullblk_devices="$nullblk_devices${nullblk_devices:+ }/dev/nullb$i"
	done
	udevadm settle 2>/dev/null
	for b in $nullblk_devices; do
		n=0
		while ! [ -b $b ] && [ $n -lt 50 ]; do usleep 100000; n=$((n + 1)); done
		[ -b $b ] || fail "no $b"
	done
}

# bench_dm_members SIZE DRIVE...: dm devices v0, v1, ... over the drives, so every shape a
# bench compares pays the same dm-linear hop; with SIZE (sectors) above a drive's own, a zero
# target after it up to SIZE (a large member whose data lies on the drive), with 0 the drive as
# it is. Created the first time, reloaded after; their paths in $bench_members.
bench_dm_members() {
	local size=$1 i=0 d s t
	shift
	bench_members=""
	for d in "$@"; do
		s=$(cat /sys/class/block/${d#/dev/}/size)
		t="0 $s linear $d 0"
		[ $size -gt $s ] && t="$t
$s $((size - s)) zero"
		if [ -b /dev/mapper/v$i ]; then
			echo "$t" | dmsetup --noudevsync load v$i && dmsetup --noudevsync resume v$i ||
				fail "dmsetup reload v$i"
		else
			echo "$t" | dmsetup --noudevsync create v$i || fail "dmsetup create v$i"
		fi
		bench_members="$bench_members${bench_members:+ }/dev/mapper/v$i"
		i=$((i + 1))
	done
	dmsetup mknodes
}

# md_bench_create LEVEL CHUNK MEMBER...: /dev/md0 as the benches compare graid with: md's
# defaults (metadata 1.2, left-symmetric, no bitmap, --assume-clean) and bench.sh's raid456
# tuning (a group thread per CPU, a 4096-entry stripe cache). MD_BENCH_BITMAP (default none)
# and MD_BENCH_POLICY (a --consistency-policy) change the first two.
md_bench_create() {
	local level=$1 chunk=$2
	shift 2
	mdadm --create /dev/md0 --run --level=$level --chunk=$chunk --layout=left-symmetric \
		--bitmap=${MD_BENCH_BITMAP:-none} ${MD_BENCH_POLICY:+--consistency-policy=$MD_BENCH_POLICY} \
		--raid-devices=$# --metadata=1.2 --assume-clean "$@" \
		>/tmp/create.out 2>&1 || { cat /tmp/create.out; fail "mdadm --create failed"; }
	echo $(nproc) >/sys/block/md0/md/group_thread_cnt || fail "group_thread_cnt"
	echo 4096 >/sys/block/md0/md/stripe_cache_size || fail "stripe_cache_size"
}

# md_bench_stop MEMBER...: stops /dev/md0 and clears md's superblock from its members.
md_bench_stop() {
	mdadm --stop /dev/md0 >/dev/null 2>&1 || fail "mdadm --stop failed"
	mdadm --zero-superblock "$@" >/dev/null 2>&1
}

# array_dev TEXT: the first /dev/graidN that TEXT (a graidctl report) names.
array_dev() { echo "$1" | grep -o '/dev/graid[0-9]*' | head -n 1; }

# fio_verify DEV OFFSET SIZE RW BS: writes with crc32c verification headers, then verifies
# every block from a second, read-only job (a new process, after the writer closed the device:
# what it reads came from the array, not from anything the writer kept). The writer does not
# verify as well: that read pass would check the same blocks again, at the same cost.
fio_verify() {
	fio --name=write $(fio_args "$@") --do_verify=0 >/tmp/fio.out 2>&1 ||
		{ cat /tmp/fio.out; fail "fio $4 $5 on $1 failed"; }
	fio_readback "$@" "fio read-back verify ($4 $5) on $1 failed"
}

# fio_readback DEV OFFSET SIZE RW BS WHY: re-reads what fio_verify wrote with the same arguments
# and checks every block; fails the test with WHY if any differs.
fio_readback() {
	fio --name=readback --verify_only $(fio_args "$1" "$2" "$3" "$4" "$5") >/tmp/fio.out 2>&1 ||
		{ cat /tmp/fio.out; fail "$6"; }
}

# graid_debug FILE [NAME]: the module's debugfs file /sys/kernel/debug/graid/FILE (debugfs
# mounted if it is not), or only the value of its line "NAME: value".
graid_debug() {
	[ -d /sys/kernel/debug/graid ] || mount -t debugfs none /sys/kernel/debug 2>/dev/null
	if [ $# -ge 2 ]; then
		sed -n "s/^$2: //p" /sys/kernel/debug/graid/$1
	else
		cat /sys/kernel/debug/graid/$1
	fi
}

# json_field NAME TEXT: the first value of "NAME": in JSON TEXT (numbers and strings).
json_field() {
	echo "$2" | sed -n "s/.*\"$1\": *\"\{0,1\}\([^\",}]*\).*/\1/p" | head -n 1
}

# array_state NAME: the array's state word (optimal, degraded, ...) from detail --json.
array_state() { graidctl --json detail "$1" | sed -n 's/.*"state": "\([a-z]*\)".*/\1/p' | head -n 1; }

# wait_reshaped ARRAY: waits for ARRAY's restripe (graidctl wait, which may also find it ended)
# and fails if detail --json, left in OUT, still shows one.
wait_reshaped() {
	expect_rc 0 graidctl wait $1
	expect_rc 0 graidctl --json detail $1
	case "$OUT" in *'"reshape"'*) fail "$1 still restriping after graidctl wait" ;; esac
}

# data_offset_kib DEV: the data offset member DEV's superblock gives (graidctl examine), KiB.
data_offset_kib() {
	expect_rc 0 graidctl examine $1
	echo $(($(echo "$OUT" | sed -n 's/.*Data Offset : \([0-9]*\) sectors.*/\1/p') / 2))
}

# need_members N: the usual prologue. Loads the module, sets $members to the first N NVMe drives
# (skips the test when there are fewer) and wipes their signatures and superblocks. Not in a subshell: skip
# must end the test.
need_members() {
	local want=$1
	load_module
	set -- $(graid_nvme_disks)
	[ $# -ge "$want" ] || skip "needs $want NVMe drives, found $#"
	members=$(echo "$@" | cut -d' ' -f1-"$want")
	# Signatures too (a test that failed may have left a filesystem): create refuses them.
	wipefs -a -q $members 2>/dev/null
	wipe_superblocks $members
}

# wipe_superblocks DEV...: zeroes the superblock block (4 KiB at byte 4096) of each device, so a
# test starts from blank members whatever the tests before it left.
wipe_superblocks() {
	for d in "$@"; do
		dd if=/dev/zero of="$d" bs=4096 seek=1 count=1 conv=fsync 2>/dev/null || fail "cannot wipe $d"
	done
}

# finishes PID SECONDS WHAT: waits for PID; if it still runs after SECONDS, dumps the blocked
# tasks' stacks and fails (a hang). Returns PID's exit status.
finishes() {
	n=0
	while kill -0 "$1" 2>/dev/null; do
		n=$((n + 1))
		if [ $n -gt $(($2 * 10)) ]; then
			echo w >/proc/sysrq-trigger
			dmesg | tail -n 80
			fail "$3 still running after $2 s: hung"
		fi
		usleep 100000
	done
	wait "$1"
}

# md_check_and_stop WHAT MEMBER...: runs md's own "check" on /dev/md0 (made over MEMBER... by the
# caller), fails the test with WHAT if md finds any stripe's parity wrong, then stops md and
# blanks the members.
md_check_and_stop() {
	local what=$1
	shift
	echo check >/sys/block/md0/md/sync_action
	sleep 1
	while [ "$(cat /sys/block/md0/md/sync_action)" != idle ]; do sleep 1; done
	mismatches=$(cat /sys/block/md0/md/mismatch_cnt)
	echo "md check: $mismatches mismatches"
	[ "$mismatches" = 0 ] || fail "md finds $mismatches sectors of wrong parity $what"
	mdadm --stop /dev/md0 >/dev/null 2>&1 || fail "mdadm --stop failed"
	mdadm --zero-superblock "$@" || fail "mdadm --zero-superblock failed"
	wipe_superblocks "$@"
}

# The parity helper (tests 26, 27). helper_field NAME: a number or string of `graidctl helper
# --json`; fallbacks REASON: its count of jobs computed in the kernel for REASON.
helper_field() { json_field "$1" "$(graidctl helper --json)"; }
fallbacks() { graidctl helper --json | sed -n "s/.*\"$1\": *\([0-9]*\).*/\1/p" | head -n 1; }

# start_helper: graid-helper in the background ($helper; engine $HELPER_ENGINE, default auto),
# attached within 20 s. Its output goes to a file: the runner's pipe must close when the test
# ends.
start_helper() {
	graid-helper run --engine "${HELPER_ENGINE:-auto}" --threads 2 --pool-mib 16 \
		>/dev/null 2>>/tmp/helper.log </dev/null &
	helper=$!
	wait_helper healthy 20 || { cat /tmp/helper.log; fail "the helper did not attach"; }
}

# wait_helper STATE SECONDS: until graidctl helper says STATE.
wait_helper() {
	n=0
	until [ "$(helper_field state)" = "$1" ]; do
		n=$((n + 1))
		[ $n -le $(($2 * 10)) ] || return 1
		usleep 100000
	done
}

# small_slices DEV...: a 24 MiB dm-linear slice of each DEV (s0, s1, ...; short rebuilds),
# blank, listed in $slices; unslice removes them. DM_DISABLE_UDEV=1 must be exported.
small_slices() {
	i=0
	slices=
	for d in "$@"; do
		dmsetup --noudevsync create s$i --table "0 49152 linear $d 0" || fail "dmsetup create failed"
		slices="$slices /dev/mapper/s$i"
		i=$((i + 1))
	done
	wipe_superblocks $slices
}
unslice() {
	for s in $slices; do dmsetup --noudevsync remove "${s#/dev/mapper/}"; done
}

# nvmf_connect TRANSPORT ADDR NQN HOSTNQN [OPTION...]: nvme connect to ADDR:4420 over
# TRANSPORT (tcp, rdma) as the host whose NQN is HOSTNQN, and whose host id is HOSTNQN's UUID
# (the kernel refuses one id under two NQNs); its output goes to /tmp/nvme.out.
nvmf_connect() {
	nvmf_args="-t $1 -a $2 -s 4420 -n $3 --hostnqn $4 --hostid ${4##*:}"
	shift 4
	nvme connect $nvmf_args "$@" >/tmp/nvme.out 2>&1
}

# no_nvmet WHEN: fails the test if anything is left in nvmet's configfs after WHEN.
no_nvmet() {
	for d in subsystems ports hosts; do
		left=$(ls /sys/kernel/config/nvmet/$d)
		[ -z "$left" ] || fail "$1: nvmet still holds $d/$left"
	done
}

# soft_roce: an RDMA device, rxe0 (soft-RoCE), on veth0 (10.9.9.1/24) of a veth pair whose
# other end is veth1 (10.9.9.2), active, with nvme-rdma loaded. iproute2's ip and rdma:
# busybox's ip, which the shell prefers, cannot make a veth.
soft_roce() {
	ip link set lo up || fail "no loopback device"
	/usr/bin/ip link add veth0 type veth peer name veth1 || fail "no veth pair"
	/usr/bin/ip addr add 10.9.9.1/24 dev veth0
	/usr/bin/ip addr add 10.9.9.2/24 dev veth1
	/usr/bin/ip link set veth0 up && /usr/bin/ip link set veth1 up || fail "veth pair not up"
	modprobe rdma_rxe || fail "modprobe rdma_rxe"
	/usr/bin/rdma link add rxe0 type rxe netdev veth0 || fail "rdma link add rxe0"
	# Active once the veth's carrier is up (waits 5 s).
	n=0
	until /usr/bin/rdma link show rxe0/1 | grep -q "state ACTIVE"; do
		n=$((n + 1)); [ $n -le 50 ] || fail "rxe0 not active: $(/usr/bin/rdma link show)"
		usleep 100000
	done
	modprobe nvme-rdma || fail "modprobe nvme-rdma"
}

# fabric_dev UUID: the NVMe-oF host's block device of the namespace whose UUID is UUID (waits
# 10 s).
fabric_dev() {
	n=0
	while :; do
		for b in /sys/block/nvme*; do
			# Not a multipath path (nvmeXcYnZ: hidden, no device node).
			case ${b##*/} in nvme*c*n*) continue ;; esac
			[ "$(cat $b/uuid 2>/dev/null)" = "$1" ] && { echo /dev/${b##*/}; return; }
		done
		n=$((n + 1)); [ $n -le 100 ] || fail "no namespace with UUID $1 on the host"
		usleep 100000
	done
}

# wait_rebuilt ARRAY SECONDS: until no member of ARRAY is rebuilding.
wait_rebuilt() {
	n=0
	while graidctl --json detail "$1" | grep -q '"state": *"rebuilding"'; do
		n=$((n + 1))
		[ $n -le $(($2 * 5)) ] || fail "the rebuild did not end in $2 s: $(graidctl detail "$1")"
		usleep 200000
	done
}

# fail_remove ARRAY SLICE: fails and removes slice SLICE (s0, ...) of ARRAY, and blanks it;
# add_back ARRAY SLICE: adds it again, and its rebuild starts.
fail_remove() {
	expect_rc 0 graidctl fail "$1" /dev/mapper/$2
	expect_rc 0 graidctl remove "$1" /dev/mapper/$2
	wipe_superblocks /dev/mapper/$2
}
add_back() {
	expect_rc 0 graidctl add "$1" /dev/mapper/$2
	expect_match "rebuilding" "$OUT" "add's report"
}

# md_agrees LEVEL SIZE READ WHAT MEMBER...: md assembled over MEMBER... as graid lays them out
# (64 KiB chunks, left-symmetric, data 2 MiB in, SIZE of each) reads back the first READ of
# fio's 1 MiB sequential writes, and its own check finds every stripe's parity right (the
# raw parity graid or its helper wrote); then md is stopped and the members blanked.
md_agrees() {
	local level=$1 size=$2 read=$3 what=$4
	shift 4
	mdadm --create /dev/md0 --run --level=$level --chunk=64K --layout=left-symmetric \
		--raid-devices=$# --metadata=1.2 --data-offset=2M --size=$size --assume-clean --bitmap=none "$@" \
		>/tmp/create.out 2>&1 || { cat /tmp/create.out; fail "mdadm --create failed"; }
	fio_readback /dev/md0 0 "$read" write 1m-1m "md reads other data than graid wrote $what"
	md_check_and_stop "$what" "$@"
}
