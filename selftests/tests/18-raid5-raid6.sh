# RAID 5 (3, 4, 8 members) and RAID 6 (4, 6, 8 members) on NVMe members, chunks 4K, 64K and
# 512K, md's default layout and the three others: created with graidctl, fio crc32c-verified
# writes with mixed block sizes and offsets from parallel jobs on different ranges, then read
# back by md itself: the same members assembled as an md array with the same geometry and data
# offset read the same data, and md's own "check" finds every stripe's parity consistent (0
# mismatches), so placement and math are md's. md uses the first 32 MiB of each member
# (--size), which holds everything graid wrote, so its check reads that much and not whole
# drives. The arrays are created with --write-zeroes: the drives hold earlier tests' data, and
# --assume-clean would take their garbage as parity. Most slices' stripe buffers come back from
# the array's cache (holding an earlier slice's data, which no step may use: md's check proves
# it), and the count says so.
. /graid/lib.sh
need_members 8
modprobe raid456 || fail "cannot load md raid456"

# raid_case LEVEL CHUNK LAYOUT MEMBER...: one array through graid, then through md.
raid_case() {
	local level=$1 chunk=$2 layout=$3
	shift 3
	local n=$#
	echo "--- RAID $level, $n members, chunk $chunk, $layout"
	expect_rc 0 graidctl create "p$level" --level $level --chunk $chunk --layout $layout \
		--write-zeroes "$@"
	echo "$OUT"
	dev=$(echo "$OUT" | grep -o '/dev/graid[0-9]*' | head -n 1)
	[ -b "$dev" ] || fail "no block device in: $OUT"
	# Two writers on different ranges at once, mixed sizes, unaligned to chunks by design.
	fio_verify "$dev" 0 8M randwrite 4k-256k &
	w1=$!
	fio_verify "$dev" 8M 8M write 8k-1m &
	w2=$!
	wait $w1 || fail "random writer failed"
	wait $w2 || fail "sequential writer failed"
	echo 3 >/proc/sys/vm/drop_caches
	fio_readback "$dev" 0 8M randwrite 4k-256k "graid read-back failed"
	expect_rc 0 graidctl stop "p$level"

	# md over the same members: superblock 1.2, same chunk, layout and data offset.
	mdadm --create /dev/md0 --run --level=$level --chunk=$chunk --layout=$layout \
		--raid-devices=$n --metadata=1.2 --data-offset=2M --size=32M --assume-clean --bitmap=none "$@" \
		>/tmp/create.out 2>&1 || { cat /tmp/create.out; fail "mdadm --create failed"; }
	fio_readback /dev/md0 0 8M randwrite 4k-256k "md reads other data than graid wrote (random)"
	fio_readback /dev/md0 8M 8M write 8k-1m "md reads other data than graid wrote (sequential)"
	md_check_and_stop "(written by graid)" "$@"
}

set -- $members
# Every layout, chunk size and width at least once; the two cases that add only a pairing in
# `make soak` (the host's geometry tests check every layout against md's formulas).
raid_case 5 64K left-symmetric $1 $2 $3
raid_case 5 4K right-symmetric $1 $2 $3 $4
raid_case 5 512K left-asymmetric $1 $2 $3 $4 $5 $6 $7 $8
if [ "${GRAID_SOAK:-0}" = 1 ]; then
	raid_case 6 512K left-symmetric $1 $2 $3 $4
	raid_case 6 4K left-symmetric $3 $4 $5 $6 $7 $8
fi
raid_case 6 64K right-asymmetric $8 $7 $6 $5 $4 $3 $2 $1
# The cache served most slices (counted since the module loaded).
graid_debug stripe_buffers
cached=$(graid_debug stripe_buffers cached)
fresh=$(graid_debug stripe_buffers fresh)
[ "${cached:-0}" -gt "${fresh:-0}" ] || fail "the stripe buffer cache served $cached slices, fresh allocations $fresh"
unload_module
