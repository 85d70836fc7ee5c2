# Writes racing the array's own passes over its data: the initial resync of a new array (every
# level), a repair, and a rebuild must hold writes out of the window they work on (md's
# raise_barrier/wait_barrier), or a pass that read a window before a write and writes it after
# puts stale data over the new. Eight writers of mixed sub-chunk sizes run while the pass runs at
# full speed; afterwards every block reads back right, a mirror's copies are identical byte for
# byte on the members, and a check finds no mismatch.
. /graid/lib.sh
need_members 4
set -- $members
export DM_DISABLE_UDEV=1
# 24 MiB slices: 22 MiB of data each, short passes.
small_slices "$@"
# `make test`: each level once, RAID 1 (where the race was seen) and RAID 5 with a repair too;
# `make soak`: every level and pass, four rounds.
if [ "${GRAID_SOAK:-0}" = 1 ]; then
	rounds=4 specs="1:0:repair 10:64K:repair 5:64K:repair 6:32K:repair"
else
	rounds=1 specs="1:0:repair 10:64K: 5:64K:repair 6:32K:"
fi

# writers DEV: eight jobs, each over its own 2 MiB, sizes from 512 B to 60 KiB, queue depth 8,
# verification headers in every block (checked by `readback`), never two writes of one block in
# flight (mirrors written so may differ in md too). In the background: $writers.
writers() {
	fio --name=race --filename="$1" --size=2M --offset_increment=2M --numjobs=8 --rw=randwrite \
		--bsrange=512-60k --direct=1 --ioengine=libaio --iodepth=8 --verify=crc32c \
		--do_verify=0 --randrepeat=1 --serialize_overlap=1 --group_reporting --minimal \
		>/tmp/race.out 2>&1 &
	writers=$!
}

# readback DEV WHAT: every block the writers wrote, read back and verified.
readback() {
	fio --name=race --filename="$1" --size=2M --offset_increment=2M --numjobs=8 --rw=randwrite \
		--bsrange=512-60k --direct=1 --ioengine=libaio --iodepth=8 --verify=crc32c \
		--verify_only --verify_fatal=1 --randrepeat=1 --group_reporting --minimal \
		>/tmp/readback.out 2>&1 || { cat /tmp/readback.out; fail "$2: blocks read back wrong"; }
}

# copies_identical WHAT: the four slices' data areas (from 2 MiB) hold the same bytes (read
# past the page cache, which may hold what an earlier round read).
copies_identical() {
	echo 3 >/proc/sys/vm/drop_caches
	for s in /dev/mapper/s1 /dev/mapper/s2 /dev/mapper/s3; do
		if ! cmp -l /dev/mapper/s0 $s 2097152 2097152 >/tmp/cmp.out 2>&1; then
			first=$(head -n 1 /tmp/cmp.out | awk '{print $1}')
			sector=$(((first - 1) / 512))
			echo "$(wc -l </tmp/cmp.out) bytes differ, the first at byte $first (member sector $sector)"
			# What each copy holds there: fio's block header (offset, time, numberio).
			for c in $slices; do
				echo "$c:"
				dd if=$c bs=512 skip=$sector count=1 iflag=direct 2>/dev/null | hexdump -C | head -n 4
			done
			fail "$1: the copies on s0 and $s differ"
		fi
	done
}

# scrub_ends NAME: waits until NAME runs no check, repair or resync.
scrub_ends() {
	n=0
	while ! graidctl --json detail "$1" | grep -q '"scrub": null'; do
		n=$((n + 1))
		[ $n -le 3000 ] || fail "the scrub of $1 did not end in 300 s"
		usleep 100000
	done
}

# no_mismatch NAME WHAT: a check of NAME finds nothing.
no_mismatch() {
	expect_rc 0 graidctl check "$1" --wait
	echo "$OUT"
	expect_match 'check finished: 0 mismatched sectors' "$OUT" "$2: check"
}

for round in $(seq 1 $rounds); do
	for spec in $specs; do
		level=${spec%%:*} rest=${spec#*:}
		chunk=${rest%%:*} repair=${rest#*:}
		what="RAID $level round $round, initial resync"
		wipe_superblocks $slices
		if [ "$chunk" = 0 ]; then
			expect_rc 0 graidctl create race --level $level $slices
		else
			expect_rc 0 graidctl create race --level $level --chunk $chunk $slices
		fi
		dev=$(array_dev "$OUT")
		# At once: the resync starts with the array.
		writers $dev
		finishes $writers 300 "writers during the resync" || { cat /tmp/race.out; fail "$what: fio failed"; }
		scrub_ends race
		readback $dev "$what"
		[ "$level" = 1 ] && copies_identical "$what"
		no_mismatch race "$what"
		if [ -n "$repair" ]; then
			what="RAID $level round $round, repair"
			writers $dev
			expect_rc 0 graidctl repair race
			finishes $writers 300 "writers during the repair" || { cat /tmp/race.out; fail "$what: fio failed"; }
			scrub_ends race
			readback $dev "$what"
			[ "$level" = 1 ] && copies_identical "$what"
			no_mismatch race "$what"
		fi
		expect_rc 0 graidctl stop race
	done
done
unslice
