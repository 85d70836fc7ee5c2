#!/usr/bin/env bash
# The hand-written man pages (tools/man/) against the code they describe, and groff's warnings:
# raid_gpu(4) names every module parameter, every GRAID_EVENT the module sends and every sysfs
# file; graid.conf(5)
# every keyword graidctl reads. (graidctl's and graid-helper's pages are generated from their
# clap definitions by build/deb.sh, so they cannot drift.)
set -euo pipefail
. "$(dirname "$0")/common.sh"
man=$GRAID_ROOT/tools/man
bad=0
missing() { log "man-check: $1 does not document $2"; bad=1; }

for page in "$man"/*.[0-9]; do
	warnings=$(groff -man -ww -z "$page" 2>&1) || true
	[ -z "$warnings" ] || { log "man-check: groff warns about $page: $warnings"; bad=1; }
done
# Module parameters: the `name: u32 {` lines of module!'s params block.
for p in $(sed -n 's/^ *\([a-z_]*\): u32 {$/\1/p' "$GRAID_ROOT/raid_gpu/raid_gpu_main.rs"); do
	grep -q "^\.B $p\$" "$man/raid_gpu.4" || missing raid_gpu.4 "parameter $p"
done
# Events: the member changes' names, and the array events the module sends.
for e in $(sed -n 's/.*Self::[A-Za-z]* => "\([a-z-]*\)",$/\1/p' "$GRAID_ROOT/raid_gpu/uevent.rs") \
	degraded-array check-finished resync-finished; do
	grep -q "${e//-/\\\\-}" "$man/raid_gpu.4" || missing raid_gpu.4 "event $e"
done
# sysfs files: the lists in sysfs_text.rs, each a .B line of raid_gpu(4).
for f in $(sed -n '/^pub const \(ARRAY\|MEMBER\)_FILES/,/\];/p' "$GRAID_ROOT/raid_gpu/sysfs_text.rs" |
	grep -o '"[a-z_]*"' | tr -d '"'); do
	grep -q "^\.B $f\$" "$man/raid_gpu.4" || missing raid_gpu.4 "sysfs file $f"
done
# graid.conf keywords: the arms of config.rs's keyword match.
for k in $(sed -n 's/^ *"\([A-Z]*\)" => .*/\1/p' "$GRAID_ROOT/tools/graidctl/src/config.rs"); do
	grep -q "^\.BI\? $k" "$man/graid.conf.5" || missing graid.conf.5 "keyword $k"
done
((bad == 0)) || die "the man pages in tools/man/ and the code disagree"
log "man pages agree with the code"
