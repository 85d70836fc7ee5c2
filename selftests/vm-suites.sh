#!/usr/bin/env bash
# make test's two VM suites at once: the Debian VM test (selftests/debian-vm.sh, its own kernel
# and packages) beside the VM suite on the test kernel (selftests/run.sh). Under TCG a guest of
# the suite leaves about a third of two host cores idle (its vCPUs wait on timers and emulated
# I/O), which the Debian guest fills: together they take less than one after the other
# (Documentation/testing.rst has the numbers). The Debian test's output is kept in
# out/debian-vm.log and shown after the suite's; the exit status is non-zero if either failed.
# DEBIAN_VM_BESIDE=0 runs them one after the other.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../build/common.sh"

log_file=$GRAID_ROOT/out/debian-vm.log
mkdir -p "$(dirname "$log_file")"
if [ "${DEBIAN_VM_BESIDE:-1}" = 0 ]; then
	"$here/debian-vm.sh"
	debian=$?
	"$here/run.sh"
	suite=$?
else
	start=$(date +%s)
	"$here/debian-vm.sh" >"$log_file" 2>&1 &
	debian_pid=$!
	# The suite's guests stop if this script is stopped; so does the Debian one.
	trap 'kill $debian_pid 2>/dev/null' EXIT
	"$here/run.sh"
	suite=$?
	wait $debian_pid
	debian=$?
	trap - EXIT
	echo "# the Debian VM test, run beside the VM suite ($(($(date +%s) - start)) s for both):"
	cat "$log_file"
fi
echo "# the VM suite: $( ((suite == 0)) && echo passed || echo "FAILED ($suite)");" \
	"the Debian VM test: $( ((debian == 0)) && echo passed || echo "FAILED ($debian)")"
((suite == 0 && debian == 0))
