#!/usr/bin/env bash
# Installs what graid's build and tests need. Idempotent: does nothing when all is present.
set -euo pipefail
. "$(dirname "$0")/common.sh"

missing=()
for p in $APT_PACKAGES; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
	log "installing Debian packages: ${missing[*]}"
	SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
	$SUDO apt-get update -q
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

if ! [ -x "$BINDGEN" ] || ! "$BINDGEN" --version | grep -qF "$BINDGEN_VERSION"; then
	log "installing bindgen-cli $BINDGEN_VERSION into $BINDGEN_ROOT"
	mkdir -p "$BINDGEN_ROOT"
	cargo install --locked --quiet bindgen-cli --version "=$BINDGEN_VERSION" --root "$BINDGEN_ROOT"
fi
"$BINDGEN" --version >/dev/null
log "dependencies present"
