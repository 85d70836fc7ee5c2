# Crash rounds (selftests/crash.sh boots them): arrays written to when the machine is killed,
# assembled on the next boot, resynced, and every acknowledged write read back.
#
# One VM boot per round. Each boot verifies what the previous one left (crash/again.sh,
# crash/last.sh), then writes until a random moment and kills the machine with sysrq 'b' (an
# immediate reset, no sync, no unmount, the arrays running): crash/start.sh, crash/again.sh.
# The drives are raw images with the host's cache below them, so everything a member
# acknowledged survives, as after a power cut on drives without a volatile cache; what is lost is
# everything the kernel held, the arrays' own state and the writes in flight.
#
# A grow in the middle of the writes: grow_prepare. A restripe in the middle of them:
# restripe_prepare.
#
# Four arrays, written at once: c1 (RAID 1 of 3), c10 (RAID 10 of 4), c5 (RAID 5 of 3), c6
# (RAID 6 of 4); c1 and c5 keep a write-intent bitmap (1 MiB chunks), so their resync visits only
# the regions it marks, and c10 and c6 none (a whole resync); c5 and c6 keep a partial parity
# log (the default), so they start degraded after a crash. One mirror and one parity array run
# degraded in each round, c1 and c6 in even rounds, c10 and c5 in odd ones (one member failed
# before the writes; it is added back after the next boot's checks).
#
# Round 0 also sets up the targeted write-hole test (write_hole_prepare): a partial-stripe write
# on a degraded RAID 5 whose data write is held in flight (dm-delay) when the machine dies; the
# next boot checks that the stripe's other data survived. Each array's first $VERIFIED is written by one fio
# job with crc32c headers, whose progress is saved when the crash is triggered (fio's
# verify_state_save); the rest is written all the time by a second fio without checks, so the
# crash comes while writes are in flight (the array dirty) wherever it falls. fio's state, and
# what the round did, go to the last drive (the state drive) as a tar archive before the crash.
. /graid/lib.sh

ARRAYS="c1 c10 c5 c6 cr"
VERIFIED=12M
FILL=8M
STATE=/tmp/crash-state
TTY=/dev/ttyS1

# state_drive: the last emulated drive, by serial (device names change across boots).
state_drive() {
	for c in /sys/class/nvme/nvme*; do
		# NVMe serials are padded with spaces.
		[ "$(tr -d ' ' <"$c/serial" 2>/dev/null)" = "graid-nvme$((GRAID_DISKS - 1))" ] || continue
		for ns in "$c"/nvme*n*; do [ -e "$ns/size" ] && echo "/dev/${ns##*/}"; done
	done
}

# member_drives: the drives the arrays are made of (every emulated drive but the state drive).
member_drives() {
	s=$(state_drive)
	graid_nvme_disks | grep -vx "$s"
}

save_state() {
	s=$(state_drive)
	[ -b "$s" ] || return 1
	tar -C $STATE -cf - . | dd of="$s" bs=64k conv=fsync 2>/dev/null
}

load_state() {
	rm -rf $STATE
	mkdir -p $STATE
	dd if="$(state_drive)" bs=64k 2>/dev/null | tar -C $STATE -xf - 2>/dev/null ||
		fail "no state from the previous round on $(state_drive)"
}

# verified_jobs: one fio job per array, over its first $VERIFIED (the options every round's
# writer and reader share: same blocks, same contents).
verified_jobs() {
	for a in $ARRAYS; do
		dev=$(graidctl detail $a | grep -o '/dev/graid[0-9]*' | head -n 1)
		[ -b "$dev" ] || fail "no device for $a"
		echo --name=$a --filename=$dev --offset=0 --size=$VERIFIED --rw=randwrite \
			--bsrange=4k-64k --direct=1 --ioengine=libaio --iodepth=8 --verify=crc32c \
			--verify_fatal=1 --randrepeat=1
	done
}

