# Crash consistency with the members' real write order (Documentation/testing.rst, "Crashes
# replayed from the members' write logs"). dm-log-writes under each member of a RAID 5, a
# RAID 6 and a RAID 5 with a member missing (partial parity log and write-intent bitmap on, the
# defaults) records every write, flush and FUA write in the order it became durable.
#
# Each member is a stack of device-mapper devices: y (dm-delay: one member's flushes held
# FLUSH_MS, so graid's flushes are torn for a while: some members done, one not; make soak:
# each member in turn, a round each) over g (dm-linear, a gate that can be suspended without
# letting a held flush go) over lw (log-writes of d, the member's 12 MiB, to l, its log).
#
# fio writes in rounds: round r writes its own 4 KiB blocks, every R-th block of the region (so
# rounds share stripes and every write is a partial-stripe read-modify-write, but no block is
# written twice), with crc32c headers, then fsyncs the array; once the array is marked clean
# again, a time point rN. A time point T: every gate suspended (what is in flight below them
# completes, what comes after waits), the mark T.a in every log, every lw flushed (the writes
# each member completed and no flush covered yet get logged, then the flush), the mark T.b,
# the gates resumed. Between T.a and T.b a member's log holds exactly what its volatile cache
# held at T. While a round writes, time points tR.K.
#
# Then each member's log is replayed (graid-logreplay) onto a blank copy of its device, to cut
# points in log order (each replay goes on from the last), and at each cut the copies are
# assembled in dm-snapshots (what the assembly writes stays in the snapshot). Cuts:
# - rN.a on every member: rounds 1..N read back, the later rounds' blocks read zero;
# - a time point tN.K inside round N, "same" (T.a on every member) or "torn" (each member on
#   its own somewhere in T.a..T.b: its cache lost some of its last writes);
# - a flush of graid's inside round N: of a PREFLUSH write (superblock, bitmap block, log head:
#   matched across members by its sector and occurrence) or an empty one (fio's fsync), "same"
#   (past it, and its write, on every member) or "torn" (each member past its flush, with or
#   without the write's data, or before it with a random part of the writes it made durable);
#   for these two, rounds before N read back and rounds after N read zero; round N's blocks were
#   neither acknowledged nor flushed.
# make test: a torn time point in round 1, a torn flush in round 2, and r2; make soak (3
# rounds): every time point and flush torn (the first of each also same), and every round's
# end.
# The case raid5-restripe (issue 46) moves a RAID 5 onto another chunk while round 1 writes:
# its time points and flushes (the reshape's position records among them) fall in the middle of
# the move, and the assembly at such a cut takes the reshape up from the position the
# superblocks recorded and ends it before the check.
# Every cut is a state a real power cut can leave: no member holds a write that waited for
# something another member's cut leaves out. (Independent random cuts per member are not: a
# data write can be in one member's log only after the log entry it waited for on another.)
# After each assembly the resync runs, everything is read back, and `graidctl check` finds 0
# mismatched sectors (not on the degraded RAID 5, where nothing can be compared: what it must
# show is that the missing member's blocks, rebuilt from parity, read back intact). The first
# cut of each case also shows the check can fail (a round not written yet does not verify).
#
# GRAID_LOGWRITES_SEED=N repeats the cut choices of a run (its seed is printed; the logs
# themselves differ run to run, as the VM's timing does); GRAID_LOGWRITES_CASES="raid5 raid6
# raid5-degraded raid5-restripe" picks cases.
. /graid/lib.sh
need_members 4
export DM_DISABLE_UDEV=1
for m in dm-log-writes dm-snapshot dm-delay; do modprobe $m || fail "no $m module"; done

SEED=${GRAID_LOGWRITES_SEED:-$(($(od -An -N4 -tu4 /dev/urandom | tr -d ' ') % 1000000))}
# make test: the RAID 6 and the degraded RAID 5 (the log keeping a missing member's blocks);
# make soak adds the whole RAID 5, whose log and flushes are the RAID 6's with one parity less.
if [ "${GRAID_SOAK:-0}" = 1 ]; then
	ROUNDS=3 REGION=$((3 * 1024 * 1024)) ALL=1
	CASES=${GRAID_LOGWRITES_CASES:-raid5 raid6 raid5-degraded raid5-restripe}
