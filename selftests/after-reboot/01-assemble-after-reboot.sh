# After a reboot (a new VM boot on the same drive images, the array left running at power-off)
# the array is found and assembled from its superblocks alone, with its data intact; it was
# not stopped cleanly, so its copies are not known to be in sync, and that stays so across a
# stop and another assembly (until a resync, a later feature).
. /graid/lib.sh
load_module
expect_rc 0 graidctl assemble --scan
echo "$OUT"
expect_rc 0 graidctl --json detail survivor
expect_match '"level": "raid10"' "$OUT" "level after reboot"
dev=$(echo "$OUT" | grep -o '/dev/graid[0-9]*' | head -n 1)
[ -b "$dev" ] || dev=$(graidctl detail survivor | grep -o '/dev/graid[0-9]*' | head -n 1)
fio_readback "$dev" 0 40M randwrite 4k-512k "data lost across the reboot"
expect_rc 0 graidctl --json detail survivor
expect_match '"resync_pending": true' "$OUT" "sync state after an unclean shutdown"
expect_rc 0 graidctl stop survivor
expect_match 'dirty' "$(graidctl examine $(graid_nvme_disks | head -n 1) | grep -m1 'State :')" \
	"superblock after stopping an unsynced array"
expect_rc 0 graidctl assemble --scan
expect_rc 0 graidctl --json detail survivor
expect_match '"resync_pending": true' "$OUT" "sync state after the next assembly"
expect_rc 0 graidctl stop survivor
wipe_superblocks $(graid_nvme_disks)
unload_module
kmemleak_check
