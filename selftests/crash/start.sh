# Crash round 0: creates the four arrays (crash/lib.sh) in sync, sets up the write-hole test,
# writes, dies.
. /graid/crash/lib.sh
export CRASH_TEST=start
# Arrays stay marked dirty while the machine runs (the write-hole test needs no superblock
# write once its data drive's writes are held).
load_module_with safe_mode_delay_ms=600000
set -- $(member_drives)
[ $# -ge 21 ] || skip "needs 22 NVMe drives, found $(($# + 1))"
wipe_superblocks "$@"
export DM_DISABLE_UDEV=1
WRITE_HOLE="${15} ${16} ${17}"
# c1 and c5 with a write-intent bitmap (small chunks, so a crash leaves clean regions the
# resync skips), c10 and c6 without.
expect_rc 0 graidctl create c1 --level 1 --bitmap-chunk 1M --assume-clean $1 $2 $3
expect_rc 0 graidctl create c10 --level 10 --chunk 64K --bitmap none --assume-clean $4 $5 $6 $7
expect_rc 0 graidctl create c5 --level 5 --chunk 64K --bitmap-chunk 1M --assume-clean $8 $9 ${10}
expect_rc 0 graidctl create c6 --level 6 --chunk 64K --bitmap none --assume-clean ${11} ${12} ${13} ${14}
# cr (partial parity log, the default) and a spare for its first restripe (restripe_prepare).
expect_rc 0 graidctl create cr --level 5 --chunk 64K --assume-clean ${18} ${19} ${20}
expect_rc 0 graidctl add cr ${21}
write_and_crash 0
