# graidctl version round-trips the VERSION ioctl, in text and JSON, and fails clearly
# (exit 3, naming the fix) when the module is not loaded.
. /graid/lib.sh
unload_module
expect_rc 3 graidctl version
expect_match 'not found: is the raid_gpu module loaded\? \(try: modprobe raid_gpu\)' "$OUT" "error without module"

load_module
expect_rc 0 graidctl version
echo "$OUT"
expect_match '^graidctl [0-9]+\.[0-9]+\.[0-9]+ \(ABI [1-9][0-9]*\)$' "$(echo "$OUT" | sed -n 1p)" "tool line"
expect_match '^raid_gpu 0\.1\.0 \(ABI [1-9][0-9]*\)$' "$(echo "$OUT" | sed -n 2p)" "module line"
# The tool and the module agree (graidctl refuses to go on otherwise).
abi=$(echo "$OUT" | sed -n '1s/.*(ABI \([0-9]*\))$/\1/p')
[ "$(echo "$OUT" | sed -n '2s/.*(ABI \([0-9]*\))$/\1/p')" = "$abi" ] || fail "tool and module ABI differ: $OUT"

expect_rc 0 graidctl --json version
echo "$OUT"
[ "$(echo "$OUT" | grep -c "\"abi\": $abi")" = 2 ] || fail "json does not hold both ABI versions ($abi)"
expect_match '"version": "0\.1\.0"' "$OUT" "json module version"
unload_module
