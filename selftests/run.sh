#!/usr/bin/env bash
# Runs graid's VM selftests: boots the test VM once, runs every selftests/tests/*.sh (or the
# ones named in $TESTS, e.g. TESTS="module-load version") and prints TAP plus a final
# "N passed, N failed" line. Exits non-zero if any test failed or the guest did not finish.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

tests=()
if [ -n "${TESTS:-}" ]; then
	for t in $TESTS; do
		f=$(ls "$here/tests/"*"$t"*.sh 2>/dev/null | head -n 1)
		[ -n "$f" ] || { echo "no test matches '$t'" >&2; exit 2; }
		tests+=("tests/$(basename "$f")")
	done
else
	for f in "$here"/tests/*.sh; do tests+=("tests/$(basename "$f")"); done
fi

out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$here/vm.sh" "$here/run-tests.sh" "${tests[@]}" | tee "$out"
rc=${PIPESTATUS[0]}

passed=$(grep -cE '^ok [0-9]+ ' "$out")
failed=$(grep -cE '^not ok [0-9]+ ' "$out")
ran=$((passed + failed))
if ((rc != 0 && failed == 0)) || ((ran < ${#tests[@]})); then
	# The guest died or hung: whatever did not report counts as failed.
	echo "not ok - the VM stopped after $ran of ${#tests[@]} tests (status $rc)"
	failed=$((failed + ${#tests[@]} - ran))
	((failed > 0)) || failed=1
fi
echo "$passed passed, $failed failed"
((failed == 0 && rc == 0))
