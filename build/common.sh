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
