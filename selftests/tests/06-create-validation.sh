# CREATE refuses every malformed request (level, chunk, member count, duplicates, name, flags,
# missing, too small and busy members) with the right errno and writes nothing to any member;
# a valid request creates the array once; STOP and DETAIL behave on present and absent arrays.
. /graid/lib.sh
need_members 4
set -- $members
truncate -s 1M /tmp/small.img
small=$(losetup -f) && losetup "$small" /tmp/small.img || fail "losetup failed"
graid-probe create "$small" "$@"
rc=$?
losetup -d "$small"
[ $rc = 0 ] || fail "graid-probe found misbehaving CREATE/STOP/DETAIL cases"
wipe_superblocks "$@"
unload_module
