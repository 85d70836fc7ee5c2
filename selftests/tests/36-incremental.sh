# Arrays start by themselves as their members appear (tools/udev/64-graid-assembly.rules under
# the real systemd-udevd, md's --incremental): a member that appears alone is marked
# graid_member and waits, loading the module if need be; the array starts once every member is
# here, once, however many appear together; a stopped array stays stopped; an array missing a
# member is started degraded by what graid-last-resort@UUID.service runs, serves the data
# written before, and takes the member back with re-add. An array recording another host
# (mdadm's homehost) is left alone until graid.conf or --any-host says otherwise.
. /graid/lib.sh
pidof systemd-udevd >/dev/null || skip "systemd-udevd is not running"
need_members 3
set -- $members
export DM_DISABLE_UDEV=1

rules=/lib/udev/rules.d/64-graid-assembly.rules
cp /graid/udev-assembly/64-graid-assembly.rules $rules
udevadm control --reload
# This host's name, recorded by create as the arrays' home host.
host=$(cat /proc/sys/kernel/hostname)
echo node-a >/proc/sys/kernel/hostname
trap 'rm -f $rules /etc/graid/graid.conf; udevadm control --reload; echo "$host" >/proc/sys/kernel/hostname' EXIT

# The members are dm-linear slices 4 MiB into the drives (so the drives themselves hold no
# superblock): removing a slice makes a member disappear, creating it again makes it appear.
d0=$1 d1=$2 d2=$3
attach() {
	for i in "$@"; do
		eval disk=\$d$i
		dmsetup --noudevsync create inc$i --table "0 131072 linear $disk 8192" ||
			fail "dmsetup create inc$i"
	done
}
detach() {
	udevadm settle
	for i in "$@"; do dmsetup --noudevsync remove inc$i || fail "dmsetup remove inc$i"; done
}
# appear I...: udev's "add" for each slice, at once, as a hot-plug or coldplug sends it (dm's
# own rules, absent here, would start the assembly on its activating "change").
appear() {
	for i in "$@"; do udevadm trigger --action=add /dev/mapper/inc$i & done
	wait
	udevadm settle --timeout=60
}
running() { graidctl list | grep -c '^/dev/graid'; }
m0=/dev/mapper/inc0 m1=/dev/mapper/inc1 m2=/dev/mapper/inc2

attach 0 1 2
wipe_superblocks $m0 $m1 $m2
expect_rc 0 graidctl create inc --level 5 --chunk 64K --assume-clean $m0 $m1 $m2
dev=$(array_dev "$OUT")
expect_rc 0 graidctl --json detail inc
uuid=$(json_field uuid "$OUT")
[ "$(json_field homehost "$OUT")" = node-a ] || fail "create did not record this host: $OUT"
fio_verify $dev 0 12M write 64k-64k
expect_rc 0 graidctl stop inc
udevadm settle
sleep 1
udevadm settle
[ "$(running)" = 0 ] || fail "the stopped array started again: $(graidctl list)"
detach 0 1 2

echo "--- one member appears, with the module not loaded: it waits"
unload_module
attach 0
appear 0
module_loaded || fail "the member's appearance did not load raid_gpu"
[ "$(running)" = 0 ] || fail "the array started with one member of three: $(graidctl list)"
props=$(udevadm info --query=property --name=$m0)
expect_match '^ID_FS_TYPE=graid_member$' "$props" "udev properties of a member"
expect_match "^GRAID_MEMBER_ARRAY_UUID=$uuid\$" "$props" "udev properties of a member"
expect_match '^ID_FS_LABEL=inc$' "$props" "udev properties of a member"
# lsblk -f reads udev's database: the member shows as graid's, with the array's name.
expect_match "^FSTYPE=\"graid_member\" LABEL=\"inc\" UUID=\"$uuid\"\$" "$(lsblk -P -n -d -o FSTYPE,LABEL,UUID $m0)" \
	"lsblk -f of a member"

echo "--- the other two appear together: the array starts once, complete"
attach 1 2
appear 1 2
[ "$(running)" = 1 ] || fail "not one array running: $(graidctl list)"
expect_rc 0 graidctl detail inc
echo "$OUT"
expect_match 'State : optimal' "$OUT" "the array started by udev"
dev=$(array_dev "$OUT")
[ -L /dev/graid/inc ] || fail "/dev/graid/inc is missing"
fio_readback $dev 0 12M write 64k-64k "data read back after udev started the array"
# A member appearing again for a running array changes nothing.
appear 0
[ "$(running)" = 1 ] || fail "a member's second appearance changed the arrays: $(graidctl list)"

