#!/bin/sh
# stand-in-meta.sh NAME VERSION DEPENDS DIR: makes DIR/NAME_VERSION_amd64.deb, a stand-in for
# Debian's kernel metapackage NAME (linux-image-amd64, linux-headers-amd64, linux-source) at an
# older VERSION than the archive serves now, depending on DEPENDS: trixie-backports keeps only the
# newest of some of them, and the Debian VM test's upgrade leg (build/debian-image.sh) and
# build/deb-test.sh need a machine on an older kernel, whose metapackages apt upgrade moves on.
set -e
name=$1 version=$2 depends=$3 dir=$4
p=$(mktemp -d)
mkdir -p "$p/DEBIAN" "$dir"
cat >"$p/DEBIAN/control" <<EOF
Package: $name
Version: $version
Architecture: amd64
Maintainer: graid tests <graid-devel@lists.graid.dev>
Depends: $depends
Section: kernel
Priority: optional
Description: stand-in for Debian's $name $version (graid's tests)
 The archive no longer serves this version of the metapackage; this one has the same name,
 version and dependency, so that apt upgrade moves on to the kernel served now.
EOF
dpkg-deb --build --root-owner-group "$p" "$dir/${name}_${version}_amd64.deb" >/dev/null
rm -rf "$p"
