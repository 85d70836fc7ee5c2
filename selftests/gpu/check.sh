#!/usr/bin/env bash
# The GPU check (issue 13, Documentation/gpu.rst): on a machine with an NVIDIA GPU and no
# network, from binaries built here and carried there (`selftests/gpu/check.sh --prepare`
# builds them into out/gpu-bin), it records in one results file, in under 5 minutes:
# - the machine: GPU, driver, Vulkan loader and ICDs;
# - the CUDA and Vulkan engines' golden and property tests (GRAID_REQUIRE_CUDA=1,
#   GRAID_REQUIRE_VULKAN=1: a missing device fails them);
# - which host memory kinds each device takes (graid-helper memory-probe: cuMemHostRegister,
#   VK_EXT_external_memory_host);
# - end-to-end throughput through the ring's loopback, host -> GPU -> host, RAID 6 8+2 and
#   16+2 at 64 KiB, 256 KiB and 1 MiB chunks, CUDA, Vulkan and the CPU engine (all cores, and
#   one core), with CPU time per GB;
# - the slowdown of a concurrent GPU matmul (PyTorch, where installed) beside the helper.
#
# Usage: selftests/gpu/check.sh --prepare   (here: build and collect the binaries)
#        selftests/gpu/check.sh             (there: run; results in $OUT or out/gpu)
set -uo pipefail
cd "$(dirname "$0")/../.."
bin=out/gpu-bin

if [ "${1:-}" = --prepare ]; then
	set -e
	export PATH="${HOME:-/root}/.cargo/bin:$PATH"
	mkdir -p $bin
	(cd tools && cargo build --locked --release -p graid-helper)
	cp tools/target/release/graid-helper $bin/
	for engine in vulkan cuda; do
		(cd tools && cargo test --locked --release -p graid-$engine --no-run --message-format=json) |
			sed -n 's/.*"executable":"\([^"]*\/golden-[^"]*\)".*/\1/p' >/tmp/golden-path
		cp "$(tail -n 1 /tmp/golden-path)" $bin/graid-$engine-golden
	done
	ls -l $bin
	exit 0
fi

out=${OUT:-out/gpu}
mkdir -p "$out"
results=$out/gpu-results.txt
exec > >(tee "$results") 2>&1
start=$(date +%s)
section() { echo; echo "=== $* (+$(($(date +%s) - start)) s)"; }
# step SECONDS CMD...: runs CMD with a time limit, says if it failed or ran out.
step() {
	local limit=$1
	shift
	timeout "$limit" "$@"
	local rc=$?
	case $rc in
	0) ;;
	124) echo "[timed out after $limit s]" ;;
	*) echo "[exit $rc]" ;;
	esac
	return 0
}

section "machine"
uname -r
nproc
step 20 nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.max,pcie.link.width.max --format=csv
ls /usr/share/vulkan/icd.d /etc/vulkan/icd.d 2>/dev/null
ldconfig -p 2>/dev/null | grep -E 'libvulkan|libcuda' || echo "no libvulkan/libcuda in the linker cache"
command -v vulkaninfo >/dev/null && step 20 vulkaninfo --summary

section "CUDA golden and property tests"
GRAID_REQUIRE_CUDA=1 step 60 $bin/graid-cuda-golden --test-threads 1

section "Vulkan golden and property tests"
GRAID_REQUIRE_VULKAN=1 step 120 $bin/graid-vulkan-golden --test-threads 1

section "host memory each device takes"
step 30 $bin/graid-helper memory-probe --engine cuda
step 30 $bin/graid-helper memory-probe --engine vulkan

section "throughput through the ring's loopback (host -> device -> host), RAID 6"
threads=$(nproc)
# GiB of data per run (GPU_CHECK_GIB; 1 keeps the whole check under 5 minutes).
gib=${GPU_CHECK_GIB:-1}
for engine in cuda vulkan cpu; do
	for data in 8 16; do
		for chunk in 64 256 1024; do
			jobs=$((gib * 1024 * 1024 / (data * chunk)))
			echo "--- $engine $data+2 x $chunk KiB"
			step 20 $bin/graid-helper loopback --engine $engine --data $data --parity 2 \
				--chunk-kib $chunk --jobs $jobs --in-flight 64 --threads $threads
		done
	done
done
echo "--- cpu on one core, 16+2 x 1 MiB (the issue's 'one CPU core')"
step 30 $bin/graid-helper loopback --engine cpu --data 16 --parity 2 --chunk-kib 1024 \
	--jobs $((gib * 64)) --in-flight 64 --threads 1

section "a concurrent GPU matmul, alone and beside the helper"
if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
	cat >/tmp/matmul.py <<'EOF'
import sys, time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
for _ in range(5):
    a @ b
torch.cuda.synchronize()
n, t0 = 0, time.time()
while time.time() - t0 < float(sys.argv[1]):
    for _ in range(10):
        a @ b
    torch.cuda.synchronize()
    n += 10
dt = time.time() - t0
print(f"{n / dt:.1f} matmuls/s ({2 * 8192**3 * n / dt / 1e12:.1f} TFLOP/s)")
EOF
	echo "alone:"
	step 40 python3 /tmp/matmul.py 20
	for engine in cuda vulkan; do
		echo "beside graid-helper loopback --engine $engine (16+2 x 1 MiB):"
		$bin/graid-helper loopback --engine $engine --data 16 --parity 2 --chunk-kib 1024 \
			--jobs 100000 --in-flight 64 --threads "$threads" >/tmp/beside.txt 2>&1 &
		helper=$!
		sleep 2
		step 40 python3 /tmp/matmul.py 20
		kill $helper 2>/dev/null
		wait $helper 2>/dev/null
	done
else
	echo "no PyTorch with CUDA here: not measured"
fi

section "done"
echo "results in $results"