else
	ROUNDS=2 REGION=$((2 * 1024 * 1024)) ALL=0
	CASES=${GRAID_LOGWRITES_CASES:-raid6 raid5-degraded raid5-restripe}
fi
FLUSH_MS=200
echo "seed $SEED (GRAID_LOGWRITES_SEED=$SEED repeats these cut choices), cases: $CASES, $ROUNDS rounds"

# Each drive: the member's device (12 MiB, later the replay's target), its log (64 MiB) and
# the snapshots' copy-on-write space (24 MiB: a reshape taken up at a cut rewrites all of it).
DATA=24576 LOG=131072 COW=49152

# dm ARGS...: dmsetup without its note that it makes the nodes itself (udev runs, but not for
# these devices).
dm() {
	dmsetup "$@" 2>/tmp/dm.err
	rc=$?
	grep -v '^Udev is running and DM_DISABLE_UDEV' /tmp/dm.err >&2
	return $rc
}

# uptime_ms: the guest's uptime in milliseconds.
uptime_ms() {
	read -r up _ </proc/uptime
	# Two decimals; the 1 in front keeps "08" from being read as octal.
	echo $((${up%.*} * 1000 + (1${up#*.} - 100) * 10))
}

rng=$SEED
# rand N: R = a number in 0..N-1 from the seeded generator.
rand() {
	rng=$(((rng * 1103515245 + 12345) % 2147483648))
	R=$(((rng / 65536) % $1))
}

# wait_nodes NAME...: until /dev/mapper/NAME exists for each (no udev makes them here).
wait_nodes() {
	dm mknodes >/dev/null 2>&1
	for n in "$@"; do
		t=0
		until [ -b /dev/mapper/$n ]; do
			t=$((t + 1))
			[ $t -lt 100 ] || fail "/dev/mapper/$n never appeared"
			usleep 50000
		done
	done
}

# round_job R MODE: fio's options for round R's blocks on $dev: write, verify (crc32c) or zero
# (reads back zeroes).
round_job() {
	local r=$1 mode=$2 o
	o="--name=$mode$r --filename=$dev --offset=$(((r - 1) * 4096)) --size=$((REGION - (r - 1) * 4096))"
	o="$o --rw=write:$(((ROUNDS - 1) * 4))k --bs=4k --direct=1 --ioengine=libaio --iodepth=16"
	case $mode in
	write) echo "$o --verify=crc32c --do_verify=0 --end_fsync=1" ;;
	verify) echo "$o --verify=crc32c --verify_only --verify_fatal=1" ;;
	zero) echo "$o --verify=pattern --verify_pattern=0 --verify_only --verify_fatal=1" ;;
	esac
}

# members_idle FILE...: none of these inflight counts (of the present members' y devices, held
# flushes included) shows a request.
members_idle() {
	local f r w
	for f in "$@"; do
		read -r r w <"$f"
		[ $((r + w)) = 0 ] || return 1
	done
}

# clean_everywhere: the array is marked clean and every present member's superblock says so,
# with the array's event count.
clean_everywhere() {
	local detail events i sb
	detail=$(graidctl --json detail $NAME)
	[ "$(json_field dirty "$detail")" = false ] || return 1
	events=$(json_field events "$detail")
	for i in $PRESENT; do
		sb=$(graidctl --json examine /dev/mapper/y$i) || return 1
		[ "$(json_field clean "$sb")" = true ] && [ "$(json_field events "$sb")" = "$events" ] ||
			return 1
	done
}

# wait_clean: until the array is marked clean again, that superblock is on every present
# member and no member has had a request in flight for three looks 100 ms apart; 20 s at most.
# The array says clean before its superblock writes complete, and the slow member's is held
# FLUSH_MS: a time point taken in between would put that write after the round's mark on one
# member and before it on the others, and the flushes of the next round would then be matched
# across members wrongly (a cut no power cut can leave).
wait_clean() {
	local t=0 quiet=0 i inflight=
	for i in $PRESENT; do
		inflight="$inflight /sys/dev/block/$(dm info -c --noheadings -o major,minor y$i | tr -d ' ')/inflight"
	done
	while [ $quiet -lt 3 ]; do
		t=$((t + 1))
		if [ $t -ge 200 ]; then
			graidctl --json detail $NAME | tr -d '\n' | head -c 600 | sed 's/^/# detail: /'; echo
			for i in $PRESENT; do
				echo "# y$i: $(graidctl --json examine /dev/mapper/y$i | tr -d '\n ' | grep -o '"clean":[a-z]*\|"events":[0-9]*' | tr '\n' ' ') inflight $(cat /sys/dev/block/$(dm info -c --noheadings -o major,minor y$i | tr -d ' ')/inflight)"
			done
			echo "# array inflight: $(cat /sys/block/${dev#/dev/}/inflight) stat: $(cat /sys/block/${dev#/dev/}/stat)"
			ps -eo stat,pid,args | awk '$1 ~ /^D/' | sed 's/^/# blocked: /'
			graidctl --json detail $NAME | tr -d '\n ' | grep -o '"dirty[^,]*,\|"bitmap[^}]*}\|"ppl[^}]*}' | sed 's/^/# /'
			sleep 3
			graidctl --json detail $NAME | tr -d '\n ' | grep -o '"dirty[^,]*,' | sed 's/^/# after 3 s: /'
			fail "$NAME not marked clean on every member 20 s after its writes"
		fi
		usleep 100000
		if [ $quiet = 0 ]; then
			clean_everywhere && members_idle $inflight && quiet=1
		elif members_idle $inflight; then
			quiet=$((quiet + 1))
		else
			quiet=0
		fi
	done
}

# timepoint NAME: the marks NAME.a and NAME.b in every present member's log, around a flush of
# each log-writes device, all gates suspended meanwhile (see the top).
timepoint() {
	dm --noudevsync suspend --nolockfs $GATES || fail "cannot suspend $GATES"
	for i in $PRESENT; do dm message lw$i 0 mark $1.a || fail "cannot mark $1.a in lw$i"; done
	sync -d $LWS || fail "cannot flush $LWS"
	for i in $PRESENT; do dm message lw$i 0 mark $1.b || fail "cannot mark $1.b in lw$i"; done
	dm --noudevsync resume $GATES || fail "cannot resume $GATES"
}

# delay_args MEMBER: dm-delay's arguments for y$MEMBER: flushes held FLUSH_MS if it is $SLOW.
delay_args() {
	local ms=0
	[ "$1" = "$SLOW" ] && ms=$FLUSH_MS
	echo "/dev/mapper/g$1 0 0 /dev/mapper/g$1 0 0 /dev/mapper/g$1 0 $ms"
}

# slow MEMBER: from now on MEMBER's flushes are held FLUSH_MS, the others' not at all.
slow() {
	local was=$SLOW i
	SLOW=$1
	for i in $was $SLOW; do
		dm --noudevsync suspend y$i &&
			dm --noudevsync load y$i --table "0 $DATA delay $(delay_args $i)" &&
			dm --noudevsync resume y$i || fail "cannot set y$i's flush delay"
	done
}

# setup: for member i (0..N-1) the stack y$i > g$i > lw$i > d$i (logging to l$i); c$i is
# copy-on-write space. Member $SLOW's flushes are held (slow).
setup() {
	local i=0 spec="" d
	for drive in $members; do
		[ $i -lt $N ] || break
		spec="$spec${spec:+;}d$i,,,rw,0 $DATA linear $drive 0;l$i,,,rw,0 $LOG linear $drive $DATA"
		spec="$spec;c$i,,,rw,0 $COW linear $drive $((DATA + LOG))"
		i=$((i + 1))
	done
	dm --noudevsync create --concise "$spec" || fail "dmsetup create $spec"
	wait_nodes $(for i in $ALL_MEMBERS; do echo d$i l$i c$i; done)
	for i in $ALL_MEMBERS; do
		# The logged device and its replays start the same: blank.
		dd if=/dev/zero of=/dev/mapper/d$i bs=1M count=$((DATA / 2048)) conv=fsync 2>/dev/null ||
			fail "cannot blank d$i"
		dd if=/dev/zero of=/dev/mapper/l$i bs=4k count=1 conv=fsync 2>/dev/null || fail "cannot blank l$i"
	done
	for layer in lw g y; do
		spec=""
		for i in $ALL_MEMBERS; do
			case $layer in
			lw) t="0 $DATA log-writes /dev/mapper/d$i /dev/mapper/l$i" ;;
			g) t="0 $DATA linear /dev/mapper/lw$i 0" ;;
			y) t="0 $DATA delay $(delay_args $i)" ;;
			esac
			spec="$spec${spec:+;}$layer$i,,,rw,$t"
		done
		dm --noudevsync create --concise "$spec" || fail "dmsetup create $spec"
		wait_nodes $(for i in $ALL_MEMBERS; do echo $layer$i; done)
	done
	for i in $ALL_MEMBERS; do
		# Without a volatile cache the block layer drops flushes before they reach the log, and
		# every cut would be the same.
		for d in lw$i y$i; do
			wc=$(cat /sys/block/$(basename $(dm_node $d))/queue/write_cache)
			[ "$wc" = "write back" ] || fail "$d's write cache is '$wc': the log would order nothing"
		done
	done
}