# write_and_crash ROUND: the round's writes, then the crash at a random moment (0.5-4 s into
# them, or when the verified writes end, whichever is first).
write_and_crash() {
	round=$1
	rm -rf $STATE
	mkdir -p $STATE
	echo "$round" >$STATE/round
	# Degraded: one member of one mirror and one parity array fails before the writes (c1 and
	# c6 in even rounds, c10 and c5 in odd ones), so a single round has a degraded and an
	# optimal array of each kind.
	degraded="c1 c6"
	[ $((round % 2)) = 1 ] && degraded="c10 c5"
	for a in $degraded; do
		m=$(graidctl --json detail $a | tr -d '\n ' | sed 's/.*"members":\[{[^}]*"device":"\([^"]*\)".*/\1/')
		expect_rc 0 graidctl fail $a "$m"
		expect_rc 0 graidctl remove $a "$m"
		# Blank: added back as a new device after the crash.
		wipe_superblocks "$m"
		echo "$a" >>$STATE/degraded
	done
	if [ -n "${WRITE_HOLE:-}" ]; then
		write_hole_prepare $WRITE_HOLE
	fi
	grow_prepare $round
	restripe_prepare
	# The unchecked writer keeps every array busy in the $FILL after $VERIFIED; the rest of
	# each array is left alone, as a real working set leaves most of a disk (so a bitmap's
	# resync has clean regions to skip).
	fillers=
	for a in $ARRAYS; do
		dev=$(graidctl detail $a | grep -o '/dev/graid[0-9]*' | head -n 1)
		fillers="$fillers --name=fill-$a --filename=$dev --offset=$VERIFIED --size=$FILL --rw=randwrite --bsrange=4k-128k --direct=1 --ioengine=libaio --iodepth=4 --time_based --runtime=600 --norandommap"
	done
	fio $fillers >/dev/null 2>&1 &
	grow_during_writes &
	ms=$((500 + $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 3500))
	restripe_during_writes $ms &
	echo "round $round: the machine dies ${ms} ms into the writes"
	echo "$ms" >$STATE/crash-ms
	fio --aux-path=$STATE --do_verify=0 --trigger-timeout=${ms}ms \
		--trigger="sh /graid/crash/die.sh" $(verified_jobs) >$STATE/fio.out 2>&1
	# The verified writes ended first (their state is saved at the end): die now.
	sh /graid/crash/die.sh
	sleep 60
	fail "the machine did not die"
}

# array_sectors ARRAY: the array's size in sectors.
array_sectors() {
	blockdev --getsz "$(graidctl detail $1 | grep -o '/dev/graid[0-9]*' | head -n 1)"
}

# grow_prepare ROUND: a grow in the middle of the writes (issue 46): the round's optimal parity
# array (c5 in even rounds, c6 in odd ones) is shrunk to 16 MiB per member (only its first
# $VERIFIED and $FILL are ever written) and grown back to all of its drives 0.3 s into the
# writes (grow_during_writes), so the machine dies in the grow (the queue frozen, bits and
# superblocks written) or in the resync of its room. The next boot finds it at either size,
# never another (grow_check), and the round's checks read back every acknowledged write and
# find the room consistent after the resync.
grow_prepare() {
	GROWN=c5
	[ $(($1 % 2)) = 1 ] && GROWN=c6
	# Whole again if the last round's machine died before its grow.
	expect_rc 0 graidctl grow $GROWN --size max
	expect_rc 0 graidctl wait $GROWN
	full=$(array_sectors $GROWN)
	expect_rc 0 graidctl grow $GROWN --size 16M --force
	echo "$OUT"
	echo "$GROWN $(array_sectors $GROWN) $full" >$STATE/grown
}

grow_during_writes() {
	usleep 300000
	graidctl grow $GROWN --size max
}

