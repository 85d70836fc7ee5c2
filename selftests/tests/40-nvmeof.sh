# Arrays exported over NVMe/TCP with the kernel's own target (issue 33), reached through the
# kernel's own host (nvme-tcp) on 127.0.0.1:
# - export needs the hosts named (or --allow-any-host); the subsystem takes the array's UUID
#   as its namespace's, which the host's block device shows; a host NQN not allowed is refused;
# - the namespace keeps the array's limits: block sizes, discard, the volatile write cache;
#   a Write Zeroes through the fabric zeroes the array;
# - on RAID 5 and RAID 6, fio's verified writes through the fabric go on while a member fails,
#   is removed, added back and rebuilt, and the parity helper is killed; every block verifies
#   through the fabric and on the array itself;
# - exported on two addresses, the host sees one namespace over two paths (native multipath),
#   and writes through it go on and verify when the first path's controller goes away;
# - DH-HMAC-CHAP: a host without the secret, or with another, is refused; with it (and the
#   target's own, bidirectional) it connects and its verified writes read back;
# - stop refuses an exported array; stop --force takes the export down first, exports.conf
#   keeps it, and export --restore brings it back once the array is assembled again, where the
#   data verifies through the fabric; unexport takes it down and forgets it.
. /graid/lib.sh
need_members 4
set -- $members
d0=$1 d1=$2 d2=$3 d3=$4
ip link set lo up || fail "no loopback device"
modprobe nvme-tcp || fail "modprobe nvme-tcp"
host=nqn.2014-08.org.nvmexpress:uuid:11111111-2222-3333-4444-555555555555
stranger=nqn.2014-08.org.nvmexpress:uuid:99999999-8888-7777-6666-555555555555
rm -f /etc/graid/exports.conf

# connect NQN HOSTNQN [OPTION...]: nvme connect over TCP to 127.0.0.1:4420 as HOSTNQN.
connect() { nvmf_connect tcp 127.0.0.1 "$@"; }

