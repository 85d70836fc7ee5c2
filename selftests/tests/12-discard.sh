# Discard passes through: each array advertises it (its members do), a discard reaches every copy
# of the range exactly (the members' discard counters), the range then reads back as zeros (QEMU
# NVMe deallocates into a punched hole), the data around it still verifies, and fio's trimwrite
# workload (each block discarded, then written and verified) passes.
. /graid/lib.sh
need_members 4
set -- $members
[ "$(cat /sys/block/${1#/dev/}/queue/discard_max_bytes)" -gt 0 ] || skip "the NVMe drives do not discard"

# Sum of the members' discarded sectors (field 14 of the block stat file).
member_discards() {
	total=0
	for m in $members; do
		total=$((total + $(awk '{ print $14 }' /sys/block/${m#/dev/}/stat)))
	done
	echo $total
}

md5_of() { md5sum | cut -d' ' -f1; }
zeros_md5=$(dd if=/dev/zero bs=1M count=4 2>/dev/null | md5_of)

for level in 0 1 10; do
	echo "--- RAID $level"
	chunk="--chunk 64K"
	[ $level = 1 ] && chunk=
	expect_rc 0 graidctl create "trim$level" --level $level $chunk $members
	dev=$(echo "$OUT" | grep -o '/dev/graid[0-9]*' | head -n 1)
	[ -b "$dev" ] || fail "no block device in: $OUT"
	q=/sys/block/${dev#/dev/}/queue
	max=$(cat $q/discard_max_bytes)
	echo "discard_max_bytes=$max discard_granularity=$(cat $q/discard_granularity)"
	[ "$max" -gt 0 ] || fail "$dev does not advertise discard although its members do"

	fio_verify "$dev" 0 4M write 64k-64k
	fio_verify "$dev" 4M 4M write 64k-64k
	fio_verify "$dev" 8M 8M write 64k-64k
	case $level in 0) copies=1 ;; 1) copies=4 ;; 10) copies=2 ;; esac
	before=$(member_discards)
	blkdiscard -o $((4 << 20)) -l $((4 << 20)) "$dev" || fail "blkdiscard on $dev failed"
	after=$(member_discards)
	want=$((4 * 2048 * copies))
	[ $((after - before)) = $want ] ||
		fail "members discarded $((after - before)) sectors, expected $want ($copies copies of 4 MiB)"
	got=$(dd if="$dev" bs=1M skip=4 count=4 iflag=direct 2>/dev/null | md5_of)
	[ "$got" = "$zeros_md5" ] || fail "the discarded range of $dev does not read back as zeros"
	fio_readback "$dev" 0 4M write 64k-64k "data before the discarded range changed"
	fio_readback "$dev" 8M 8M write 64k-64k "data after the discarded range changed"

	# Each block trimmed, then written and verified: a write must never lose to the discard
	# before it. (fio 3.33's trim_percentage verify mode crashes on its own.)
	fio --name=trimwrite --filename="$dev" --offset=16M --size=16M --rw=trimwrite --bs=64k \
		--direct=1 --ioengine=libaio --iodepth=1 --verify=crc32c --verify_fatal=1 --minimal \
		>/tmp/fio.out 2>&1 || { cat /tmp/fio.out; fail "fio trimwrite verify on $dev failed"; }
	fio_readback "$dev" 16M 16M trimwrite 64k-64k "data written after discards changed"

	expect_rc 0 graidctl --json detail "trim$level"
	[ "$(json_field state "$OUT")" = optimal ] || fail "array not optimal after discards: $OUT"
	expect_rc 0 graidctl stop "trim$level"
	for m in $members; do expect_rc 0 graidctl zero-superblock "$m"; done
done
