# Day-to-day operation (issue 32):
# - nothing destroyed by mistake: create, add and replace --with refuse a device holding an ext4
#   filesystem, a GPT, an LVM physical volume or an md superblock (libblkid's signatures),
#   naming it, unless --force; a device in use (mounted, or held by a running md array) is
#   refused even with --force; nothing is written to a refused device; mkfs.ext4 over a member
#   of a running array is refused (the module holds it exclusively);
# - graidctl metrics: Prometheus text that promtool accepts, on a live array with a rebuild
#   running, whose values are detail's; --output replaces a file whole.
. /graid/lib.sh
need_members 4
set -- $members
d0=$1 d1=$2 d2=$3 d3=$4

# no_arrays: nothing was created by a refused verb.
no_arrays() { expect_rc 0 graidctl list; expect_match 'no graid arrays are running' "$OUT" "$1"; }
# blank DEV...: no signature, no superblock (wipefs erases what libblkid finds, at both GPT ends).
blank() {
	for d in "$@"; do wipefs -a -q "$d" || fail "wipefs $d"; done
	wipe_superblocks "$@"
}
# signature DEV: what blkid says the device holds.
signature() { blkid -p -o value -s TYPE "$1" 2>/dev/null || blkid -p -o value -s PTTYPE "$1"; }

echo "--- create refuses signatures without --force"
blank $d0 $d1 $d2 $d3
mkfs.ext4 -q -F -L precious $d0 || fail "mkfs.ext4"
expect_rc 1 graidctl create s --level 1 $d0 $d1
expect_match "$d0 holds an ext4 signature \(label \"precious\"\).*use --force" "$OUT" "create over ext4"
no_arrays "create over ext4 made an array"
[ "$(signature $d0)" = ext4 ] || fail "the refused create touched the filesystem: $(signature $d0)"

echo 'label: gpt' | sfdisk -q $d1 >/dev/null 2>&1 || fail "sfdisk"
blank $d0
expect_rc 1 graidctl create s --level 1 $d0 $d1
expect_match "$d1 holds a gpt partition table" "$OUT" "create over a GPT"
no_arrays "create over a GPT made an array"

blank $d1
mkdir -p /run/lock/lvm
lvm pvcreate -q -y --config 'devices { use_devicesfile = 0 obtain_device_list_from_udev = 0 }' \
	$d2 >/tmp/pv.out 2>&1 || { cat /tmp/pv.out; fail "pvcreate"; }
expect_rc 1 graidctl create s --level 5 --chunk 64K $d0 $d1 $d2
expect_match "$d2 holds an LVM physical volume" "$OUT" "create over an LVM PV"
no_arrays "create over an LVM PV made an array"

blank $d2
mdadm --create /dev/md9 --run --level=1 --raid-devices=2 --metadata=1.2 $d2 $d3 \
	>/tmp/md.out 2>&1 || { cat /tmp/md.out; fail "mdadm --create"; }
echo "--- a device in use is refused even with --force"
expect_rc 1 graidctl create s --level 1 --force $d0 $d2
expect_match "$d2 is in use: held by /dev/md9; not even --force" "$OUT" "create over a running md member"
no_arrays "create over a running md member made an array"
mdadm --stop /dev/md9 >/dev/null 2>&1 || fail "mdadm --stop"
expect_rc 1 graidctl create s --level 1 $d0 $d2
expect_match "$d2 holds an md RAID member superblock" "$OUT" "create over an md member"
no_arrays "create over an md member made an array"

mkfs.ext4 -q -F $d1 || fail "mkfs.ext4"
mkdir -p /mnt/busy
mount $d1 /mnt/busy || fail "mount"
expect_rc 1 graidctl create s --level 1 --force $d0 $d1
expect_match "$d1 is in use: mounted on /mnt/busy; not even --force" "$OUT" "create over a mounted filesystem"
no_arrays "create over a mounted filesystem made an array"
umount /mnt/busy

echo "--- --force takes the signatures"
expect_rc 0 graidctl create s --level 1 --force --write-zeroes $d1 $d2
dev=$(array_dev "$OUT")
fio_verify "$dev" 0 8M randwrite 4k-64k

