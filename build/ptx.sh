#!/usr/bin/env bash
# Compiles the CUDA engine's kernels (tools/graid-cuda/kernels/parity.cu) to PTX with NVRTC
# from NVIDIA's PyPI wheel ($NVRTC_WHEEL in versions.env), which runs without a GPU or a CUDA
# toolkit. The PTX is committed and embedded in graid-cuda, so building graid needs neither.
#
#   build/ptx.sh          rewrite tools/graid-cuda/kernels/parity.ptx from parity.cu
#   build/ptx.sh --check  fail unless the committed PTX is exactly what parity.cu compiles to
#
# The wheel is fetched once into $GRAID_CACHE/tools and checked against its pinned hash.
set -euo pipefail
. "$(dirname "$0")/common.sh"

kernels=$GRAID_ROOT/tools/graid-cuda/kernels
nvrtc=$GRAID_CACHE/tools/nvrtc-$NVRTC_SHA256
# A Python with pip: the first python3 on PATH, else Debian's (python3-pip, from make deps).
python=python3
$python -m pip --version >/dev/null 2>&1 || python=/usr/bin/python3
if ! [ -f "$nvrtc/nvidia/cuda_nvrtc/lib/libnvrtc.so.12" ]; then
	$python -m pip --version >/dev/null 2>&1 || die "no python3 with pip (Debian: python3-pip)"
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	log "fetching $NVRTC_WHEEL"
	$python -m pip download --quiet --no-deps --only-binary=:all: --platform manylinux1_x86_64 \
		--dest "$tmp" "$NVRTC_WHEEL"
	wheel=$(ls "$tmp"/*.whl)
	echo "$NVRTC_SHA256  $wheel" | sha256sum --check --quiet || die "$wheel does not match its pinned hash"
	mkdir -p "$tmp/unpacked"
	$python -m zipfile -e "$wheel" "$tmp/unpacked"
	mkdir -p "$(dirname "$nvrtc")"
	rm -rf "$nvrtc"
	mv "$tmp/unpacked" "$nvrtc"
fi

ptx=$($python "$kernels/nvrtc.py" "$nvrtc/nvidia/cuda_nvrtc/lib/libnvrtc.so.12" "$kernels/parity.cu")
if [ "${1:-}" = --check ]; then
	diff -u "$kernels/parity.ptx" - <<<"$ptx" >&2 ||
		die "tools/graid-cuda/kernels/parity.ptx is not what parity.cu compiles to: run build/ptx.sh and commit it"
	log "parity.ptx matches parity.cu"
else
	printf '%s\n' "$ptx" >"$kernels/parity.ptx"
	log "wrote $kernels/parity.ptx"
fi
