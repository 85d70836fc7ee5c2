# graidctl fail and remove on running arrays (RAID 1 and 6; RAID 10's pairs in graid-sim), under
# verified writes:
# - a failed member is out of use at once and recorded in the others' superblocks; fio goes on
#   and verifies;
# - it is removed while fio runs: its role shows missing, the device is released (no longer a
#   slave of the array); both are announced with a uevent (GRAID_EVENT, GRAID_MEMBER);
# - refusals change nothing: failing the last copy (the module's EBUSY), removing an active
#   member (graidctl, and the module when asked directly), a device that is not a member;
# - assembly without the removed member is refused naming its role, starts degraded with
#   --run and reads back; the removed member is refused if it comes back; a RAID 5 that was
#   never in sync does not start degraded (its parity may be wrong).
. /graid/lib.sh
need_members 4
set -- $members
d0=$1 d1=$2 d2=$3 d3=$4

role_state() { # ROLE: the state of that role in `graidctl --json detail fr`
	# Each member's object alone (up to its closing brace: RAID 5/6 details go on with the
	# helper's object, which has a state of its own).
	graidctl --json detail fr | tr -d '\n ' | sed 's/},{/}\n{/g' | grep "\"role\":$1," |
		sed 's/}.*//' | sed -n 's/.*"state":"\([a-z]*\)".*/\1/p'
}
# under_fio WHAT CMD...: runs CMD while verified random writes run on the array; both must pass.
under_fio() {
	what=$1
	shift
	fio --name=write $(fio_args "$dev" 0 8M randwrite 4k-128k) >/tmp/fio.out 2>&1 &
	writer=$!
	usleep 200000
	kill -0 $writer 2>/dev/null || fail "fio ended before $what: nothing tested"
	expect_rc 0 "$@"
	finishes $writer 300 "fio" || { cat /tmp/fio.out; fail "fio verify failed across $what"; }
	fio_readback "$dev" 0 8M randwrite 4k-128k "data lost across $what"
}

for level in 1 6; do
	case $level in
	1) m="$d0 $d1" ;;
	*) m="$d0 $d1 $d2 $d3" ;;
	esac
	echo "--- RAID $level: fail $d1 under writes, then remove it under writes"
	wipe_superblocks $d0 $d1 $d2 $d3
	expect_rc 0 graidctl create fr --level $level --write-zeroes $m
	dev=$(array_dev "$OUT")
	index=${dev#/dev/graid}
	uevents_start
	under_fio "failing $d1" graidctl fail fr $d1
	expect_match "failed $d1 \(role 1\) in $dev \(fr\)" "$OUT" "fail's report"
	[ "$(role_state 1)" = faulty ] || fail "role 1 is not faulty: $(graidctl detail fr)"
	expect_match '"state": "degraded"' "$(graidctl --json detail fr)" "array state after fail"
	expect_rc 0 graidctl examine $d0
	expect_match 'faulty' "$OUT" "the failure in $d0's superblock"
	# Failing it again changes nothing.
	expect_rc 0 graidctl fail fr $d1

	expect_rc 1 graidctl remove fr $d0
	expect_match 'it is active' "$OUT" "graidctl's refusal to remove an active member"
	[ "$(graid-probe member $index remove $d0)" = EBUSY ] ||
		fail "the module removed an active member (or said something else)"
	[ "$(role_state 0)" = active ] || fail "role 0 changed after refusals"

	under_fio "removing $d1" graidctl remove fr $d1
	expect_match "removed $d1 \(role 1\) from $dev \(fr\)" "$OUT" "remove's report"
	events=$(uevents_stop)
	expect_match "GRAID_NAME=fr .*GRAID_EVENT=member-failed GRAID_MEMBER=1 " "$events" "fail's uevent"
	expect_match "GRAID_EVENT=member-removed GRAID_MEMBER=1 " "$events" "remove's uevent"
	[ "$(role_state 1)" = missing ] || fail "role 1 is not missing: $(graidctl detail fr)"
	[ -e /sys/block/${dev#/dev/}/slaves/${d1#/dev/} ] && fail "$d1 is still a slave of $dev"
	expect_rc 1 graidctl fail fr $d1
	expect_match 'is not a member' "$OUT" "failing a removed member"
	[ "$(graid-probe member $index fail $d1)" = ENXIO ] || fail "the module took a removed member"

	case $level in
	1) last=$d0 last_role=0 ;;
	6)
		under_fio "failing a second RAID 6 member" graidctl fail fr $d2
		last=$d3 last_role=3
		;;
	esac
	echo "--- RAID $level: the last copy ($last) cannot be failed"
	expect_rc 1 graidctl fail fr $last
	expect_match 'holds the last copy' "$OUT" "refusal to fail the last copy"
	expect_match 'EBUSY' "$OUT" "the module's errno"
	[ "$(role_state $last_role)" = active ] || fail "the last copy changed after the refusal"
	expect_match '"state": "degraded"' "$(graidctl --json detail fr)" "array state after the refusal"
	fio_verify "$dev" 16M 8M randwrite 4k-64k
	expect_rc 0 graidctl stop fr

	echo "--- RAID $level: assembly without the removed member: refused, then degraded with --run"
	case $level in
	1) present=$d0 ;;
	6) present="$d0 $d3" ;; # $d1 removed, $d2 failed
	esac
	expect_rc 1 graidctl assemble $present
	expect_match 'role.* 1.* no member.*--run' "$OUT" "refusal naming the missing role"
	expect_rc 1 graidctl assemble $present $d1
	expect_match "$d1.*(stale|faulty)" "$OUT" "the removed member coming back"
	expect_rc 1 graidctl assemble other --run $present
	expect_match "belongs to array 'fr'" "$OUT" "assembly under another array's name"
	# The array first, as mdadm users type it: by name, or as a chosen /dev/graidN.
	case $level in
	1) expect_rc 0 graidctl assemble fr --run $present ;;
	6)
		expect_rc 0 graidctl assemble /dev/graid7 --run $present
		expect_match 'as /dev/graid7 ' "$OUT" "the chosen device"
		;;
	esac
	expect_match 'degraded' "$OUT" "degraded start"
	dev=$(array_dev "$OUT")
	[ "$(role_state 1)" = missing ] || fail "role 1 is not missing after a degraded start"
	fio_readback "$dev" 16M 8M randwrite 4k-64k "data lost across a degraded assembly"
	fio_verify "$dev" 0 8M randwrite 4k-64k
	expect_rc 0 graidctl stop fr
done

echo "--- RAID 5 never synchronised (not clean): a degraded start is refused, a full one works"
wipe_superblocks $d0 $d1 $d2 $d3
expect_rc 0 graidctl create fr --level 5 $d0 $d1 $d2
dev=$(array_dev "$OUT")
# Paced so that it cannot end before the stop (at full speed it may, and then the array is
# in sync and a degraded start is right).
expect_rc 0 graidctl set-speed fr --min 1M --max 1M
fio_verify "$dev" 0 8M randwrite 4k-64k
expect_rc 0 graidctl detail fr
expect_match 'Sync : resync pending' "$OUT" "the initial resync still running at the stop"
expect_rc 0 graidctl stop fr
expect_rc 1 graidctl assemble --run $d0 $d2
expect_match 'not stopped cleanly.*EUCLEAN' "$OUT" "refusal of a dirty degraded RAID 5"
expect_rc 0 graidctl assemble $d0 $d1 $d2
fio_readback "$(array_dev "$OUT")" 0 8M randwrite 4k-64k "data lost after the refused start"
expect_rc 0 graidctl stop fr
wipe_superblocks $d0 $d1 $d2 $d3
unload_module
