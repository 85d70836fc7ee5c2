#!/usr/bin/env bash
# Fetches Debian's linux-source package into the cache and prints the path of the unpacked tarball.
# Uses the pinned version; when that has left the archive, the newest $KERNEL_SERIES.x from the fallback suites.
# apt verifies the package against the suite's signed index; the pin's sha256 is checked on top.
set -euo pipefail
. "$(dirname "$0")/common.sh"

src_dir=$GRAID_CACHE/src
mkdir -p "$src_dir"

apt_in_suite() { # tool (apt-get|apt-cache), suite, args...
	local tool=$1 suite=$2; shift 2
	local d=$GRAID_CACHE/apt/$suite
	mkdir -p "$d/lists/partial"
	echo "deb http://deb.debian.org/debian $suite main" >"$d/sources.list"
	"$tool" -q -o Dir::Etc::SourceList="$d/sources.list" -o Dir::Etc::SourceParts=/dev/null \
		-o Dir::State::Lists="$d/lists" -o Dir::Cache="$d/cache" "$@"
}
suite_updated=()
update_suite() {
	local s
	for s in "${suite_updated[@]}"; do [ "$s" = "$1" ] && return 0; done
	apt_in_suite apt-get "$1" update >&2
	suite_updated+=("$1")
}
download() { # suite version
	update_suite "$1"
	(cd "$src_dir" && apt_in_suite apt-get "$1" download "$KERNEL_SOURCE_PKG=$2" >&2)
}
deb_name() { echo "${KERNEL_SOURCE_PKG}_${1//:/%3a}_all.deb"; }

version=$KERNEL_SOURCE_VERSION
if ! [ -f "$src_dir/$(deb_name "$version")" ]; then
	if ! download "$KERNEL_SOURCE_SUITE" "$version"; then
		log "pinned $KERNEL_SOURCE_PKG $version is gone; looking for the newest $KERNEL_SERIES.x"
		version=
		for suite in $KERNEL_FALLBACK_SUITES; do
			update_suite "$suite"
			v=$( (apt_in_suite apt-cache "$suite" show "$KERNEL_SOURCE_PKG" 2>/dev/null || true) |
				sed -n 's/^Version: //p' | sort -V | tail -n 1)
			if [ -n "$v" ] && download "$suite" "$v"; then version=$v; break; fi
		done
		[ -n "$version" ] || die "no $KERNEL_SOURCE_PKG found in: $KERNEL_SOURCE_SUITE $KERNEL_FALLBACK_SUITES"
		log "warning: using $KERNEL_SOURCE_PKG $version instead of the pinned $KERNEL_SOURCE_VERSION"
	fi
fi
deb=$src_dir/$(deb_name "$version")
if [ "$version" = "$KERNEL_SOURCE_VERSION" ] && [ -n "${KERNEL_SOURCE_SHA256:-}" ]; then
	echo "$KERNEL_SOURCE_SHA256  $deb" | sha256sum -c --quiet - >&2 || die "checksum mismatch for $deb"
fi
x=$src_dir/x-$version
if ! [ -f "$x/.done" ]; then
	rm -rf "$x"
	dpkg-deb -x "$deb" "$x"
	touch "$x/.done"
fi
tarball=$(ls "$x"/usr/src/linux-source-*.tar.xz)
echo "$version $tarball"
