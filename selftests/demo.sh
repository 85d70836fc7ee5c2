# graid demo (make demo), run inside the test VM: create a RAID 1 and a RAID 0 on emulated NVMe
# drives, write and verify data, show them, repair a mirror's read errors, survive a dead
# mirror member, remove it, stop and reassemble (the mirror degraded), add a member back and
# rebuild it under writes, then read everything from the rebuilt member alone; a spare added to
# the mirror takes a failed member's place by itself and is rebuilt, and a member is replaced
# under writes (the array never loses redundancy); then a RAID 6
# that loses a member in the middle of a verified write, and a second one failed by hand, and
# keeps serving from parity.
. /graid/lib.sh
step() { printf '\n=== %s\n' "$*"; }
run() { echo "# $*"; "$@" || exit 1; }
# read_back_without MEMBER WHO: fails the mirror's MEMBER and reads all 64 MiB written to it
# back from WHO, the other copy.
read_back_without() {
	run graidctl fail mirror "$1"
	echo 3 >/proc/sys/vm/drop_caches
	fio_readback "$mirror" 0 32M randwrite 4k-256k "DATA LOST"
	fio_readback "$mirror" 32M 16M randwrite 4k-256k "DATA LOST"
	fio_readback "$mirror" 48M 16M randwrite 4k-256k "DATA LOST"
	echo "all 64 MiB read back correctly from $2"
}

step "Loading raid_gpu"
# offload_balance=0: RAID 6 parity goes to the helper whenever it runs (by default each job
# goes to the faster side, which under emulation is mostly the kernel).
modprobe raid_gpu offload_balance=0 || exit 1
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