echo "--- a member stays away: waiting, then started degraded (the last-resort unit's command)"
expect_rc 0 graidctl stop inc
detach 0 1 2
attach 0 1
appear 0 1
[ "$(running)" = 0 ] || fail "the array started with a member missing: $(graidctl list)"
expect_rc 0 graidctl assemble --scan --run --uuid $uuid
echo "$OUT"
expect_match 'assembled as /dev/graid[0-9]+ \(raid5, 2/3 members, degraded\)' "$OUT" "the last-resort start"
# Run again, as a second timer would: nothing changes.
expect_rc 0 graidctl assemble --scan --run --uuid $uuid
expect_match 'already running' "$OUT" "a second last-resort start"
dev=$(array_dev "$(graidctl detail inc)")
fio_readback $dev 0 12M write 64k-64k "data read back from the degraded array"
fio_verify $dev 12M 4M randwrite 4k-64k
# The missing member appears late: it is stale now, and stays out until re-added.
attach 2
appear 2
expect_rc 0 graidctl detail inc
expect_match 'State : degraded' "$OUT" "a stale member appearing late"
expect_rc 0 graidctl re-add inc $m2
wait_rebuilt inc 300
expect_rc 0 graidctl detail inc
expect_match 'State : optimal' "$OUT" "after re-add"
fio_readback $dev 0 12M write 64k-64k "data read back after the re-add"
fio_readback $dev 12M 4M randwrite 4k-64k "data written degraded, read back after the re-add"
expect_rc 0 graidctl check inc --wait
expect_match 'check finished: 0 mismatched sectors' "$OUT" "check after the re-add"

echo "--- another host's array: not started by itself"
expect_rc 0 graidctl stop inc
detach 0 1 2
echo node-b >/proc/sys/kernel/hostname
attach 0 1 2
appear 0 1 2
[ "$(running)" = 0 ] || fail "node-a's array started on node-b: $(graidctl list)"
expect_rc 0 graidctl assemble --incremental $m0
expect_match "belongs to host 'node-a' \(this is 'node-b'\): not started by itself" "$OUT" "incremental on node-b"
# Nor by the last-resort unit's command.
expect_rc 0 graidctl assemble --scan --run --uuid $uuid
expect_match "belongs to host 'node-a' .*not started; --any-host starts it" "$OUT" "last-resort start on node-b"
[ "$(running)" = 0 ] || fail "the last-resort start took node-a's array: $(graidctl list)"
expect_rc 0 graidctl examine $m1
expect_match 'Home Host : node-a' "$OUT" "examine"
expect_match '^GRAID_MEMBER_HOMEHOST=node-a$' "$(udevadm info --query=property --name=$m2)" "udev properties"
# By hand it starts.
expect_rc 0 graidctl assemble --scan --any-host --uuid $uuid
expect_match 'assembled as /dev/graid[0-9]+ \(raid5, 3/3 members, optimal\)' "$OUT" "--any-host"
expect_rc 0 graidctl stop inc
# graid.conf names the host: node-b answers to node-a and starts it by itself.
mkdir -p /etc/graid
echo "HOMEHOST node-a  # this rack's name" >/etc/graid/graid.conf
appear 0
[ "$(running)" = 1 ] || fail "HOMEHOST node-a did not start node-a's array: $(graidctl list)"
expect_rc 0 graidctl stop inc
# <ignore>: every array is this host's.
echo "HOMEHOST <ignore>" >/etc/graid/graid.conf
appear 1
[ "$(running)" = 1 ] || fail "HOMEHOST <ignore> did not start the array: $(graidctl list)"
expect_rc 0 graidctl stop inc
# An ARRAY line (detail --scan's) makes node-a's array this host's too.
expect_rc 0 graidctl assemble --scan --any-host --uuid $uuid
expect_rc 0 graidctl detail --scan
array_line=$OUT
expect_match "^ARRAY /dev/graid/inc UUID=$uuid level=raid5 members=3$" "$array_line" "detail --scan"
expect_rc 0 graidctl stop inc
echo "$array_line" >/etc/graid/graid.conf
appear 2
[ "$(running)" = 1 ] || fail "an ARRAY line did not start node-a's array: $(graidctl list)"
expect_rc 0 graidctl stop inc
# AUTO -all: only listed arrays start, even this host's own.
echo node-a >/proc/sys/kernel/hostname
echo "AUTO -all" >/etc/graid/graid.conf
expect_rc 0 graidctl assemble --incremental $m0
expect_match "is not listed in /etc/graid/graid.conf \(AUTO -all\): not started by itself" "$OUT" "AUTO -all"
[ "$(running)" = 0 ] || fail "AUTO -all started an unlisted array: $(graidctl list)"
printf 'AUTO -all\n%s\n' "$array_line" >/etc/graid/graid.conf
appear 0
[ "$(running)" = 1 ] || fail "AUTO -all did not start a listed array: $(graidctl list)"
expect_rc 0 graidctl stop inc
# A bad file is an error, not a guess.
echo "HOMEHOST a/b" >/etc/graid/graid.conf
expect_rc 1 graidctl assemble --incremental $m0
expect_match "graid.conf line 1: HOMEHOST 'a/b'" "$OUT" "a bad graid.conf"
rm /etc/graid/graid.conf
echo node-a >/proc/sys/kernel/hostname

echo "--- nothing for a device without a superblock"
wipe_superblocks $m0 $m1 $m2
expect_rc 0 graidctl assemble --incremental $m0
expect_match 'holds no graid superblock' "$OUT" "incremental on a blank device"
detach 0 1 2
unload_module