for level in 5 6; do
	echo "--- RAID $level exported"
	wipe_superblocks $d0 $d1 $d2 $d3
	expect_rc 0 graidctl create fab --level $level --chunk 64K --write-zeroes $d0 $d1 $d2 $d3
	dev=$(array_dev "$OUT")
	uuid=$(json_field uuid "$(graidctl --json detail fab)")
	nqn=nqn.2014-08.org.nvmexpress:uuid:$uuid
	expect_rc 2 graidctl export fab --addr 127.0.0.1
	expect_match "name the hosts that may connect" "$OUT" "export without hosts"
	expect_rc 0 graidctl export fab --addr 127.0.0.1 --allow-host $host
	expect_match "exported $dev \(fab\) as $nqn over tcp 127.0.0.1:4420 to $host" "$OUT" "export's report"
	expect_rc 1 graidctl export fab --addr 127.0.0.1 --allow-host $host
	expect_match "exported already, as $nqn" "$OUT" "a second export"
	expect_rc 0 graidctl detail fab
	expect_match "Exported : $nqn over tcp 127.0.0.1:4420 to $host" "$OUT" "detail's export line"
	grep -q "^EXPORT $uuid name=fab nqn=$nqn transport=tcp addr=127.0.0.1 port=4420 hosts=$host\$" \
		/etc/graid/exports.conf || fail "exports.conf: $(cat /etc/graid/exports.conf)"

	connect $nqn $stranger && fail "a host not allowed connected"
	connect $nqn $host || { cat /tmp/nvme.out; fail "the allowed host could not connect"; }
	fab=$(fabric_dev $uuid)
	echo "the array is $fab on the host"
	q() { cat /sys/block/${1#/dev/}/queue/$2; }
	for limit in logical_block_size physical_block_size write_cache; do
		[ "$(q $fab $limit)" = "$(q $dev $limit)" ] ||
			fail "$limit: $(q $fab $limit) through the fabric, $(q $dev $limit) on the array"
	done
	[ "$(q $dev discard_max_bytes)" -gt 0 ] && [ "$(q $fab discard_max_bytes)" -eq 0 ] &&
		fail "the array discards, its namespace does not"
	echo "limits: $(q $fab logical_block_size)/$(q $fab physical_block_size) bytes," \
		"$(q $fab write_cache), discard up to $(q $fab discard_max_bytes) bytes"
	# Write Zeroes through the fabric (1 MiB at 100 MiB, past fio's range): nvmet writes the
	# zeroes graid's queue does not take.
	dd if=/dev/urandom of=$fab bs=1M count=1 seek=100 oflag=direct 2>/dev/null || fail "dd to $fab"
	# (util-linux's blkdiscard: busybox's, which the shell prefers, has no -z.)
	/usr/bin/blkdiscard -z -o $((100 << 20)) -l $((1 << 20)) $fab || fail "Write Zeroes through the fabric"
	left=$(dd if=$dev bs=1M skip=100 count=1 iflag=direct 2>/dev/null | tr -d '\000' | wc -c)
	[ "$left" = 0 ] || fail "$left bytes not zeroed on the array after a Write Zeroes"

	echo "--- RAID $level: verified writes through the fabric while a member fails and is rebuilt"
	start_helper
	expect_rc 0 graidctl set-speed fab --min 4M --max 4M
	fio --name=write $(fio_args $fab 0 96M randwrite 4k-128k) --do_verify=0 >/tmp/fio.out 2>&1 &
	fio=$!
	sleep 1
	expect_rc 0 graidctl fail fab $d1
	expect_rc 0 graidctl remove fab $d1
	wipe_superblocks $d1
	expect_rc 0 graidctl add fab $d1
	expect_match "rebuilding" "$OUT" "add's report"
	kill $helper
	wait $helper 2>/dev/null
	finishes $fio 600 "fio through the fabric" || { cat /tmp/fio.out; fail "fio's writes through the fabric failed"; }
	fio_readback $fab 0 96M randwrite 4k-128k "the fabric read back other data (rebuilding)"
	expect_rc 0 graidctl set-speed fab --max 0
	wait_rebuilt fab 300
	echo 3 >/proc/sys/vm/drop_caches
	fio_readback $fab 0 96M randwrite 4k-128k "the fabric read back other data (rebuilt)"
	fio_readback $dev 0 96M randwrite 4k-128k "the array read back other data"

	echo "--- RAID $level: stop refuses while exported; --force unexports; --restore exports again"
	nvme disconnect -n $nqn >/dev/null || fail "nvme disconnect"
	expect_rc 1 graidctl stop fab
	expect_match "is exported over NVMe-oF as $nqn: graidctl unexport" "$OUT" "stop of an exported array"
	expect_rc 0 graidctl stop --force fab
	no_nvmet "stop --force"
	grep -q "^EXPORT $uuid " /etc/graid/exports.conf || fail "stop --force forgot the export"
	expect_rc 0 graidctl assemble fab $d0 $d1 $d2 $d3
	expect_rc 0 graidctl export --restore
	expect_match "exported $dev \(fab\) as $nqn" "$OUT" "--restore's report"
	expect_rc 0 graidctl export --restore
	[ -z "$OUT" ] || fail "a second --restore did something: $OUT"
	connect $nqn $host || { cat /tmp/nvme.out; fail "no connection to the restored export"; }
	fab=$(fabric_dev $uuid)
	fio_readback $fab 0 96M randwrite 4k-128k "the restored export read back other data"
	nvme disconnect -n $nqn >/dev/null || fail "nvme disconnect"
	expect_rc 0 graidctl unexport fab
	no_nvmet "unexport"
	grep -q "^EXPORT" /etc/graid/exports.conf && fail "unexport left $(cat /etc/graid/exports.conf)"
	expect_rc 1 graidctl unexport fab
	expect_match "is not exported" "$OUT" "a second unexport"
	expect_rc 0 graidctl stop fab
done

echo "--- two addresses: one namespace over two paths; writes go on when a path goes away"
wipe_superblocks $d0 $d1
expect_rc 0 graidctl create mp --level 1 --write-zeroes $d0 $d1
dev=$(array_dev "$OUT")
uuid=$(json_field uuid "$(graidctl --json detail mp)")
nqn=nqn.2014-08.org.nvmexpress:uuid:$uuid
expect_rc 2 graidctl export mp --addr 127.0.0.1 --addr 127.0.0.1 --allow-host $host
expect_rc 0 graidctl export mp --addr 127.0.0.1 --addr 127.0.0.2 --allow-host $host
expect_match "over tcp 127.0.0.1:4420, tcp 127.0.0.2:4420 to $host" "$OUT" "export on two addresses"
expect_rc 0 graidctl list
expect_match "tcp 127.0.0.1:4420, tcp 127.0.0.2:4420" "$OUT" "list's EXPORTED"
connect $nqn $host || { cat /tmp/nvme.out; fail "no connection on 127.0.0.1"; }
nvmf_connect tcp 127.0.0.2 $nqn $host ||
	{ cat /tmp/nvme.out; fail "no connection on 127.0.0.2"; }
fab=$(fabric_dev $uuid)
paths=$(for b in /sys/block/nvme*c*n*; do [ "$(cat $b/uuid 2>/dev/null)" = "$uuid" ] && echo $b; done | wc -l)
[ "$paths" = 2 ] || fail "the host sees $paths paths to $fab, not 2"
fio --name=write $(fio_args $fab 0 32M randwrite 4k-64k) --do_verify=0 >/tmp/fio.out 2>&1 &
fio=$!
sleep 1
# The controller of the first path goes away under the writes.
for c in /sys/class/nvme/nvme*; do
	[ "$(cat $c/subsysnqn 2>/dev/null)" = "$nqn" ] && grep -q 'traddr=127.0.0.1,' $c/address && first=${c##*/}
done
[ -n "$first" ] || fail "no controller on 127.0.0.1"
nvme disconnect -d $first >/dev/null || fail "nvme disconnect -d $first"
finishes $fio 300 "fio over two paths" || { cat /tmp/fio.out; fail "the writes failed when a path went away"; }
fio_readback $fab 0 32M randwrite 4k-64k "the remaining path read back other data"
fio_readback $dev 0 32M randwrite 4k-64k "the array read back other data"
nvme disconnect -n $nqn >/dev/null || fail "nvme disconnect"
expect_rc 0 graidctl unexport mp
no_nvmet "unexport of the two-address export"
expect_rc 0 graidctl stop mp

echo "--- DH-HMAC-CHAP: the host proves itself with the secret, the target with its own"
wipe_superblocks $d0 $d1
expect_rc 0 graidctl create auth --level 1 --write-zeroes $d0 $d1
uuid=$(json_field uuid "$(graidctl --json detail auth)")
nqn=nqn.2014-08.org.nvmexpress:uuid:$uuid
key=$(nvme gen-dhchap-key -m 0 -n $host) || fail "nvme gen-dhchap-key"
ctrl_key=$(nvme gen-dhchap-key -m 0 -n $nqn) || fail "nvme gen-dhchap-key"
expect_rc 0 graidctl export auth --addr 127.0.0.1 --allow-host $host --dhchap-secret "$key" \
	--dhchap-ctrl-secret "$ctrl_key"
grep -q "dhchap-secret=$key dhchap-ctrl-secret=$ctrl_key\$" /etc/graid/exports.conf ||
	fail "exports.conf lacks the secrets"
[ "$(stat -c %a /etc/graid/exports.conf)" = 600 ] || fail "exports.conf is $(stat -c %a /etc/graid/exports.conf)"
connect $nqn $host && fail "the host connected without the secret"
other=$(nvme gen-dhchap-key -m 0 -n $host)
connect $nqn $host --dhchap-secret "$other" && fail "the host connected with another secret"
connect $nqn $host --dhchap-secret "$key" --dhchap-ctrl-secret "$ctrl_key" ||
	{ cat /tmp/nvme.out; fail "the host with the secret could not connect"; }
fab=$(fabric_dev $uuid)
fio_verify $fab 0 16M randwrite 4k-64k
nvme disconnect -n $nqn >/dev/null || fail "nvme disconnect"
expect_rc 0 graidctl unexport auth
no_nvmet "unexport of the authenticated export"
expect_rc 0 graidctl stop auth
wipe_superblocks $d0 $d1 $d2 $d3
kmemleak_check
