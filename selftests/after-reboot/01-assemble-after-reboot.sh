# After a reboot (a new VM boot on the same drive images, the arrays left running at
# power-off) a RAID 10 and a RAID 6 are found and assembled from their superblocks alone, with
# their data intact; the RAID 10's rebuild goes on from its last checkpoint and completes, and
# its data then reads back through the rebuilt member; they were not stopped cleanly, so their copies and parity are not known
# to be in sync, and that stays so across a stop and another assembly (until a resync, a
# later feature).
. /graid/lib.sh
load_module
expect_rc 0 graidctl assemble --scan
echo "$OUT"
for name in survivor survivor6; do
	expect_rc 0 graidctl --json detail $name
	dev=$(graidctl detail $name | grep -o '/dev/graid[0-9]*' | head -n 1)
	[ -b "$dev" ] || fail "no block device for $name after reboot"
	case $name in
	survivor)
		expect_match '"level": "raid10"' "$OUT" "level after reboot"
		set -- $(graid_nvme_disks)
		graidctl examine $4 | grep 'Recovery Offset'
		expect_rc 0 graidctl wait survivor
		expect_match 'finished|no rebuild' "$OUT" "the rebuild resumed after the reboot"
		expect_rc 0 graidctl fail survivor $3
		fio_readback "$dev" 0 40M randwrite 4k-512k "RAID 10 data lost across the reboot"
		;;
	survivor6)
		expect_match '"level": "raid6"' "$OUT" "level after reboot"
		expect_match '"chunk_bytes": 65536' "$OUT" "chunk after reboot"
		fio_readback "$dev" 0 24M randwrite 4k-512k "RAID 6 data lost across the reboot"
		;;
	esac
	expect_rc 0 graidctl --json detail $name
	expect_match '"resync_pending": true' "$OUT" "$name's sync state after an unclean shutdown"
	expect_rc 0 graidctl stop $name
done
expect_match 'dirty' "$(graidctl examine $(graid_nvme_disks | head -n 1) | grep -m1 'State :')" \
	"superblock after stopping an unsynced array"
# --run: survivor's third member was failed above.
expect_rc 0 graidctl assemble --scan --run
for name in survivor survivor6; do
	expect_rc 0 graidctl --json detail $name
	expect_match '"resync_pending": true' "$OUT" "$name's sync state after the next assembly"
	expect_rc 0 graidctl stop $name
done
wipe_superblocks $(graid_nvme_disks)
unload_module
kmemleak_check