echo "--- add and replace --with refuse signatures too"
mkfs.ext4 -q -F $d3 || fail "mkfs.ext4"
expect_rc 1 graidctl add s $d3
expect_match "$d3 holds an ext4 signature; adding it destroys that" "$OUT" "add over ext4"
expect_match '"spares":\[\]' "$(graidctl --json detail s | tr -d '\n ')" "a refused add added"
expect_rc 1 graidctl replace s $d1 --with $d3
expect_match "$d3 holds an ext4 signature; replacing a member by it" "$OUT" "replace --with over ext4"
expect_match '"spares":\[\]' "$(graidctl --json detail s | tr -d '\n ')" "a refused replace added"
expect_rc 0 graidctl add --force s $d3
expect_match "added $d3 .*spare" "$OUT" "add --force"
# A member of the array itself still gets the module's own answer.
expect_rc 1 graidctl add s $d1
expect_match 'is a member already' "$OUT" "adding a member"
# mkfs over a running array's member is refused: the module holds it open exclusively.
err=$(mkfs.ext4 -q -F $d1 2>&1) && fail "mkfs.ext4 formatted a member of a running array"
expect_match "in use" "$err" "mkfs.ext4 on a member"

echo "--- metrics on a live array with a rebuild running"
expect_rc 0 graidctl set-speed s --min 512K --max 512K
expect_rc 0 graidctl fail s $d2
# The spare ($d3) takes role 1's place and is rebuilt, slowly.
n=0
until graidctl --json detail s | tr -d '\n ' | grep -q '"rebuild":{'; do
	n=$((n + 1)); [ $n -le 50 ] || fail "no rebuild started: $(graidctl detail s)"
	usleep 200000
done
graidctl metrics >/tmp/metrics.prom || fail "graidctl metrics failed"
promtool check metrics </tmp/metrics.prom >/tmp/promtool.out 2>&1 ||
	{ cat /tmp/promtool.out; fail "promtool rejects graidctl metrics"; }
i=${dev#/dev/}
m() { grep -E "^$1 " /tmp/metrics.prom | awk '{print $2}'; }
[ "$(m "graid_sync_action\{device=\"$i\",action=\"recover\"\}")" = 1 ] ||
	{ cat /tmp/metrics.prom; fail "metrics: no recover action during the rebuild"; }
[ "$(m "graid_array_state\{device=\"$i\",state=\"degraded\"\}")" = 1 ] || fail "metrics: not degraded"
# (The failed member's device was released as the spare took its place.)
[ "$(m "graid_array_members\{device=\"$i\",state=\"rebuilding\"\}")" = 1 ] || fail "metrics: no rebuilding member"
[ "$(m "graid_array_spares\{device=\"$i\"\}")" = 0 ] || fail "metrics: the spare is still counted"
ratio=$(m "graid_sync_completed_ratio\{device=\"$i\"\}")
awk "BEGIN { exit !($ratio > 0 && $ratio < 1) }" || fail "metrics: sync ratio $ratio during the rebuild"
# The member counters are detail's.
writes=$(graidctl --json detail s | tr -d '\n ' | sed -n 's/.*"role":0,[^}]*"writes":\([0-9]*\).*/\1/p')
got=$(m "graid_member_writes_total\{device=\"$i\",role=\"0\",member=\"${d1#/dev/}\"\}")
[ -n "$writes" ] && [ "$got" -ge "$writes" ] || fail "metrics: role 0 writes $got, detail said $writes"
expect_rc 0 graidctl metrics --output /tmp/graid.prom
promtool check metrics </tmp/graid.prom >/dev/null 2>&1 || fail "promtool rejects the --output file"
[ "$(ls /tmp/graid.prom* | wc -l)" = 1 ] || fail "metrics --output left files: $(ls /tmp/graid.prom*)"
expect_rc 0 graidctl set-speed s --min 100M --max 1G
expect_rc 0 graidctl wait s
fio_readback "$dev" 0 8M randwrite 4k-64k "data lost across the rebuild"
expect_rc 0 graidctl stop s
blank $d0 $d1 $d2 $d3
kmemleak_check
