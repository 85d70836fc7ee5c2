# Crash round 0: creates the four arrays (crash/lib.sh) in sync, writes, dies.
. /graid/crash/lib.sh
export CRASH_TEST=start
load_module
set -- $(member_drives)
[ $# -ge 14 ] || skip "needs 15 NVMe drives, found $(($# + 1))"
wipe_superblocks "$@"
# c1 and c5 with a write-intent bitmap (small chunks, so a crash leaves clean regions the
# resync skips), c10 and c6 without.
expect_rc 0 graidctl create c1 --level 1 --bitmap-chunk 1M --assume-clean $1 $2 $3
expect_rc 0 graidctl create c10 --level 10 --chunk 64K --bitmap none --assume-clean $4 $5 $6 $7
expect_rc 0 graidctl create c5 --level 5 --chunk 64K --bitmap-chunk 1M --assume-clean $8 $9 ${10}
expect_rc 0 graidctl create c6 --level 6 --chunk 64K --bitmap none --assume-clean ${11} ${12} ${13} ${14}
write_and_crash 0