teardown() {
	dm --noudevsync remove $(for i in $ALL_MEMBERS; do echo d$i l$i c$i; done) || fail "dmsetup remove"
}

# array_writes: write requests the array completed so far.
array_writes() {
	set -- $(cat /sys/block/${dev#/dev/}/stat)
	echo $5
}

# workload: creates the array over y*, runs the rounds with their time points, stops it and
# removes the stacks above d* (lw's removal logs what no flush covered, and its end mark).
workload() {
	local ys="" i r k
	for i in $(seq 0 $((N - 1))); do ys="$ys /dev/mapper/y$i"; done
	expect_rc 0 graidctl create $NAME --level $LEVEL --chunk 64K --bitmap-chunk 1M --assume-clean $ys
	dev=$(array_dev "$OUT")
	if [ -n "$MISSING" ]; then
		expect_rc 0 graidctl fail $NAME /dev/mapper/y$MISSING
		expect_rc 0 graidctl remove $NAME /dev/mapper/y$MISSING
	fi
	wait_clean
	timepoint r0
	set -- $PRESENT
	for r in $(seq 1 $ROUNDS); do
		# make soak: each present member slow in turn.
		if [ $ALL = 1 ] && [ $r -gt 1 ]; then
			eval "s=\${$(((r - 1) % $# + 1))}"
			slow $s
		fi
		w0=$(array_writes)
		fio $(round_job $r write) >/tmp/fio.out 2>&1 &
		writer=$!
		# The first time point once the writes are under way (fio takes a while to start: on
		# the debug kernel, beside another VM, once more than 30 s).
		t0=$(uptime_ms)
		while [ $(array_writes) -lt $((w0 + 16)) ] && kill -0 $writer 2>/dev/null; do
			[ $(($(uptime_ms) - t0)) -lt 120000 ] || fail "round $r: fio wrote nothing in 120 s"
			usleep 20000
		done
		# raid5-restripe: the move to another chunk starts under round 1's writes, slowly
		# enough to last past its time points.
		if [ -n "$RESTRIPE" ] && [ $r = 1 ]; then
			expect_rc 0 graidctl set-speed $NAME --min 2M --max 2M
			expect_rc 0 graidctl grow $NAME --chunk 32K
		fi
		# Time points while the round writes (every 0-0.4 s; at least one, at most three; make
		# test uses one a round).
		k=0
		while [ $k = 0 ] || { kill -0 $writer 2>/dev/null && [ $k -lt $((ALL ? 3 : 2)) ]; }; do
			rand 5
			usleep $((R * 100000))
			timepoint t$r.$k
			k=$((k + 1))
		done
		wait $writer || { cat /tmp/fio.out; fail "round $r's writes failed"; }
		eval "tps_$r=$k"
		if [ -n "$RESTRIPE" ] && [ $r = 1 ]; then
			expect_rc 0 graidctl detail $NAME
			case "$OUT" in *"Reshape :"*) ;; *) fail "the restripe ended before round 1's writes did: nothing was cut in its middle" ;; esac
			expect_rc 0 graidctl set-speed $NAME --min 100M --max 0
			expect_rc 0 graidctl wait $NAME
		fi
		wait_clean
		timepoint r$r
		echo "round $r: member $SLOW's flushes held ${FLUSH_MS} ms, $k time points"
	done
	expect_rc 0 graidctl detail $NAME
	echo "$OUT" | grep -E 'Write Hole|Bitmap|Events'
	expect_rc 0 graidctl stop $NAME
	for i in $ALL_MEMBERS; do
		st=$(dm status lw$i)
		case $st in *logging_disabled*) fail "lw$i stopped logging (log device full?): $st" ;; esac
	done
	dm --noudevsync remove $(for l in y g lw; do for i in $ALL_MEMBERS; do echo $l$i; done; done) ||
		fail "dmsetup remove y*, g*, lw*"
}

