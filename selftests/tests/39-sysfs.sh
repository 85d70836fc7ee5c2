# /sys/block/graidN/graid/, md's md/ attributes (issue 32):
# - on a RAID 5 (as created by default) every file reads what `graidctl detail --json` says:
#   level, raid_disks, chunk_size, component_size, state, degraded, consistency_policy, bitmap,
#   name, uuid, events; each member's rdN/ its state, slot and dev (major:minor);
# - sync_speed_min/max take md's plain numbers (shown by `graidctl set-speed`), and refuse
#   words, negatives and a cap under the floor, changing nothing;
# - `echo check > sync_action` starts a check: sync_action reads check and sync_completed
#   "done / total" while it runs, `echo idle` stops it, and a full check's mismatch_cnt is the
#   8 sectors scribbled on the parity, as detail says; `resync`, `frozen` are refused;
# - a failed member reads faulty and degraded 1; the member added back reads spare with
#   recovery_start while it is rebuilt, sync_action recover, and in_sync after;
# - RAID 1's and RAID 0's policies; the directory goes with the array and the module unloads;
# - `echo idle` (and `graidctl check --stop`) on a RAID 1 resyncing after its creation leaves
#   the resync running: idle stops a check or a repair, never a resync the array needs (md).
. /graid/lib.sh
need_members 4
set -- $members
d0=$1 d1=$2 d2=$3 d3=$4

# attr FILE: the array's file; json NAME: detail's field.
attr() { cat "$sys/$1" || fail "cannot read $sys/$1"; }
json() { json_field "$1" "$(graidctl --json detail sy)"; }
# same FILE VALUE: the file reads VALUE.
same() {
	got=$(attr "$1")
	[ "$got" = "$2" ] || fail "$1 reads '$got', expected '$2'"
}
# refused FILE VALUE: writing VALUE to FILE fails with EINVAL.
refused() {
	err=$( (echo "$2" >"$sys/$1") 2>&1) && fail "$1 took '$2'"
	expect_match "Invalid argument" "$err" "writing '$2' to $1"
}
# until_reads FILE VALUE SECONDS
until_reads() {
	n=0
	until [ "$(attr "$1")" = "$2" ]; do
		n=$((n + 1))
		[ $n -le $(($3 * 10)) ] || fail "$1 reads '$(attr "$1")', not '$2' after $3 s"
		usleep 100000
	done
}