step "Create a RAID 1 (mirror) on $1 and $2 (behind device-mapper, to fail it later) and a RAID 0 (stripe) on $3 $4"
modprobe dm-dust
export DM_DISABLE_UDEV=1
sectors=$(cat /sys/class/block/${2#/dev/}/size)
dmsetup --noudevsync create m1 --table "0 $sectors dust $2 0 4096"
# New blank drives: the mirrors hold the same (zero) data, so they start in sync.
run graidctl create mirror --level 1 --assume-clean "$1" /dev/mapper/m1
run graidctl create stripe --level 0 --chunk 64K "$3" "$4"
run graidctl list
udevadm settle 2>/dev/null
ls -l /dev/graid/ 2>/dev/null

step "Write 32 MiB to each with fio and verify every block (crc32c)"
for a in mirror stripe; do
	dev=$(graidctl detail $a | grep -o '/dev/graid[0-9]*' | head -n 1)
	fio_verify "$dev" 0 32M randwrite 4k-256k
	echo "$a ($dev): 32 MiB written, then every block verified by a second reader"
done
run graidctl detail mirror
mirror=$(graidctl detail mirror | grep -o '/dev/graid[0-9]*' | head -n 1)

step "Mirror member $2 grows bad blocks: reads fail there, graid repairs them from the other copy"
for b in 600 1500 3000 4500 6000 7000 8000; do dmsetup message m1 0 addbadblock $b >/dev/null; done
dmsetup message m1 0 enable >/dev/null
fio_readback "$mirror" 0 32M randwrite 4k-256k "DATA LOST" && echo "all 32 MiB still read back correctly"
echo "bad blocks left on $2: $(dmsetup message m1 0 countbadblocks 2>&1)"
run graidctl detail mirror

step "Mirror member $2 dies (every I/O fails) while we write: it is failed, the mirror goes on"
dmsetup load m1 --table "0 $sectors error" && dmsetup resume m1
fio_verify "$mirror" 32M 16M randwrite 4k-256k
echo "16 MiB more written and verified with one member dead"
run graidctl detail mirror
run graidctl examine "$1"

step "Remove the dead member from the mirror (its device is released)"
run graidctl remove mirror /dev/mapper/m1
dmsetup --noudevsync remove m1

step "Stop everything and assemble again from the superblocks: the mirror only with --run"
run graidctl stop mirror
run graidctl stop stripe
run graidctl assemble stripe "$3" "$4"
echo "# graidctl assemble mirror $1"
graidctl assemble mirror "$1" && exit 1
run graidctl assemble mirror --run "$1"
mirror=$(graidctl detail mirror | grep -o '/dev/graid[0-9]*' | head -n 1)
fio_readback "$mirror" 0 32M randwrite 4k-256k "DATA LOST"
fio_readback "$mirror" 32M 16M randwrite 4k-256k "DATA LOST"
echo "the degraded mirror reads back all 48 MiB written"
run graidctl list
step "Add $2 back in the removed member's place and rebuild it while fio writes"
fio --name=write $(fio_args "$mirror" 48M 16M randwrite 4k-256k) >/tmp/fio.out 2>&1 &
writer=$!
run graidctl add mirror "$2"
# Into a file (not a terminal): graidctl wait prints a line per 10 % instead of a bar.
echo "# graidctl wait mirror"
graidctl wait mirror >/tmp/wait.out 2>&1 || { cat /tmp/wait.out; exit 1; }
cat /tmp/wait.out
wait $writer || { cat /tmp/fio.out; echo "DATA LOST"; exit 1; }
echo "16 MiB written and verified during the rebuild"
run graidctl detail mirror
step "Fail $1: the rebuilt member alone holds the data now; read all 64 MiB back from it"
read_back_without "$1" "the rebuilt member"

step "A spare: $3 leaves the stripe and joins the mirror; it takes failed $1's place by itself"
run graidctl stop stripe
run graidctl zero-superblock "$3"
run graidctl add mirror "$3"
# The takeover runs in the background (it waits for the mirror's I/O to drain first).
n=0
until graidctl --json detail mirror | grep -q '"spares": \[\]'; do
	n=$((n + 1))
	[ $n -le 300 ] || { graidctl detail mirror; echo "the spare never took over"; exit 1; }
	usleep 100000
done
echo "# graidctl wait mirror"
graidctl wait mirror >/tmp/wait.out 2>&1 || { cat /tmp/wait.out; exit 1; }
cat /tmp/wait.out
run graidctl detail mirror
step "Replace $2 by $4 while fio writes: $2 serves until $4 holds everything, then leaves"
run graidctl zero-superblock "$4"
fio --name=write $(fio_args "$mirror" 64M 16M randwrite 4k-256k) >/tmp/fio.out 2>&1 &
writer=$!
echo "# graidctl replace --wait mirror $2 --with $4"
graidctl replace --wait mirror "$2" --with "$4" >/tmp/wait.out 2>&1 || { cat /tmp/wait.out; exit 1; }
cat /tmp/wait.out
wait $writer || { cat /tmp/fio.out; echo "DATA LOST"; exit 1; }
echo "16 MiB written and verified during the replace"
run graidctl detail mirror
step "Fail $3: the replacement alone holds the data now; read all 64 MiB back from it"
read_back_without "$3" "the replacement"
fio_readback "$mirror" 64M 16M randwrite 4k-256k "DATA LOST" &&
	echo "and the 16 MiB written during the replace"
run graidctl stop mirror
wipe_superblocks "$@"

step "Create a RAID 6 (P+Q parity, md's layout and math) on all four drives, $4 behind device-mapper"
sectors=$(cat /sys/class/block/${4#/dev/}/size)
dmsetup --noudevsync create m4 --table "0 $sectors linear $4 0"
run graidctl create parity --level 6 --chunk 64K --assume-clean "$1" "$2" "$3" /dev/mapper/m4
raid6=$(graidctl detail parity | grep -o '/dev/graid[0-9]*' | head -n 1)

step "Start graid-helper: RAID 6 full-stripe parity goes to it; SIGKILL it mid-write, start it again"
# helper_state: the helper's state as the module reports it.
helper_state() { graidctl --json helper | sed -n 's/.*"state": *"\([a-z-]*\)".*/\1/p'; }
start_helper() {
	graid-helper run --threads 2 --pool-mib 16 >/dev/null 2>>/tmp/helper.log </dev/null &
	helper=$!
	n=0
	until [ "$(helper_state)" = healthy ]; do
		n=$((n + 1))
		[ $n -le 200 ] || { cat /tmp/helper.log; echo "the helper did not attach"; exit 1; }
		usleep 100000
	done
}
start_helper
run graidctl helper
fio --name=write $(fio_args "$raid6" 40M 32M write 1m-1m) --do_verify=0 --rate=8m >/tmp/fio.out 2>&1 &
writer=$!
sleep 2
echo "# kill -9 graid-helper (pid $helper), fio still writing"
kill -9 $helper
wait $helper 2>/dev/null
run graidctl detail parity
start_helper
echo "graid-helper started again (pid $helper)"
wait $writer || { cat /tmp/fio.out; echo "DATA LOST"; exit 1; }
fio_readback "$raid6" 40M 32M write 1m-1m "DATA LOST" &&
	echo "all 32 MiB written across the kill and the restart read back correctly"
run graidctl helper
echo "# kill -TERM graid-helper: it detaches and exits"
kill -TERM $helper
wait $helper || { cat /tmp/helper.log; exit 1; }
cat /tmp/helper.log

step "Write 24 MiB with verification; member $4 dies in the middle of it"
fio_verify "$raid6" 0 24M randwrite 4k-256k &
writer=$!
sleep 3
dmsetup load m4 --table "0 $sectors error" && dmsetup --noudevsync resume m4
echo "member $4 now fails every I/O"
wait $writer || { echo "DATA LOST"; exit 1; }
echo "all 24 MiB written and verified while a member died"
run graidctl detail parity

step "Fail a second member by hand: RAID 6 keeps serving with two members gone"
run graidctl fail parity "$3"
echo "# graidctl fail parity $1   (would leave data without parity: refused)"
graidctl fail parity "$1" && exit 1

step "Keep going degraded: read everything back (rebuilt from parity) and write 8 MiB more"
echo 3 >/proc/sys/vm/drop_caches
fio_readback "$raid6" 0 24M randwrite 4k-256k "DATA LOST" && echo "24 MiB read back correctly"
fio_verify "$raid6" 24M 8M write 64k-1m
echo "8 MiB more written and verified on the degraded RAID 6"
run graidctl stop parity
dmsetup --noudevsync remove m4
wipe_superblocks "$@"
unload_module
echo
echo "demo finished: create, write, verify, read errors repaired, member failure and removal,"
echo "stop, assemble (degraded with --run), add and rebuild under writes, read back from the"
echo "rebuilt member; a spare taking a failed member's place by itself; a member replaced under"
echo "writes and read back from the replacement alone; RAID 6 parity offloaded to graid-helper,"
echo "the helper killed and restarted under writes; RAID 6 losing a member in the middle of a"
echo "verified write and a second by hand, read back from parity"