# at MEMBER MARK: AT = the index of the mark MARK in MEMBER's log.
at() {
	AT=$(graid-logreplay mark /dev/mapper/l$1 $2) || fail "no mark $2 in l$1"
}

# replay_to C...: each present member's copy (d$i) holds the first C entries of its log
# (replayed on from where it was, or from a blank device if that is past C).
replay_to() {
	for i in $PRESENT; do
		want=$1
		shift
		eval "pos=\$pos_$i"
		if [ "$want" -lt "$pos" ]; then
			dd if=/dev/zero of=/dev/mapper/d$i bs=1M count=$((DATA / 2048)) conv=fsync 2>/dev/null
			pos=0
		fi
		graid-logreplay replay /dev/mapper/l$i /dev/mapper/d$i --from $pos --to $want >/tmp/replay.out 2>&1 ||
			{ cat /tmp/replay.out; fail "replay of l$i to $want failed"; }
		eval "pos_$i=$want"
	done
}

cuts_now() { for i in $PRESENT; do eval "printf ' %s' \$pos_$i"; done; }

# cut_fail WHAT: fails the test, saying which cut, what the logs hold around it and how to
# repeat it.
cut_fail() {
	echo "$OUT"
	for i in $PRESENT; do
		eval "c=\$pos_$i"
		from=$((c > 8 ? c - 8 : 0))
		echo "member $i: its log's entries $from..$((c + 3)) (INDEX FLAGS SECTOR SECTORS [MARK]), cut at $c:"
		graid-logreplay list /dev/mapper/l$i --from $from --to $((c + 3)) | sed 's/^/    /'
	done
	dmesg | grep graid | tail -n 20
	fail "$CASE, cut '$LABEL' (member cuts:$(cuts_now)): $1 (GRAID_LOGWRITES_SEED=$SEED GRAID_LOGWRITES_CASES=$CASE repeats the choices)"
}

