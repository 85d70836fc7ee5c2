# Shared settings for build/*.sh: pinned versions and cache locations.
# shellcheck shell=bash
GRAID_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=versions.env
. "$GRAID_ROOT/build/versions.env"
# Expensive artefacts live outside the clone so fresh clones reuse them.
GRAID_CACHE=${GRAID_CACHE:-/var/cache/graid}
BINDGEN_ROOT=$GRAID_CACHE/tools/bindgen-cli-$BINDGEN_VERSION
BINDGEN=$BINDGEN_ROOT/bin/bindgen
LIBCLANG_PATH=/usr/lib/llvm-$LLVM_VERSION/lib
export LIBCLANG_PATH
# depmod, mkfs and friends live in sbin, which a non-login environment may leave out.
case ":$PATH:" in *:/usr/sbin:*) ;; *) PATH=$PATH:/usr/sbin:/sbin ;; esac
export PATH

log() { printf '[graid] %s\n' "$*" >&2; }
die() { printf '[graid] error: %s\n' "$*" >&2; exit 1; }

# parity_test_binaries [CARGO_ARG...]: builds graid-parity's test binaries (release) and prints
# their paths, one a line, for running them elsewhere (the device machine, an emulated CPU).
parity_test_binaries() {
	(cd "$GRAID_ROOT/tools" &&
		cargo test --release --locked -p graid-parity --no-run --message-format=json "$@") |
		python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        print(m["executable"])'
}
