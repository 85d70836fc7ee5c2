# Malformed ioctls (unknown numbers, wrong sizes, NULL, short and kernel pointers) and
# unprivileged opens are refused with the right errno, never a crash.
. /graid/lib.sh
load_module
graid-probe ioctls /dev/graid-control || fail "graid-probe found misbehaving ioctls"
# The module still answers afterwards.
expect_rc 0 graidctl version
unload_module
