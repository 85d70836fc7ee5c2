#!/usr/bin/env bash
# A static prediction, not a measurement: the cycles per 64 bytes of data of each x86 level's
# P+Q generation loop, from llvm-mca's models of CPUs this machine is not (Ice Lake server,
# Sapphire Rapids, Zen 4 by default). For levels that cannot be benchmarked here (AVX-512BW,
# AVX2+GFNI, AVX-512+GFNI); benchmarks on real hardware (build/device-parity.sh) decide.
#
#   build/mca-parity.sh [CPU...]
#
# It compiles graid-parity to assembly, takes from each level's `generate_unchecked` its main
# loop (over the data chunks of one column: the loop with the expected number of data loads)
# and asks llvm-mca for the cycles per iteration. The model assumes every load hits L1.
set -euo pipefail
. "$(dirname "$0")/common.sh"

cpus=("$@")
((${#cpus[@]})) || cpus=(icelake-server sapphirerapids znver4)
target=$GRAID_ROOT/out/mca-parity
(cd "$GRAID_ROOT/tools" && CARGO_TARGET_DIR=$target cargo rustc --release --locked -q \
	-p graid-parity --lib -- --emit asm)
asm=$(ls -t "$target"/release/deps/graid_parity-*.s | head -n 1)

python3 - "$asm" "llvm-mca-$LLVM_VERSION" "${cpus[@]}" <<'PY'
import re, subprocess, sys

asm_path, mca, cpus = sys.argv[1], sys.argv[2], sys.argv[3:]
lines = open(asm_path).read().split("\n")
# Each level's function, and the vector loads of data per iteration of its main loop: GEN
# vectors of one chunk (Horner's rule) or of two chunks (the direct form goes in pairs).
levels = {
    "ssse3": ("4simd5ssse37entries18generate_unchecked", 4),
    "avx2": ("4simd4avx27entries18generate_unchecked", 6),
    "avx512bw": ("4simd8avx512bw7entries18generate_unchecked", 4),
    "avx2-gfni": ("4simd4gfni12avx2_entries18generate_unchecked", 8),
    "avx512-gfni": ("4simd4gfni14avx512_entries18generate_unchecked", 8),
}
width = {"xmm": 16, "ymm": 32, "zmm": 64}


def function_body(mangled):
    start = next(i for i, l in enumerate(lines) if mangled in l and l.endswith(":"))
    end = next(i for i in range(start, len(lines)) if lines[i].startswith(".Lfunc_end"))
    return lines[start:end]


def loops(body):
    """Every basic block that ends in a conditional jump back to its own label."""
    labels = {l[:-1]: i for i, l in enumerate(body) if re.match(r"^\.LBB\w+:$", l)}
    for label, at in labels.items():
        block = []
        for l in body[at + 1:]:
            s = l.strip()
            if s.startswith(".LBB"):
                break
            if not s or s.startswith((".p2align", "#")):
                continue
            block.append(s)
            if re.match(r"^j(?!mp)\w+\s+" + re.escape(label) + "$", s):
                yield block
                break
            if s.startswith(("jmp", "ret")):
                break


def data_loads(loop):
    """Vector loads not from the stack (the stack holds prepared constants), with widths."""
    for s in loop:
        m = re.match(r"^v?movdq[au](?:64|8)?\s+-?\w*\(%(\w+)[^)]*\),\s*%(xmm|ymm|zmm)\d+$", s)
        if m and m.group(1) != "rsp":
            yield width[m.group(2)]


print(f"{'level':<12} {'cpu':<16} {'cycles/iter':>11} {'data B/iter':>11} {'cycles/64 B':>11}")
for level, (mangled, vectors) in levels.items():
    main = [b for b in loops(function_body(mangled)) if len(list(data_loads(b))) == vectors]
    if len(main) != 1:
        sys.exit(f"{level}: {len(main)} loops with {vectors} data loads; has the kernel changed?")
    loop = main[0]
    loaded = sum(data_loads(loop))
    for cpu in cpus:
        run = subprocess.run([mca, f"-mcpu={cpu}", "-iterations=1000"], input="\n".join(loop),
                             capture_output=True, text=True)
        if run.returncode != 0:  # a level this CPU model does not have
            continue
        out = run.stdout
        cycles = int(re.search(r"Total Cycles:\s+(\d+)", out).group(1)) / 1000
        print(f"{level:<12} {cpu:<16} {cycles:>11.2f} {loaded:>11} {cycles * 64 / loaded:>11.2f}")
PY
