# /dev/graid-helper, where the parity helper attaches (Documentation/ring-protocol.rst): root
# only, one helper at a time, the ring's ABI version negotiated at ATTACH, the control area
# mapped K2H read-only and H2K read-write (never writable K2H, never across the two, never
# before ATTACH), DETACH and close releasing it; the module cannot unload while it is open.
. /graid/lib.sh
load_module
[ -c /dev/graid-helper ] || fail "no /dev/graid-helper"
[ "$(stat -c %a /dev/graid-helper)" = 600 ] || fail "/dev/graid-helper is not 0600"
graid-probe helper /dev/graid-helper || fail "graid-probe found misbehaviour on /dev/graid-helper"
# A helper holding the device keeps the module loaded.
exec 3<>/dev/graid-helper || fail "cannot open /dev/graid-helper"
rmmod raid_gpu 2>/tmp/rmmod.err && fail "rmmod succeeded while /dev/graid-helper was open"
module_loaded || fail "module gone while the helper device was open"
exec 3>&-
unload_module