# restripe_prepare: a restripe of cr (RAID 5, partial parity log) in the middle of the writes
# (issue 46): onto its spare the first time (3 -> 4 members), after that a chunk change (64K and
# 32K by turns), started shortly before the machine dies (restripe_during_writes): the data
# moves, the log takes no entries, requests route by both geometries. The next boot takes the
# restripe up where the superblocks say (restripe_check), every acknowledged write reads back
# during and after it, and its parity checks clean after the resync.
restripe_prepare() {
	expect_rc 0 graidctl --json detail cr
	members=$(json_field raid_devices "$OUT")
	chunk=$(json_field chunk_bytes "$OUT")
	case $OUT in
	*'"spares": []'*)
		case $chunk in
		65536) RESTRIPE="--chunk 32K" ;;
		*) RESTRIPE="--chunk 64K" ;;
		esac
		;;
	*) RESTRIPE="--raid-devices $((members + 1))" ;;
	esac
	expect_rc 0 graidctl set-speed cr --min 1M --max 2M
	echo "cr $members $chunk $RESTRIPE" >$STATE/restriped
}

# restripe_during_writes CRASH_MS: starts the restripe 0.7 s before fio's trigger kills the
# machine (0.3 s into the writes at the earliest; fio's own start comes on top): here it moves
# faster than set-speed's 2 MiB/s would let it (not understood yet), so a later start is what
# keeps the crash in its middle.
restripe_during_writes() {
	at=$(($1 - 700))
	[ $at -ge 300 ] || at=300
	usleep $((at * 1000))
	graidctl grow cr $RESTRIPE
}

# restripe_check: after the assembly, cr restripes on from where its superblocks say (or had
# not started, or had ended); every acknowledged write is read back while it moves
# (check_round), then graidctl wait sees it end.
restripe_check() {
	read -r a members chunk how <$STATE/restriped
	expect_rc 0 graidctl --json detail $a
	now="$(json_field raid_devices "$OUT") $(json_field chunk_bytes "$OUT")"
	resumed=$(dmesg | grep -o "graid: $a: its reshape goes on from sector .*")
	echo "$a: $members members, chunk $chunk before its restripe ($how); $now now; ${resumed:-not resumed}"
	# Started 0.7 s before the crash, it is mostly in the middle then: the assembly takes it up.
	# Before its first superblocks the old shape is right, after its last the new one (what
	# either holds is checked by the reads and the check that follow).
	if [ -n "$resumed" ]; then
		echo "$a: the machine died in the middle of its restripe"
	elif [ "$now" = "$members $chunk" ]; then
		echo "$a: the machine died before its restripe started"
	else
		echo "$a: the machine died after its restripe ended"
	fi
}

# grow_check: after the assembly, the grown array is at the size before its grow or after it.
grow_check() {
	read -r a small full <$STATE/grown
	now=$(array_sectors $a)
	echo "$a: $now sectors after the crash (before the grow $small, after it $full)"
	graidctl detail $a | grep -E 'Size|Resync|State :'
	[ "$now" = "$small" ] || [ "$now" = "$full" ] ||
		fail "$a assembled at $now sectors, neither the size before its grow ($small) nor after ($full)"
}

# write_hole_prepare D0 D1 D2: the targeted write-hole test's first half. A RAID 5 "wh" of
# three drives, D1 behind dm-delay; its first stripe (D0's and D1's 64 KiB chunks, P on D2)
# written whole and saved; D0 failed and removed, so its chunk lives only in P ⊕ D1; then D1's
# writes held for a minute and 4 KiB of D1's chunk rewritten: the degraded write logs its
# partial parity and writes P on D2, while its data write to D1 is still held when the machine
# dies (the module was loaded with a long safe_mode_delay_ms, so no superblock write to D1 is
# needed meanwhile). Without the log, P would then say D0's chunk is something never written.
write_hole_prepare() {
	d0=$1 d1=$2 d2=$3
	sz=$(blockdev --getsz $d1)
	dmsetup --noudevsync create whd --table "0 $sz delay $d1 0 0 $d1 0 0" || fail "dm-delay over $d1"
	expect_rc 0 graidctl create wh --level 5 --chunk 64K --bitmap none --assume-clean $d0 /dev/mapper/whd $d2
	dev=$(array_dev "$OUT")
	head -c 131072 /dev/urandom >$STATE/wh-before
	dd if=$STATE/wh-before of=$dev bs=128k count=1 oflag=direct 2>/dev/null || fail "wh: first stripe"
	expect_rc 0 graidctl fail wh $d0
	expect_rc 0 graidctl remove wh $d0
	wipe_superblocks $d0
	dmsetup --noudevsync suspend whd && dmsetup --noudevsync load whd --table "0 $sz delay $d1 0 0 $d1 0 60000" &&
		dmsetup --noudevsync resume whd || fail "cannot hold $d1's writes"
	head -c 4096 /dev/urandom >$STATE/wh-new
	dd if=$STATE/wh-new of=$dev bs=4k seek=20 count=1 oflag=direct 2>/dev/null &
	# The log entry and the parity land at once; the data write waits a minute.
	sleep 1
	echo "$d0 $d1 $d2" >$STATE/write-hole
	echo "write hole: 4 KiB of D1's chunk in flight on degraded wh, P written, D1's write held"
}

