# graidctl add and the rebuild on RAID 1, 10, 5 and 6, under verified writes:
# - a failed and removed member's place is taken by an added device, which is rebuilt in the
#   background while fio writes and verifies (RAID 10 and 6: a blank device, rebuilt in full;
#   RAID 1 and 5: the same device back, which the write-intent bitmap covers: only the regions
#   written while it was away are rebuilt); DETAIL shows "rebuilding", a uevent announces
#   the add, graidctl wait waits for the end;
# - once in sync, the copies or members it was rebuilt from are failed (RAID 1/10: its copy;
#   RAID 5: another member; RAID 6: two others): everything fio wrote, before, while degraded
#   and during the rebuild, reads back through the rebuilt member;
# - a rebuild interrupted by a stop resumes at assembly from where it stopped (the recovery
#   offset in its superblock) and completes;
# - refusals change nothing: adding a member, a device too small, a device of another array;
#   a RAID 0 (nothing to rebuild from) takes the device as a spare for a restripe (44).
#   (Adding to an optimal array makes a spare: 23.)
# RAID 5/6 run on 64 MiB dm-linear slices of the drives, so their rebuilds stay short.
. /graid/lib.sh
need_members 4
set -- $members
d0=$1 d1=$2 d2=$3 d3=$4
export DM_DISABLE_UDEV=1

detail_json() { graidctl --json detail ar | tr -d '\n '; }
role_state() { # ROLE: the state of that role (from the members list only)
	detail_json | sed 's/.*"members":\[//; s/},{/}\n{/g' | grep "\"role\":$1," |
		sed -n 's/.*"state":"\([a-z]*\)".*/\1/p'
}
# wait_rebuilt SECONDS: waits until no member of `ar` is rebuilding.
wait_rebuilt() {
	n=0
	while detail_json | grep -q '"state":"rebuilding"'; do
		n=$((n + 1))
		[ $n -le $(($1 * 5)) ] || fail "the rebuild did not end in $1 s: $(graidctl detail ar)"
		usleep 200000
	done
}

slices() { # makes /dev/mapper/s0..s3: 64 MiB at the start of each drive
	i=0
	for d in $d0 $d1 $d2 $d3; do
		dmsetup --noudevsync create s$i --table "0 131072 linear $d 0" || fail "dmsetup create failed"
		i=$((i + 1))
	done
}
unslice() { for i in 0 1 2 3; do dmsetup --noudevsync remove s$i; done; }

for level in 1 10 5 6; do
	chunk="--chunk 64K" fail_after=
	case $level in
	1) m="$d0 $d1" lose=$d1 role=1 fail_after=$d0 chunk= ;;
	10) m="$d0 $d1 $d2 $d3" lose=$d2 role=2 fail_after=$d3 ;;
	*)
		wipe_superblocks $d0 $d1 $d2 $d3
		slices
		m="/dev/mapper/s0 /dev/mapper/s1 /dev/mapper/s2 /dev/mapper/s3" lose=/dev/mapper/s1 role=1
		case $level in
		5) fail_after=/dev/mapper/s3 ;;
		6) fail_after="/dev/mapper/s0 /dev/mapper/s3" ;;
		esac
		;;
	esac
	echo "--- RAID $level: fail and remove $lose, add it back under writes, rebuild, fail $fail_after"
	wipe_superblocks $d0 $d1 $d2 $d3
	expect_rc 0 graidctl create ar --level $level $chunk --write-zeroes $m
	dev=$(array_dev "$OUT")
	fio_verify "$dev" 0 16M randwrite 4k-128k
	expect_rc 0 graidctl fail ar $lose
	expect_rc 0 graidctl remove ar $lose
	# Written while degraded: the rebuild must bring it over too.
	fio_verify "$dev" 16M 8M randwrite 4k-64k
	uevents_start
	fio --name=write $(fio_args "$dev" 24M 8M randwrite 4k-128k) >/tmp/fio.out 2>&1 &
	writer=$!
	usleep 200000
	kill -0 $writer 2>/dev/null || fail "fio ended before the add: nothing tested"
	# RAID 10 and 6 get the device blank (a new drive: rebuilt in full); RAID 1 and 5 get it
	# back as it left (the bitmap's re-add: only the regions written while it was away).
	case $level in 10 | 6) wipe_superblocks $lose ;; esac
	expect_rc 0 graidctl add ar $lose
	expect_match "added $lose \(role $role\) to $dev \(ar\), rebuilding" "$OUT" "add's report"
	state=$(role_state $role)
	[ "$state" = rebuilding ] || [ "$state" = active ] || fail "role $role is '$state' after add"
	finishes $writer 300 "fio" || { cat /tmp/fio.out; fail "fio verify failed across the rebuild"; }
	expect_rc 0 graidctl wait ar
	expect_match "rebuild of role $role (finished|at)|no rebuild" "$OUT" "wait's report"
	expect_match "GRAID_EVENT=member-added GRAID_MEMBER=$role " "$(uevents_stop)" "add's uevent"
	[ "$(role_state $role)" = active ] || fail "role $role not active after the rebuild"
	expect_match '"state":"optimal"' "$(detail_json)" "array state after the rebuild"
	expect_rc 0 graidctl examine $lose
	expect_match 'Recovery Offset : complete' "$OUT" "$lose's superblock after the rebuild"
	# The rebuilt member now holds its part alone.
	for f in $fail_after; do expect_rc 0 graidctl fail ar $f; done
	echo 3 >/proc/sys/vm/drop_caches
	fio_readback "$dev" 0 16M randwrite 4k-128k "data written before the failure lost"
	fio_readback "$dev" 16M 8M randwrite 4k-64k "data written while degraded lost"
	fio_readback "$dev" 24M 8M randwrite 4k-128k "data written during the rebuild lost"
	expect_rc 0 graidctl stop ar
	case $level in 5 | 6) unslice ;; esac
