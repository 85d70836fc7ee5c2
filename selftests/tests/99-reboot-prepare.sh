# Leaves a RAID 10 with verified data running when the VM powers off, for
# after-reboot/01-assemble-after-reboot.sh to find on the next boot. Runs last. Created in
# sync: the power-off while it runs is what must make it "not clean".
. /graid/lib.sh
need_members 4
set -- $members
expect_rc 0 graidctl create survivor --level 10 --chunk 256K --assume-clean "$@"
dev=$(echo "$OUT" | grep -o '/dev/graid[0-9]*' | head -n 1)
fio_verify "$dev" 0 40M randwrite 4k-512k
expect_rc 0 graidctl --json detail survivor
json_field uuid "$OUT" >/tmp/uuid
echo "left running: survivor $(cat /tmp/uuid) on $*"
