# The VM has the requested number of emulated NVMe drives, each of the requested size.
. /graid/lib.sh
disks=$(graid_nvme_disks)
count=$(echo "$disks" | grep -c nvme)
echo "NVMe drives: $(echo $disks)"
[ "$count" = "$GRAID_DISKS" ] || fail "found $count graid NVMe drives, expected $GRAID_DISKS"
want=$((GRAID_DISK_SIZE_MB * 2048))
for d in $disks; do
	[ -b "$d" ] || fail "$d is not a block device"
	sectors=$(cat /sys/class/block/${d#/dev/}/size)
	[ "$sectors" = "$want" ] || fail "$d has $sectors sectors, expected $want"
done