expect_rc 0 graidctl create sy --level 5 --chunk 64K --write-zeroes $d0 $d1 $d2 $d3
dev=$(array_dev "$OUT")
sys=/sys/block/${dev#/dev/}/graid
[ -d "$sys" ] || fail "no $sys"

echo "--- every file reads as detail says"
for f in level raid_disks chunk_size component_size array_state state degraded sync_action \
	sync_completed sync_speed sync_speed_min sync_speed_max mismatch_cnt consistency_policy \
	bitmap_regions bitmap_dirty ppl_entries ppl_wraps spares name uuid events reshape_position; do
	[ -f "$sys/$f" ] || fail "no $f"
	attr $f >/dev/null
done
[ "$(ls "$sys" | wc -l)" = 27 ] || fail "$sys holds $(ls "$sys" | tr '\n' ' ')"
same level raid5
same raid_disks 4
same chunk_size 65536
# Three members' worth of data: each holds a third of the array, in KiB.
same component_size $(($(json size_sectors) / 3 / 2))
json_text=$(graidctl --json detail sy)
same state "$(json state)"
same state optimal
same degraded 0
same sync_action idle
same sync_completed none
same reshape_position none
same sync_speed none
same name sy
same uuid "$(json uuid)"
same events "$(json events)"
same spares none
policy=resync
echo "$json_text" | grep -q '"bitmap": *{' && policy=bitmap
echo "$json_text" | grep -q '"ppl": *{' && policy=ppl
same consistency_policy $policy
echo "consistency_policy: $policy"
if echo "$json_text" | grep -q '"bitmap": *{'; then
	same bitmap_regions "$(json regions)"
fi
for role in 0 1 2 3; do
	eval m=\$d$role
	same rd$role/state in_sync
	same rd$role/slot $role
	same rd$role/dev "$(cat /sys/class/block/${m#/dev/}/dev)"
	same rd$role/errors 0
	same rd$role/recovery_start none
done
[ -e "$sys/rd4" ] && fail "rd4 exists for 4 members"

echo "--- sync_speed_min/max"
echo 500 >"$sys/sync_speed_min" || fail "sync_speed_min refused 500"
echo 1000 >"$sys/sync_speed_max" || fail "sync_speed_max refused 1000"
same sync_speed_min 500
same sync_speed_max 1000
expect_rc 0 graidctl --json set-speed sy
expect_match '"min_kib_per_sec": *500' "$OUT" "set-speed's floor"
expect_match '"max_kib_per_sec": *1000' "$OUT" "set-speed's cap"
refused sync_speed_max 100
refused sync_speed_min fast
refused sync_speed_min -5
refused sync_speed_max 99999999999
same sync_speed_min 500
same sync_speed_max 1000

echo "--- sync_action: check starts, reads check, idle stops it"
refused sync_action resync
refused sync_action frozen
echo check >"$sys/sync_action" || fail "sync_action refused check"
same sync_action check
expect_rc 0 graidctl --json detail sy
expect_match '"action": *"check"' "$OUT" "detail of the check sync_action started"
expect_match '^[0-9]+ / [0-9]+$' "$(attr sync_completed)" "sync_completed of a running check"
expect_match '^[0-9]+$' "$(attr sync_speed)" "sync_speed of a running check"
echo idle >"$sys/sync_action" || fail "sync_action refused idle"
until_reads sync_action idle 10

echo "--- a full check finds the 8 sectors scribbled on stripe 0's parity"
dd if=/dev/urandom of=$d3 bs=4096 count=1 seek=$(((4096 + 16) / 8)) oflag=direct conv=notrunc 2>/dev/null
echo 0 >"$sys/sync_speed_max"
echo check >"$sys/sync_action"
until_reads sync_action idle 120
same mismatch_cnt 8
same mismatch_cnt "$(json mismatch_sectors)"
echo repair >"$sys/sync_action"
until_reads sync_action idle 120

echo "--- a member fails, is added back and rebuilt"
expect_rc 0 graidctl fail sy $d2
same rd2/state faulty
same degraded 1
same state degraded
same array_state "$(json dirty | sed 's/true/active/;s/false/clean/')"
expect_rc 0 graidctl remove sy $d2
same rd2/state missing
same rd2/dev none
wipe_superblocks $d2
echo 1000 >"$sys/sync_speed_max"
expect_rc 0 graidctl add sy $d2
same rd2/state spare
same sync_action recover
expect_match '^[0-9]+ / [0-9]+$' "$(attr sync_completed)" "sync_completed of a rebuild"
expect_match '^[0-9]+$' "$(attr rd2/recovery_start)" "recovery_start of a rebuild"
[ "$(attr sync_completed | cut -d' ' -f3)" = "$(json total_sectors)" ] ||
	fail "sync_completed '$(attr sync_completed)' against detail's total $(json total_sectors)"
echo 0 >"$sys/sync_speed_max"
wait_rebuilt sy 120
same rd2/state in_sync
same degraded 0
same sync_action idle
expect_rc 0 graidctl stop sy
[ -e "$sys" ] && fail "$sys outlived the array"

echo "--- RAID 1 and RAID 0"
wipe_superblocks $d0 $d1 $d2 $d3
expect_rc 0 graidctl create sy1 --level 1 --write-zeroes $d0 $d1
sys=/sys/block/$(array_dev "$OUT" | sed 's|/dev/||')/graid
expect_rc 0 graidctl create sy0 --level 0 --chunk 64K $d2 $d3
sys0=/sys/block/$(array_dev "$OUT" | sed 's|/dev/||')/graid
same level raid1
same chunk_size 0
expect_match '^(bitmap|resync)$' "$(attr consistency_policy)" "RAID 1's policy"
[ "$(cat "$sys0/consistency_policy")" = none ] || fail "RAID 0's policy: $(cat "$sys0/consistency_policy")"
[ "$(cat "$sys0/level")" = raid0 ] || fail "RAID 0's level: $(cat "$sys0/level")"
err=$( (echo check >"$sys0/sync_action") 2>&1) && fail "a RAID 0 took a check"
expect_match "not supported" "$err" "check on a RAID 0"
expect_rc 0 graidctl stop sy1
expect_rc 0 graidctl stop sy0

echo "--- idle stops a check or a repair, never a resync the array needs (md's semantics)"
wipe_superblocks $d0 $d1 $d2 $d3
expect_rc 0 graidctl create sy2 --level 1 $d0 $d1
sys=/sys/block/$(array_dev "$OUT" | sed 's|/dev/||')/graid
echo 1000 >"$sys/sync_speed_max"
until_reads sync_action resync 10
echo idle >"$sys/sync_action" || fail "sync_action refused idle"
same sync_action resync
expect_rc 0 graidctl check --stop sy2
same sync_action resync
echo 0 >"$sys/sync_speed_max"
until_reads sync_action idle 120
same sync_completed none
expect_rc 0 graidctl stop sy2
wipe_superblocks $d0 $d1 $d2 $d3
kmemleak_check