# check_cut LABEL DONE ZERO_FROM C...: the copies replayed to the member cuts C..., assembled
# in snapshots, resynced; rounds 1..DONE must read back, rounds ZERO_FROM.. read zero, and the
# parity must match.
check_cut() {
	local done_rounds=$2 zero_from=$3 snaps="" jobs="" r i adev
	LABEL=$1
	shift 3
	replay_to "$@"
	spec=""
	for i in $PRESENT; do
		spec="$spec${spec:+;}sn$i,,,rw,0 $DATA snapshot /dev/mapper/d$i /dev/mapper/c$i N 8"
		snaps="$snaps /dev/mapper/sn$i"
	done
	dm --noudevsync create --concise "$spec" || cut_fail "dmsetup create $spec"
	wait_nodes $SNAPS
	OUT=$(graidctl assemble $RUN $snaps 2>&1) || cut_fail "the assembly failed"
	adev=$(array_dev "$OUT")
	# A reshape in the middle goes on from the position recorded, and ends.
	if graidctl detail $NAME | grep -q 'Reshape :'; then
		RESUMED=$((RESUMED + 1))
		OUT=$(graidctl wait $NAME 2>&1) || cut_fail "the reshape taken up at the cut did not end"
	fi
	# The resync (a degraded RAID 5 has none: its log was replayed before it started).
	t0=$(uptime_ms)
	while [ -z "$MISSING" ] && [ "$(json_field resync_pending "$(graidctl --json detail $NAME)")" != false ]; do
		[ $(($(uptime_ms) - t0)) -lt 60000 ] || { OUT=$(graidctl detail $NAME); cut_fail "the resync did not end in 60 s"; }
		usleep 100000
	done
	for r in $(seq 1 $ROUNDS); do
		if [ $r -le $done_rounds ]; then
			jobs="$jobs $(dev=$adev round_job $r verify)"
		elif [ $r -ge $zero_from ]; then
			jobs="$jobs $(dev=$adev round_job $r zero)"
		fi
	done
	if [ -n "$jobs" ]; then
		fio $jobs >/tmp/fio.out 2>&1 || {
			OUT=$(grep -E 'verify|bad|error|fio:' /tmp/fio.out | head -n 20)
			cut_fail "acknowledged and flushed writes (rounds 1..$done_rounds) or never written blocks (rounds $zero_from..) read back wrong"
		}
	fi
	if [ "$NEG" = 1 ] && [ $zero_from -le $ROUNDS ]; then
		# The case's first cut shows the check can fail: a round not written yet.
		fio $(dev=$adev round_job $zero_from verify) >/tmp/fio.out 2>&1 &&
			cut_fail "round $zero_from's blocks verify before they were written: the check proves nothing"
		NEG=
	fi
	if [ -z "$MISSING" ]; then
		OUT=$(graidctl check $NAME --wait 2>&1) || cut_fail "graidctl check failed"
		echo "$OUT" | grep -q ' 0 mismatched sectors' || cut_fail "parity does not match the data after the resync"
	fi
	OUT=$(graidctl stop $NAME 2>&1) || cut_fail "graidctl stop failed"
	dm --noudevsync remove $SNAPS || fail "dmsetup remove $SNAPS"
	echo "ok: $LABEL: rounds 1..$done_rounds read back, $zero_from.. zero (member cuts:$(cuts_now))"
	CUTS=$((CUTS + 1))
}