done

echo "--- RAID 1: a rebuild interrupted by a stop resumes at assembly"
wipe_superblocks $d0 $d1 $d2 $d3
expect_rc 0 graidctl create ar --level 1 --write-zeroes $d0 $d1
dev=$(array_dev "$OUT")
fio_verify "$dev" 0 16M randwrite 4k-128k
# Data at the far end too: the part the resumed rebuild copies.
size=$(cat /sys/class/block/${dev#/dev/}/size)
tail=$(((size / 2048 - 16) * 1048576))
fio_verify "$dev" $tail 8M randwrite 4k-128k
expect_rc 0 graidctl fail ar $d1
expect_rc 0 graidctl remove ar $d1
# Blank, so it is rebuilt in full (back as it left, the bitmap would spare most of it).
wipe_superblocks $d1
expect_rc 0 graidctl add ar $d1
expect_rc 0 graidctl stop ar
expect_rc 0 graidctl examine $d1
offset=$(echo "$OUT" | sed -n 's/.*Recovery Offset : \([0-9]*\) sectors in sync.*/\1/p')
[ -n "$offset" ] || fail "no recovery offset in $d1's superblock after a stop mid-rebuild: $OUT"
echo "stopped with $offset sectors of $d1 in sync"
expect_rc 0 graidctl assemble ar $d0 $d1
dev=$(array_dev "$OUT")
wait_rebuilt 240
expect_rc 0 graidctl fail ar $d0
fio_readback "$dev" 0 16M randwrite 4k-128k "data lost across the interrupted rebuild (start)"
fio_readback "$dev" $tail 8M randwrite 4k-128k "data lost across the interrupted rebuild (end)"
expect_rc 0 graidctl stop ar

echo "--- RAID 1: set-speed caps the rebuild, and lifting the cap lets it finish"
wipe_superblocks $d0 $d1 $d2 $d3
expect_rc 0 graidctl create ar --level 1 --write-zeroes $d0 $d1
expect_rc 0 graidctl set-speed ar
expect_match 'at least 100 MiB/s under load, at most none idle' "$OUT" "the default limits"
expect_rc 0 graidctl set-speed ar --min 8M --max 16M
expect_match 'at least 8 MiB/s under load, at most 16 MiB/s idle' "$OUT" "set-speed's report"
expect_rc 2 graidctl set-speed ar --min 0
expect_rc 1 graidctl set-speed ar --min 32M
expect_match 'above the cap' "$OUT" "a floor above the cap"
expect_rc 0 graidctl fail ar $d1
expect_rc 0 graidctl remove ar $d1
wipe_superblocks $d1
expect_rc 0 graidctl add ar $d1
sleep 3
# 254 MiB at 16 MiB/s takes 16 s: after 3 s far from done (a slow machine only slows it more).
pct=$(detail_json | sed -n 's/.*"percent":\([0-9]*\).*/\1/p')
[ -n "$pct" ] && [ "$pct" -lt 50 ] || fail "the capped rebuild is at '$pct'% after 3 s: $(graidctl detail ar)"
echo "capped at 16 MiB/s: ${pct}% after 3 s"
expect_rc 0 graidctl set-speed ar --max 0
expect_rc 0 graidctl wait ar
expect_match 'finished' "$OUT" "the rebuild after the cap was lifted"
expect_rc 0 graidctl stop ar

echo "--- refusals"
wipe_superblocks $d0 $d1 $d2 $d3
expect_rc 0 graidctl create ar --level 1 --write-zeroes $d0 $d1
dev=$(array_dev "$OUT")
index=${dev#/dev/graid}
expect_rc 1 graidctl add ar $d0
expect_match 'is a member already' "$OUT" "adding a member"
[ "$(graid-probe member $index add $d0)" = EEXIST ] || fail "the module took a member twice"
expect_rc 0 graidctl fail ar $d1
expect_rc 0 graidctl remove ar $d1
dmsetup --noudevsync create small --table "0 8192 linear $d2 0" || fail "dmsetup create failed"
expect_rc 1 graidctl add ar /dev/mapper/small
expect_match 'too small.*ENOSPC' "$OUT" "adding a device too small"
dmsetup --noudevsync remove small
expect_rc 0 graidctl create other --level 1 --write-zeroes $d2 $d3
expect_rc 0 graidctl stop other
expect_rc 1 graidctl add ar $d2
expect_match 'another array.*EXDEV' "$OUT" "adding a member of another array"
[ "$(role_state 1)" = missing ] || fail "role 1 changed after refusals: $(graidctl detail ar)"
expect_rc 0 graidctl stop ar
wipe_superblocks $d0 $d1 $d2 $d3
expect_rc 0 graidctl create r0 --level 0 --chunk 64K $d0 $d1
expect_rc 0 graidctl add r0 $d2
expect_match 'as a spare \(it joins a restripe onto more members' "$OUT" "adding to a RAID 0"
expect_rc 0 graidctl --json detail r0
expect_match '"state": *"optimal"' "$OUT" "a RAID 0 with a spare"
expect_rc 0 graidctl stop r0
wipe_superblocks $d0 $d1 $d2 $d3
unload_module
