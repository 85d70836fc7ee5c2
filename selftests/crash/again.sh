# A middle crash round: checks what the crash before left, writes again, dies again.
. /graid/crash/lib.sh
export CRASH_TEST=again
load_module
check_round
write_and_crash $((round + 1))
