# graid demo (make demo), run inside the test VM: create a RAID 1 and a RAID 0 on emulated NVMe
# drives, write and verify data, show them, survive a failing mirror, stop and reassemble.
# Later issues grow it into the full fail / rebuild / verify story.
. /graid/lib.sh
step() { printf '\n=== %s\n' "$*"; }
run() { echo "# $*"; "$@" || exit 1; }

step "Loading raid_gpu"
load_module
graidctl version || exit 1

set -- $(graid_nvme_disks)
[ $# -ge 4 ] || { echo "the demo needs 4 NVMe drives"; exit 1; }
step "NVMe drives in this VM"
for d in "$@"; do
	n=${d#/dev/}
	printf '%-14s %6s MiB  serial %s\n' "$d" $(($(cat /sys/class/block/$n/size) / 2048)) \
		"$(tr -d ' ' </sys/class/nvme/${n%n[0-9]*}/serial)"
done
wipe_superblocks "$@"

step "Create a RAID 1 (mirror) on $1 $2 and a RAID 0 (stripe) on $3 $4"
run graidctl create mirror --level 1 "$1" "$2"
run graidctl create stripe --level 0 --chunk 64K "$3" "$4"
run graidctl list
udevadm settle 2>/dev/null
ls -l /dev/graid/ 2>/dev/null

step "Write 32 MiB to each with fio and verify every block (crc32c)"
for a in mirror stripe; do
	dev=$(graidctl detail $a | grep -o '/dev/graid[0-9]*' | head -n 1)
	fio_verify "$dev" 0 32M randwrite 4k-256k
	echo "$a ($dev): 32 MiB written and verified, then verified again by a second reader"
done
run graidctl detail mirror

step "Mirror member $2 starts failing reads (dm-dust bad blocks under it)"
run graidctl stop mirror
modprobe dm-dust
export DM_DISABLE_UDEV=1
dmsetup --noudevsync create dust --table "0 $(cat /sys/class/block/${2#/dev/}/size) dust $2 0 4096"
run graidctl assemble "$1" /dev/mapper/dust
for b in 600 1500 3000 4500 6000; do dmsetup message dust 0 addbadblock $b >/dev/null; done
dmsetup message dust 0 enable >/dev/null
dev=$(graidctl detail mirror | grep -o '/dev/graid[0-9]*' | head -n 1)
fio_readback "$dev" 0 32M randwrite 4k-256k "DATA LOST" && echo "all 32 MiB still read back correctly"
run graidctl detail mirror

step "Stop everything and assemble the stripe again from its superblocks"
run graidctl stop mirror
dmsetup --noudevsync remove dust
run graidctl stop stripe
run graidctl assemble "$3" "$4"
run graidctl list
echo "(the mirror's failed member is stale now: degraded assembly and rebuild come next)"
run graidctl stop stripe
wipe_superblocks "$@"
unload_module
echo
echo "demo finished: create, write, verify, member failure, stop, assemble"
