# graidctl version round-trips the VERSION ioctl, in text and JSON, and fails clearly
# (exit 3, naming the fix) when the module is not loaded.
. /graid/lib.sh
unload_module
expect_rc 3 graidctl version
expect_match 'not found: is the raid_gpu module loaded\? \(try: modprobe raid_gpu\)' "$OUT" "error without module"

load_module
expect_rc 0 graidctl version
echo "$OUT"
expect_match '^graidctl [0-9]+\.[0-9]+\.[0-9]+ \(ABI 4\)$' "$(echo "$OUT" | sed -n 1p)" "tool line"
expect_match '^raid_gpu 0\.1\.0 \(ABI 4\)$' "$(echo "$OUT" | sed -n 2p)" "module line"

expect_rc 0 graidctl --json version
echo "$OUT"
expect_match '"abi": 4' "$OUT" "json"
[ "$(echo "$OUT" | grep -c '"abi": 4')" = 2 ] || fail "json does not hold both ABI versions"
expect_match '"version": "0\.1\.0"' "$OUT" "json module version"
unload_module
