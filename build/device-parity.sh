#!/usr/bin/env bash
# The parity engine on the device machine, whose CPU has the AVX-512 and GFNI this one lacks.
#
#   build/device-parity.sh prepare    here: builds graid-parity's test and bench binaries (with
#                                     ISA-L) into .device/parity (git-ignored, ~20 MiB)
#   then, with the device tool:       run(command="bash build/device-parity.sh run",
#                                         carry=[".device"], timeout_s=480)
#
# On the device, `run` executes every test binary (golden vectors, proptests of each dispatch
# level the CPU supports against the scalar reference, recovery round trips), then the bench
# summary, and leaves cpu.txt, tests.txt and bench.txt in $OUT. Nothing there needs cargo or a
# network: the machine is bare and offline.
set -euo pipefail
. "$(dirname "$0")/common.sh"
root=$GRAID_ROOT
dir=$root/.device/parity

case ${1:-} in
prepare)
	rm -rf "$dir"
	mkdir -p "$dir/bin" "$dir/lib"
	grep -qx '/.device/' "$root/.git/info/exclude" 2>/dev/null ||
		echo '/.device/' >>"$root/.git/info/exclude"
	cd "$root/tools"
	cargo build --release --locked -p graid-parity --features isal --example bench-summary
	cp target/release/examples/bench-summary "$dir/bin/bench_summary"
	parity_test_binaries --features isal |
		while read -r exe; do cp "$exe" "$dir/bin/test-$(basename "$exe")"; done
	cp -L "$(ldconfig -p | awk '/libisal\.so\.2 / { print $NF; exit }')" "$dir/lib/libisal.so.2"
	# The golden-vector test reads its file by the path it was built at.
	echo "$root/tools/graid-parity" >"$dir/manifest-dir"
	du -sh "$dir"
	;;
run)
	out=${OUT:-$dir/out}
	mkdir -p "$out"
	export LD_LIBRARY_PATH=$dir/lib
	{
		nproc
		grep -m1 'model name' /proc/cpuinfo
		grep -m1 -o -w -E 'avx2|avx512f|avx512bw|gfni|avx512vbmi' /proc/cpuinfo | sort -u | tr '\n' ' '
		echo
	} >"$out/cpu.txt"
	cat "$out/cpu.txt"
	built_at=$(cat "$dir/manifest-dir")
	if [ ! -e "$built_at" ]; then
		mkdir -p "$(dirname "$built_at")"
		ln -s "$root/tools/graid-parity" "$built_at"
	fi
	status=0
	for t in "$dir"/bin/test-*; do
		echo "== $(basename "$t")"
		"$t" 2>&1 || status=1
	done >"$out/tests.txt"
	grep -E '^(== |test result)' "$out/tests.txt"
	"$dir/bin/bench_summary" "${@:2}" 2>&1 | tee "$out/bench.txt"
	exit $status
	;;
*)
	echo "usage: $0 prepare | run [bench-summary options]" >&2
	exit 2
	;;
esac