# timepoint_cut ROUND K KIND: the cut at the time point tROUND.K, same or torn.
timepoint_cut() {
	local cuts="" lost=0 i a b held=
	for i in $PRESENT; do
		at $i t$1.$2.a
		a=$AT
		at $i t$1.$2.b
		b=$AT
		# Entries a+1..b-2 are the writes the member's cache held, b-1 the flush of them.
		cut=$((a + 1))
		if [ $3 = torn ]; then
			rand $((b - a - 1))
			cut=$((a + 1 + R))
			[ $cut = $((b - 1)) ] || lost=$((lost + 1))
			[ $b -gt $((a + 2)) ] && held=$i
		fi
		cuts="$cuts $cut"
	done
	# Torn means some member lost writes: if the draw kept every cache whole, a member that
	# held some loses them all.
	if [ $3 = torn ] && [ $lost = 0 ] && [ -n "$held" ]; then
		cuts=$(k=0; for i in $PRESENT; do
			set -- $cuts
			shift $k
			if [ $i = $held ]; then at $i t$ROUND.$J.a; echo $((AT + 1)); else echo $1; fi
			k=$((k + 1))
		done | tr '\n' ' ')
		lost=1
	fi
	check_cut "round $1, time point $(($2 + 1)) of $(eval echo \$tps_$1), $3 ($lost members lost writes)" \
		$(($1 - 1)) $(($1 + 1)) $cuts
}

