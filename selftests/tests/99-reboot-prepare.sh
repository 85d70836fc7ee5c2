# Leaves a RAID 10 and a RAID 6 with verified data running when the VM powers off, for
# after-reboot/01-assemble-after-reboot.sh to find on the next boot. Runs last. Created in
# sync and idle at the power-off (writes while the machine dies are the crash rounds' part:
# selftests/crash.sh), so their superblocks say "clean" then. The RAID 10 is in the
# middle of rebuilding its last member (capped at 1 MiB/s: its 254 MiB would take minutes),
# which must resume from its last checkpoint after the reboot. No bitmap on it: with one, adding
# the member back rebuilds only what its bits mark, and once they are cleared (on the slower
# debug kernel, before the add) that is nothing.
. /graid/lib.sh
need_members 8
set -- $members
expect_rc 0 graidctl create survivor --level 10 --chunk 256K --assume-clean --bitmap none $1 $2 $3 $4
dev=$(echo "$OUT" | grep -o '/dev/graid[0-9]*' | head -n 1)
fio_verify "$dev" 0 40M randwrite 4k-512k
expect_rc 0 graidctl fail survivor $4
expect_rc 0 graidctl remove survivor $4
expect_rc 0 graidctl set-speed survivor --min 1M --max 1M
expect_rc 0 graidctl add survivor $4
expect_rc 0 graidctl create survivor6 --level 6 --chunk 64K --write-zeroes $5 $6 $7 $8
dev6=$(echo "$OUT" | grep -o '/dev/graid[0-9]*' | head -n 1)
fio_verify "$dev6" 0 24M randwrite 4k-512k
expect_match '"state":"rebuilding"' "$(graidctl --json detail survivor | tr -d '\n ')" \
	"survivor's last member at power-off"
echo "left running: survivor on $1 $2 $3 $4 ($4 rebuilding), survivor6 on $5 $6 $7 $8"