# write_hole_check: the targeted write-hole test's second half, after the assembly: wh came up
# degraded and dirty and replayed its log; D0's chunk (rebuilt from P and D1) and D1's chunk
# outside the 4 KiB in flight read back as they were written; the 4 KiB are old or new. Then
# wh goes (stopped, its drives blank).
write_hole_check() {
	set -- $(cat $STATE/write-hole)
	expect_rc 0 graidctl detail wh
	echo "$OUT"
	expect_match 'State : degraded' "$OUT" "wh after the crash"
	dev=$(array_dev "$OUT")
	dd if=$dev of=/tmp/wh-after bs=128k count=1 iflag=direct 2>/dev/null || fail "wh: read back"
	# same KIB_FROM KIB_LEN: the two reads agree there.
	same() {
		dd if=/tmp/wh-after bs=1k skip=$1 count=$2 2>/dev/null >/tmp/wh-a
		dd if=$STATE/wh-before bs=1k skip=$1 count=$2 2>/dev/null >/tmp/wh-b
		cmp -s /tmp/wh-a /tmp/wh-b
	}
	same 0 64 || fail "the write hole: the lost member's chunk reads back changed, though nothing wrote it"
	same 64 16 && same 84 44 || fail "D1's chunk changed outside the write in flight"
	same 80 4 || cmp -s $STATE/wh-new /tmp/wh-a || fail "the 4 KiB in flight are neither old nor new"
	expect_match 'graid: wh: partial parity log replayed' "$(dmesg)" "wh's start after the crash"
	echo "write hole closed: the other data of the torn stripe is intact"
	expect_rc 0 graidctl stop wh
	wipe_superblocks "$@"
	rm -f $STATE/write-hole
}

# time_resyncs: after the assembly ($assembled, /proc/uptime seconds), when each array is in
# sync again (its rebuild, if degraded, and its resync done). They all run at once at the same
# pace, so the time says what each resync walked, with and without a bitmap
# (Documentation/benchmarks.rst). Ten minutes at most.
time_resyncs() {
	left=" $ARRAYS "
	n=0
	while [ "$left" != " " ] && [ $n -lt 3000 ]; do
		for a in $left; do
			d=$(graidctl --json detail $a | tr -d '\n ')
			case $d in *'"resync_pending":true'* | *'"state":"rebuilding"'* | *'"state":"missing"'*) continue ;; esac
			took=$(awk -v a="$assembled" -v b="$(cut -d' ' -f1 /proc/uptime)" 'BEGIN { printf "%.1f", b - a }')
			echo "$a in sync $took s after the assembly (bitmap: $(graidctl detail $a | sed -n 's/ *Bitmap : //p'))"
			left=$(echo "$left" | sed "s/ $a / /")
		done
		usleep 200000
		n=$((n + 1))
	done
}

