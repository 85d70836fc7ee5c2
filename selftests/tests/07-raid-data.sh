# RAID 0, 1 and 10 on NVMe members: created with graidctl, sized as the geometry says, fio
# crc32c-verified random and sequential writes with 4k-1m blocks read back by a second job,
# every member used, data where the layout puts it (RAID 0/10), stop and zero-superblock.
. /graid/lib.sh
need_members 4
set -- $members
member_data_mib=$((GRAID_DISK_SIZE_MB - 2))   # 2 MiB data offset

for level in 0 1 10; do
	echo "--- RAID $level"
	chunk="--chunk 64K"
	[ $level = 1 ] && chunk=
	# In sync from the start: reads are balanced over the copies (15-sync-state checks the
	# other case).
	expect_rc 0 graidctl create "data$level" --level $level $chunk --assume-clean $members
	echo "$OUT"
	dev=$(echo "$OUT" | grep -o '/dev/graid[0-9]*' | head -n 1)
	[ -b "$dev" ] || fail "no block device in: $OUT"
	sectors=$(cat /sys/class/block/${dev#/dev/}/size)
	case $level in
	0) want=$((member_data_mib * 4 * 2048)) ;;
	1) want=$((member_data_mib * 2048)) ;;
	10) want=$((member_data_mib * 2 * 2048)) ;;
	esac
	[ "$sectors" = "$want" ] || fail "$dev has $sectors sectors, expected $want"
	[ "$(cat /sys/block/${dev#/dev/}/queue/write_cache)" = "write back" ] ||
		fail "$dev does not advertise a write-back cache (flushes would not reach us)"

	fio_verify "$dev" 0 32M randwrite 4k-1m
	fio_verify "$dev" 32M 16M write 64k-1m
	fio --name=flush --filename="$dev" --rw=write --bs=4k --size=1M --fsync=1 --direct=1 \
		--minimal >/dev/null 2>&1 || fail "fio with fsync failed"

	expect_rc 0 graidctl --json detail "data$level"
	detail=$OUT
	expect_rc 0 graidctl detail "data$level"
	echo "$OUT"
	# Every member received writes, and reads were spread over all of them (mirrors balance).
	n=$(echo "$detail" | grep -c '"writes": [1-9]')
	[ "$n" = 4 ] || fail "only $n of 4 members received writes"
	n=$(echo "$detail" | grep -c '"reads": [1-9]')
	[ "$n" = 4 ] || fail "only $n of 4 members served reads"

	if [ $level != 1 ]; then
		# Chunk k of the array (64 KiB) holds byte value k+1; find it where the layout says.
		k=0
		while [ $k -lt 8 ]; do
			v=$(printf '%03o' $((k + 1)))
			dd if=/dev/zero bs=64k count=1 2>/dev/null | tr '\000' "\\$v" |
				dd of="$dev" bs=64k seek=$k conv=fsync 2>/dev/null || fail "pattern write failed"
			k=$((k + 1))
		done
		echo 3 >/proc/sys/vm/drop_caches
		k=0
		while [ $k -lt 8 ]; do
			if [ $level = 0 ]; then
				m=$((k % 4)) row=$((k / 4))
			else
				# near-2 on 4 members: chunk k on members 2(k%2) and 2(k%2)+1, row k/2.
				m=$(((k % 2) * 2)) row=$((k / 2))
			fi
			member=$(echo $members | cut -d' ' -f$((m + 1)))
			got=$(dd if="$member" bs=64k skip=$((32 + row)) count=1 2>/dev/null | od -An -v -tu1 | tr -s ' \n' '\n\n' | sort -u | grep -v '^$')
			[ "$got" = "$((k + 1))" ] || fail "chunk $k: member $member row $row holds '$got', expected $((k + 1))"
			k=$((k + 1))
		done
		echo "layout checked: 8 chunks on the members the geometry names"
	fi

	expect_rc 0 graidctl stop "data$level"
	[ ! -e "$dev" ] || fail "$dev still exists after stop"
	expect_rc 0 graidctl examine "$1"
	echo "$OUT" | head -n 12
	for m in $members; do
		expect_rc 0 graidctl zero-superblock "$m"
	done
done
unload_module
