# The last crash round: checks what the crash before left, stops the arrays and blanks them.
. /graid/crash/lib.sh
load_module
check_round
for a in $ARRAYS; do expect_rc 0 graidctl stop $a; done
wipe_superblocks $(member_drives)
unload_module