# events_of ROUND: graid's flushes in ROUND on every present member (our time points' own
# flushes left out). /tmp/ev.I: member I's, a line each: KEY FLUSH BATCH_START AFTER (entry
# numbers, graid-logreplay events), KEY the flushed write's sector (a PREFLUSH write: a
# superblock, bitmap block or log head) or - (an empty flush), and #N its N-th in the round.
# EVKEYS: the keys on every member, in the first member's order (the same write goes to every
# member at once); empty flushes only if every member has as many (graid may leave out a
# member with nothing to flush). NEV: their count.
events_of() {
	local i n first= keys k
	for i in $PRESENT; do
		e=$(graid-logreplay events /dev/mapper/l$i --from-mark r$(($1 - 1)).b --to-mark r$1.a) ||
			fail "no events in l$i for round $1"
		# Each time point's own flush sits right before its .b mark.
		marks=$(graid-logreplay marks /dev/mapper/l$i | awk '$2 ~ /\.b$/ { print $1 }' | tr '\n' ' ')
		echo "$e" | awk -v m=" $marks" 'NF == 4 && index(m, " " ($1 + 1) " ") == 0 {
			n[$4]++; print $4 "#" n[$4], $1, $2, $3 }' >/tmp/ev.$i
		echo "member $i: $(awk '{ printf "%s@%s ", $1, $2 }' /tmp/ev.$i)"
		[ -n "$first" ] || first=$i
	done
	keys=$(awk '{ print $1 }' /tmp/ev.$first)
	plain=$(grep -c '^-#' /tmp/ev.$first)
	EVKEYS=
	for k in $keys; do
		for i in $PRESENT; do
			grep -q "^$k " /tmp/ev.$i || continue 2
			case $k in -*) [ "$(grep -c '^-#' /tmp/ev.$i)" = "$plain" ] || continue 2 ;; esac
		done
		EVKEYS="$EVKEYS $k"
	done
	NEV=$(echo $EVKEYS | wc -w)
}

# event_cut: the cut at graid's flush $J (from 0, of EVKEYS) of round $ROUND on every member,
# $KIND: same (past the flush, and the write it came with, on every member) or torn (each
# member past its flush, with or without the write, or before it: a random part of the writes
# it made durable kept).
event_cut() {
	local cuts="" lost=0 i key flush batch after
	key=$(echo $EVKEYS | cut -d' ' -f$((J + 1)))
	for i in $PRESENT; do
		set -- $(grep "^$key " /tmp/ev.$i)
		flush=$2 batch=$3 after=$4
		cut=$after
		if [ $KIND = torn ]; then
			rand 2
			if [ $R = 1 ]; then
				rand $((flush - batch + 1))
				cut=$((batch + R))
				lost=$((lost + 1))
			else
				rand 2
				[ $R = 1 ] || cut=$((flush + 1))
			fi
		fi
		cuts="$cuts $cut"
	done
	# Torn means some member before its flush: if the draw left none, the last goes back.
	if [ $KIND = torn ] && [ $lost = 0 ]; then
		cuts="${cuts% *} $batch"
		lost=1
	fi
	check_cut "round $ROUND, flush $key ($((J + 1)) of $NEV), $KIND ($lost members before it)" \
		$((ROUND - 1)) $((ROUND + 1)) $cuts
}