# check_round: after the crash: assemble, the resync of every array that was dirty, fio's
# verified writes read back (during the resync and after it), a check that finds every copy and
# parity in agreement, the degraded members added back and rebuilt.
check_round() {
	load_state
	round=$(cat $STATE/round)
	echo "checking round $round (died $(cat $STATE/crash-ms) ms into the writes)"
	dirty=
	for d in $(member_drives); do
		sb=$(graidctl examine "$d" 2>/dev/null) || continue
		name=$(echo "$sb" | sed -n 's/.*Name : //p')
		echo "$sb" | grep -q 'State : dirty' && dirty="$dirty $name"
	done
	# The write-hole test's array has its own checks (write_hole_check).
	dirty=$(echo $dirty | tr ' ' '\n' | grep -vx wh | sort -u | tr '\n' ' ')
	echo "dirty at the crash: $dirty"
	[ -n "$dirty" ] || fail "no array was dirty at the crash: the writes were not in flight"
	expect_rc 0 graidctl assemble --scan --run
	assembled=$(cut -d' ' -f1 /proc/uptime)
	echo "$OUT"
	if [ -f $STATE/write-hole ]; then
		write_hole_check
	fi
	if [ -f $STATE/grown ]; then
		grow_check
	fi
	if [ -f $STATE/restriped ]; then
		restripe_check
	fi
	for a in $(cat $STATE/degraded 2>/dev/null); do
		case $a in c5 | c6)
			# Started degraded after a crash: its log was replayed first.
			expect_match "graid: $a: partial parity log replayed" "$(dmesg)" "$a's degraded start"
			;;
		esac
	done
	# One pace for every resync (and rebuild), so how long each takes says how much it walked.
	for a in $ARRAYS; do expect_rc 0 graidctl set-speed $a --min 16M --max 16M; done
	time_resyncs >/tmp/resync-times 2>&1 &
	timer=$!
	for a in $dirty; do
		# The assembly starts its resync (with a bitmap, of only the regions it marks: it may
		# be over already).
		expect_match "graid: $a was not stopped cleanly: resynchronising it" "$(dmesg)" \
			"the assembly of $a after a crash while dirty"
		graidctl detail $a | grep 'Bitmap :'
	done
	# Every acknowledged write, read back while the resyncs run (or wait: a degraded array
	# resyncs once it is rebuilt) ...
	fio --aux-path=$STATE --verify_only --verify_state_load=1 --verify_state_save=0 $(verified_jobs) \
		>/tmp/fio.out 2>&1 || { cat /tmp/fio.out; fail "acknowledged writes lost in round $round (before the resync)"; }
	if [ -f $STATE/degraded ]; then
		# The drives the degraded arrays lost were left blank: one back into each.
		blank=
		for d in $(member_drives); do
			graidctl examine "$d" >/dev/null 2>&1 || blank="$blank $d"
		done
		set -- $blank
		for a in $(cat $STATE/degraded); do
			[ $# -gt 0 ] || fail "no blank drive to add back to $a"
			expect_rc 0 graidctl add $a "$1"
			shift
		done
	fi
	# Each array's resync (and rebuild) timed in the background: see time_resyncs.
	wait $timer
	cat /tmp/resync-times
	for a in $ARRAYS; do
		# A rebuild first, if any, then the resync.
		expect_rc 0 graidctl wait $a
		echo "$OUT"
		expect_rc 0 graidctl wait $a
		echo "$OUT"
	done
	# ... and after them (reads spread over every copy again).
	fio --aux-path=$STATE --verify_only --verify_state_load=1 --verify_state_save=0 $(verified_jobs) \
		>/tmp/fio.out 2>&1 || { cat /tmp/fio.out; fail "acknowledged writes lost in round $round (after the resync)"; }
	for a in $ARRAYS; do
		expect_rc 0 graidctl --json detail $a
		expect_match '"resync_pending": false' "$OUT" "$a after its resync"
		expect_rc 0 graidctl check $a --wait
		echo "$OUT"
		expect_match ' 0 mismatched sectors' "$OUT" "$a's copies or parity after the resync"
	done
}
