# The module cannot be unloaded while its control device is open, and unloads once it is closed.
. /graid/lib.sh
load_module
exec 3<>/dev/graid-control || fail "cannot open /dev/graid-control"
rmmod raid_gpu 2>/tmp/rmmod.err && fail "rmmod succeeded while /dev/graid-control was open"
echo "rmmod while open: $(cat /tmp/rmmod.err)"
module_loaded || fail "module gone while open"
exec 3>&-
rmmod raid_gpu || fail "rmmod failed after close"