CUTS=0 NEG= RESUMED=0
for CASE in $CASES; do
	RESTRIPE=
	case $CASE in
	raid5) LEVEL=5 N=3 MISSING= RUN= ;;
	raid6) LEVEL=6 N=4 MISSING= RUN= ;;
	raid5-degraded) LEVEL=5 N=4 MISSING=3 RUN=--run ;;
	raid5-restripe) LEVEL=5 N=3 MISSING= RUN= RESTRIPE=1 ;;
	*) fail "unknown case $CASE" ;;
	esac
	NAME=lw$LEVEL
	ALL_MEMBERS=$(seq 0 $((N - 1)) | tr '\n' ' ')
	PRESENT=$(echo $ALL_MEMBERS | tr ' ' '\n' | grep -vx "${MISSING:-none}" | tr '\n' ' ')
	# The member whose flushes are held (make soak: each in turn, a round each).
	set -- $PRESENT
	rand $#
	eval "SLOW=\${$((R + 1))}"
	GATES= LWS= SNAPS=
	for i in $PRESENT; do
		GATES="$GATES g$i" LWS="$LWS /dev/mapper/lw$i" SNAPS="$SNAPS sn$i"
	done
	echo "--- $CASE: RAID $LEVEL of $N${MISSING:+, member $MISSING missing}, $ROUNDS rounds"
	NEG=1
	setup
	workload
	for i in $PRESENT; do
		echo "l$i: $(graid-logreplay info /dev/mapper/l$i | tr '\n' ' ')"
		eval "pos_$i=0"
		dd if=/dev/zero of=/dev/mapper/d$i bs=1M count=$((DATA / 2048)) conv=fsync 2>/dev/null
	done
	for ROUND in $(seq 1 $ROUNDS); do
		events_of $ROUND
		eval "tps=\$tps_$ROUND"
		echo "round $ROUND: $NEV flushes of graid's on every member, $tps time points"
		[ $NEV -gt 0 ] || fail "$CASE round $ROUND: no flush of graid's on every member (its superblock writes at least)"
		# In log order: each time point's and flush's cuts, then the round's end. A time point
		# sits between two flushes: take it where it falls.
		if [ $ALL = 1 ]; then
			tp_list=$(seq 0 $((tps - 1))) ev_list=$(seq 0 $((NEV - 1)))
		elif [ $((ROUND % 2)) = 1 ]; then
			# make test: a torn time point in odd rounds, a torn flush in even ones.
			rand $tps
			tp_list=$R ev_list=
		else
			rand $NEV
			tp_list= ev_list=$R
		fi
		set -- $PRESENT
		first=$1
		: >/tmp/items
		for k in $tp_list; do
			at $first t$ROUND.$k.a
			echo "$AT t $k" >>/tmp/items
		done
		j=0
		for key in $EVKEYS; do
			echo "$ev_list" | grep -qx $j && echo "$(grep "^$key " /tmp/ev.$first | cut -d' ' -f2) e $j" >>/tmp/items
			j=$((j + 1))
		done
		for item in $(sort -n /tmp/items | awk '{ print $2 ":" $3 }'); do
			J=${item#*:}
			case $item in
			t:*)
				# make soak: the first also the same on every member.
				[ $ALL = 1 ] && [ $J = 0 ] && timepoint_cut $ROUND $J same
				timepoint_cut $ROUND $J torn
				;;
			e:*)
				KIND=torn
				event_cut
				if [ $ALL = 1 ] && [ $J = 0 ]; then
					KIND=same
					event_cut
				fi
				;;
			esac
		done
		# Each round's end (make test: the last one's).
		if [ $ALL = 1 ] || [ $ROUND = $ROUNDS ]; then
			marks=""
			for i in $PRESENT; do
				at $i r$ROUND.a
				marks="$marks $((AT + 1))"
			done
			check_cut "mark r$ROUND" $ROUND $((ROUND + 1)) $marks
		fi
	done
	# Round 1's cut fell in the middle of the move: its assembly took the reshape up.
	if [ -n "$RESTRIPE" ] && [ $RESUMED = 0 ]; then
		fail "$CASE: no cut's assembly found the reshape in the middle"
	fi
	teardown
	wipe_superblocks $members
done
echo "$CUTS cuts checked, $RESUMED of them in the middle of a reshape"
unload_module
