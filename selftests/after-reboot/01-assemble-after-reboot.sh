# After a reboot (a new VM boot on the same drive images, the arrays left running at
# power-off) a RAID 10 and a RAID 6 are found and assembled from their superblocks alone, with
# their data intact; the RAID 10's rebuild goes on from its last checkpoint and completes, and
# its data then reads back through the rebuilt member. They were idle at power-off, so their
# superblocks said "clean" (a quiet period after the last write marks an array clean): no
# resync is needed, and none runs, across this assembly and the next.
. /graid/lib.sh
load_module
# survivor's member being rebuilt at power-off: its superblock holds the last checkpoint, not
# "complete". Found by what the superblocks say (NVMe names may change across boots).
rebuilding=
for d in $(graid_nvme_disks); do
	sb=$(graidctl examine $d 2>/dev/null) || continue
	echo "$sb" | grep -Eq 'Name : survivor$' || continue
	echo "$sb" | grep -Eq 'Recovery Offset : [0-9]+ sectors in sync' && rebuilding=$d
done
[ -n "$rebuilding" ] || fail "no member of survivor held a rebuild checkpoint at power-off"
echo "$rebuilding was being rebuilt at power-off"
expect_rc 0 graidctl assemble --scan
echo "$OUT"
for name in survivor survivor6; do
	expect_rc 0 graidctl --json detail $name
	dev=$(graidctl detail $name | grep -o '/dev/graid[0-9]*' | head -n 1)
	[ -b "$dev" ] || fail "no block device for $name after reboot"
	case $name in
	survivor)
		expect_match '"level": "raid10"' "$OUT" "level after reboot"
		expect_rc 0 graidctl wait survivor
		expect_match 'finished|no rebuild' "$OUT" "the rebuild resumed after the reboot"
		# Its mirror partner (roles 2k and 2k+1 hold the same data) leaves: the rebuilt
		# member alone serves that half.
		list=$(graidctl --json detail survivor | tr -d '\n ' | sed 's/.*"members":\[//; s/},{/}\n{/g')
		role=$(echo "$list" | grep "\"device\":\"$rebuilding\"" | sed -n 's/.*"role":\([0-9]*\).*/\1/p')
		[ -n "$role" ] || fail "$rebuilding is not in survivor after the reboot: $list"
		partner=$(echo "$list" | grep "\"role\":$((role ^ 1))," | sed -n 's/.*"device":"\([^"]*\)".*/\1/p')
		expect_rc 0 graidctl fail survivor $partner
		fio_readback "$dev" 0 40M randwrite 4k-512k "RAID 10 data lost across the reboot"
		;;
	survivor6)
		expect_match '"level": "raid6"' "$OUT" "level after reboot"
		expect_match '"chunk_bytes": 65536' "$OUT" "chunk after reboot"
		fio_readback "$dev" 0 24M randwrite 4k-512k "RAID 6 data lost across the reboot"
		;;
	esac
	expect_rc 0 graidctl --json detail $name
	expect_match '"resync_pending": false' "$OUT" "$name's sync state after an idle power-off"
	expect_rc 0 graidctl stop $name
done
expect_match 'State : clean$' "$(graidctl examine $(graid_nvme_disks | head -n 1) | grep -m1 'State :')" \
	"superblock after a stop"
# --run: a member of survivor was failed above.
expect_rc 0 graidctl assemble --scan --run
for name in survivor survivor6; do
	expect_rc 0 graidctl --json detail $name
	expect_match '"resync_pending": false' "$OUT" "$name's sync state after the next assembly"
	expect_rc 0 graidctl stop $name
done
wipe_superblocks $(graid_nvme_disks)
unload_module
