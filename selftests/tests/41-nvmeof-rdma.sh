# Arrays exported over NVMe/RDMA (issue 33): the same kernel target and host as 40-nvmeof, on
# soft-RoCE (rdma_rxe) over a veth pair, so the RDMA transport itself is what carries the I/O:
# - export --transport rdma needs the hosts named; a host NQN not allowed is refused;
# - on RAID 5 and RAID 6, fio's verified writes through the fabric go on while a member fails,
#   is removed, added back and rebuilt, and the parity helper is killed; every block verifies
#   through the fabric and on the array;
# - stop --force and export --restore bring the RDMA export back, where the data verifies.
# rxe computes every packet's checksum in emulated software (tens of MiB/s under TCG): the data
# here is MBs, and fio is rate-limited so that the member fails while it writes.
. /graid/lib.sh
need_members 4
set -- $members
d0=$1 d1=$2 d2=$3 d3=$4
host=nqn.2014-08.org.nvmexpress:uuid:11111111-2222-3333-4444-555555555555
stranger=nqn.2014-08.org.nvmexpress:uuid:99999999-8888-7777-6666-555555555555
rm -f /etc/graid/exports.conf

soft_roce
# connect NQN HOSTNQN: nvme connect over RDMA to 10.9.9.1:4420 as HOSTNQN.
connect() { nvmf_connect rdma 10.9.9.1 "$@"; }
# transports NQN: the transports of the host's controllers of subsystem NQN.
transports() {
	for c in /sys/class/nvme/nvme*; do
		[ "$(cat $c/subsysnqn 2>/dev/null)" = "$1" ] && cat $c/transport
	done
}

for level in 5 6; do
	echo "--- RAID $level exported over RDMA"
	wipe_superblocks $d0 $d1 $d2 $d3
	expect_rc 0 graidctl create rfab --level $level --chunk 64K --write-zeroes $d0 $d1 $d2 $d3
	dev=$(array_dev "$OUT")
	uuid=$(json_field uuid "$(graidctl --json detail rfab)")
	nqn=nqn.2014-08.org.nvmexpress:uuid:$uuid
	expect_rc 2 graidctl export rfab --transport rdma --addr 10.9.9.1
	expect_match "name the hosts that may connect" "$OUT" "export without hosts"
	expect_rc 0 graidctl export rfab --transport rdma --addr 10.9.9.1 --allow-host $host
	expect_match "exported $dev \(rfab\) as $nqn over rdma 10.9.9.1:4420 to $host" "$OUT" "export's report"
	[ "$(cat /sys/kernel/config/nvmet/ports/*/addr_trtype)" = rdma ] ||
		fail "nvmet's port is not rdma: $(cat /sys/kernel/config/nvmet/ports/*/addr_trtype)"
	expect_rc 0 graidctl detail rfab
	expect_match "Exported : $nqn over rdma 10.9.9.1:4420 to $host" "$OUT" "detail's export line"

	connect $nqn $stranger && fail "a host not allowed connected over RDMA"
	connect $nqn $host || { cat /tmp/nvme.out; dmesg | tail -20; fail "the allowed host could not connect"; }
	fab=$(fabric_dev $uuid)
	[ "$(transports $nqn)" = rdma ] || fail "$fab is reached over $(transports $nqn), not rdma alone"
	echo "the array is $fab on the host, over rdma"

	echo "--- RAID $level over RDMA: verified writes while a member fails and is rebuilt"
	start_helper
	expect_rc 0 graidctl set-speed rfab --min 4M --max 4M
	fio --name=write $(fio_args $fab 0 12M randwrite 4k-64k) --rate=2m --do_verify=0 \
		>/tmp/fio.out 2>&1 &
	fio=$!
	sleep 1
	expect_rc 0 graidctl fail rfab $d2
	expect_rc 0 graidctl remove rfab $d2
	wipe_superblocks $d2
	expect_rc 0 graidctl add rfab $d2
	expect_match "rebuilding" "$OUT" "add's report"
	kill $helper
	wait $helper 2>/dev/null
	kill -0 $fio 2>/dev/null || fail "fio ended before the member was back: the case tests nothing"
	finishes $fio 300 "fio over RDMA" || { cat /tmp/fio.out; fail "fio's writes over RDMA failed"; }
	fio_readback $fab 0 12M randwrite 4k-64k "RDMA read back other data (rebuilding)"
	expect_rc 0 graidctl set-speed rfab --max 0
	wait_rebuilt rfab 300
	echo 3 >/proc/sys/vm/drop_caches
	fio_readback $fab 0 12M randwrite 4k-64k "RDMA read back other data (rebuilt)"
	fio_readback $dev 0 12M randwrite 4k-64k "the array read back other data"

	echo "--- RAID $level over RDMA: stop --force, assemble, export --restore"
	nvme disconnect -n $nqn >/dev/null || fail "nvme disconnect"
	expect_rc 0 graidctl stop --force rfab
	grep -q "^EXPORT $uuid name=rfab nqn=$nqn transport=rdma addr=10.9.9.1 port=4420 " \
		/etc/graid/exports.conf || fail "exports.conf: $(cat /etc/graid/exports.conf)"
	expect_rc 0 graidctl assemble rfab $d0 $d1 $d2 $d3
	expect_rc 0 graidctl export --restore
	expect_match "exported $dev \\(rfab\\) as $nqn\$" "$OUT" "--restore's report"
	expect_rc 0 graidctl detail rfab
	expect_match "Exported : $nqn over rdma 10.9.9.1:4420 to $host" "$OUT" "the restored export"
	connect $nqn $host || { cat /tmp/nvme.out; fail "no connection to the restored RDMA export"; }
	fab=$(fabric_dev $uuid)
	fio_readback $fab 0 12M randwrite 4k-64k "the restored RDMA export read back other data"
	nvme disconnect -n $nqn >/dev/null || fail "nvme disconnect"
	expect_rc 0 graidctl unexport rfab
	no_nvmet "unexport"
	expect_rc 0 graidctl stop rfab
done

/usr/bin/rdma link delete rxe0 || fail "rdma link delete rxe0"
/usr/bin/ip link delete veth0 || fail "ip link delete veth0"
wipe_superblocks $d0 $d1 $d2 $d3
kmemleak_check
