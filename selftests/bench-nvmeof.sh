# An array read and written through NVMe/TCP and NVMe/RDMA against the same array locally, in
# one VM run (`make bench-nvmeof`; not a test):
#
#   selftests/vm.sh --disks 6 --disk-size 512 selftests/bench-nvmeof.sh [RUNTIME_S [ROUNDS]]
#
# A RAID 5 (64 KiB chunks) of four drives, exported with graidctl export over TCP on 127.0.0.1
# or over RDMA on soft-RoCE (rdma_rxe on a veth pair, 10.9.9.1), and connected with the
# kernel's nvme-tcp or nvme-rdma. fio (libaio, O_DIRECT) runs 1M sequential writes and reads at
# iodepth 8 and 4k random reads at iodepth 32, for RUNTIME_S seconds (default 8) after a 1 s
# ramp, on the local /dev/graidN and on the host's namespace over each transport, the order
# reversed every round, ROUNDS times (default 2). Prints every run, then the means and each
# transport's ratio to the local device. Under QEMU TCG the loopback's TCP stack and rxe's
# packet checksums run emulated too: only the same-run ratio means anything, and it bounds
# what the fabric costs from above.
. /graid/lib.sh
runtime=${1:-8}
rounds=${2:-2}
ramp=1
results=/tmp/bench-nvmeof.results
: >$results
host=nqn.2014-08.org.nvmexpress:uuid:11111111-2222-3333-4444-555555555555

load_module
set -- $(graid_nvme_disks)
[ $# -ge 4 ] || fail "needs 4 NVMe drives"
m="$1 $2 $3 $4"
echo "members: $m (${GRAID_DISK_SIZE_MB} MiB each), ${runtime} s + ${ramp} s ramp per run, $rounds rounds"
ip link set lo up || fail "no loopback device"
modprobe nvme-tcp || fail "modprobe nvme-tcp"
rm -f /etc/graid/exports.conf
wipe_superblocks $m
graidctl create nb --level 5 --chunk 64K --assume-clean $m >/tmp/create.out 2>&1 ||
	{ cat /tmp/create.out; fail "graidctl create failed"; }
local_dev=$(array_dev "$(cat /tmp/create.out)")
# Written whole once: the sparse images' first writes would count against whoever goes first.
dd if=/dev/zero of=$local_dev bs=1M oflag=direct 2>/dev/null
uuid=$(json_field uuid "$(graidctl --json detail nb)")
nqn=nqn.2014-08.org.nvmexpress:uuid:$uuid
soft_roce

# attach TRANSPORT: exports the array over TRANSPORT (tcp or rdma), connects the host to it,
# and sets fab_dev to the host's namespace; detach undoes it.
attach() {
	addr=127.0.0.1
	[ "$1" = rdma ] && addr=10.9.9.1
	graidctl export nb --transport $1 --addr $addr --allow-host $host >/dev/null ||
		fail "graidctl export over $1 failed"
	nvmf_connect $1 $addr $nqn $host || { cat /tmp/nvme.out; fail "nvme connect over $1 failed"; }
	fab_dev=$(fabric_dev $uuid)
}
detach() {
	nvme disconnect -n $nqn >/dev/null || fail "nvme disconnect"
	graidctl unexport nb >/dev/null || fail "graidctl unexport"
}

# fio_rate DEV NAME RW BS DEPTH: MiB/s (1M) or IOPS (4k) of one run on DEV.
fio_rate() {
	fio --name="$2" --filename="$1" --rw="$3" --bs="$4" --direct=1 --ioengine=libaio \
		--iodepth="$5" --time_based --runtime="$runtime" --ramp_time=$ramp --norandommap \
		--randrepeat=0 --size=256M --minimal >/tmp/fio.out 2>&1 || { cat /tmp/fio.out; fail "fio $2 failed"; }
	# Terse v3: read KiB/s and IOPS are fields 7 and 8, write's 48 and 49.
	awk -F';' -v bs="$4" -v rw="$3" '$1 == 3 {
		kib = (rw ~ /write/) ? $48 : $7; iops = (rw ~ /write/) ? $49 : $8
		if (bs == "1M") printf "%.1f\n", kib / 1024; else printf "%d\n", iops }' /tmp/fio.out
}

# cell WHERE: the three loads on the local device (local) or through the fabric (tcp, rdma).
cell() {
	dev=$local_dev
	[ "$1" = local ] || { attach $1; dev=$fab_dev; }
	for w in "seq1m-write write 1M 8" "seq1m-read read 1M 8" "rand4k-read randread 4k 32"; do
		set -- "$1" $w
		v=$(fio_rate $dev $2 $3 $4 $5)
		echo "$1 $2 $v" >>$results
		printf '%-7s %-12s %10s\n' "$1" "$2" "$v"
		set -- "$1"
	done
	[ "$1" = local ] || detach
}

echo
echo "=== runs (1M: MiB/s; 4k: IOPS)"
for r in $(seq 1 $rounds); do
	if [ $((r % 2)) = 1 ]; then cell local; cell tcp; cell rdma; else cell rdma; cell tcp; cell local; fi
done

echo
echo "=== means and each transport's ratio to the local device"
printf '%-12s %10s %10s %8s %10s %8s\n' load local tcp ratio rdma ratio
for load in seq1m-write seq1m-read rand4k-read; do
	mean() { awk -v t=$1 -v w=$load '$1 == t && $2 == w { s += $3; n++ } END { if (n) printf "%.1f", s / n; else print 0 }' $results; }
	ratio() { awk -v a=$1 -v b=$2 'BEGIN { printf "%.2f", b ? a / b : 0 }'; }
	l=$(mean local) t=$(mean tcp) d=$(mean rdma)
	printf '%-12s %10s %10s %8s %10s %8s\n' $load $l $t $(ratio $t $l) $d $(ratio $d $l)
done
graidctl stop nb >/dev/null
dmesg | grep -iE 'warn|error|bug' | head -n 20
echo "bench-nvmeof done"
