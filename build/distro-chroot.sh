# The cached Debian chroot that graid builds and packages for Debian's own kernels in
# ($DISTRO_KERNELS from $DISTRO_SUITE-backports, build/versions.env): sourced by
# build/distro-module.sh, build/deb.sh, build/deb-test.sh and build/debian-image.sh after
# common.sh.
#
# The chroot holds those kernels' headers and sources, the compilers their .configs name, and
# Debian's packaging tools. It is made by mmdebstrap, kept as a tarball and unpacked under
# $GRAID_CACHE/distro/HASH (HASH: the apt sources and the package list); it needs root.
# shellcheck shell=bash

# The kernels, oldest first: distro_rels (releases, 7.2.12+deb13-amd64) and distro_vers (their
# package versions) by index; distro_rel and distro_ver are the oldest's.
distro_rels=()
distro_vers=()
for kv in $DISTRO_KERNELS; do
	distro_rels+=("${kv%%=*}")
	distro_vers+=("${kv#*=}")
done
distro_rel=${distro_rels[0]}
distro_ver=${distro_vers[0]}
# distro_series RELEASE: its series (7.2).
distro_series() { echo "$1" | cut -d. -f1,2; }
distro_mirror=http://deb.debian.org/debian
distro_sources=("deb $distro_mirror $DISTRO_SUITE main" "deb $distro_mirror $DISTRO_SUITE-backports main")
distro_packages=$DISTRO_CHROOT_PACKAGES
for i in "${!distro_rels[@]}"; do
	distro_packages+=" linux-headers-${distro_rels[i]}=${distro_vers[i]}"
	distro_packages+=" linux-source-$(distro_series "${distro_rels[i]}")=${distro_vers[i]}"
done
distro_dir=$GRAID_CACHE/distro/$({
	printf '%s\n' "${distro_sources[@]}" "$distro_packages"
} | sha256sum | cut -c1-16)
distro_root=$distro_dir/root

# distro_chroot_ready: makes (or unpacks) the chroot; holds the cache's lock until the caller
# exits, so two builds never share a half-made chroot.
distro_chroot_ready() {
	[ "$(id -u)" = 0 ] || die "needs root (mmdebstrap, chroot and mounts)"
	command -v mmdebstrap >/dev/null || die "mmdebstrap is not installed (apt-get install mmdebstrap)"
	mkdir -p "$GRAID_CACHE/distro"
	exec 9>"$GRAID_CACHE/distro/build.lock"
	flock 9
	if ! [ -f "$distro_dir/chroot.tar.zst" ]; then
		local start
		start=$(date +%s)
		log "creating the $DISTRO_SUITE chroot for ${distro_rels[*]} (mmdebstrap)"
		mkdir -p "$distro_dir"
		# shellcheck disable=SC2086 # the package list is words
		mmdebstrap --quiet --variant=apt --components=main --include="$(echo $distro_packages | tr ' ' ,)" \
			"$DISTRO_SUITE" "$distro_dir/chroot.tmp.tar.zst" "${distro_sources[@]}" >&2
		mv "$distro_dir/chroot.tmp.tar.zst" "$distro_dir/chroot.tar.zst"
		log "chroot made in $(($(date +%s) - start)) s"
	fi
	if ! [ -f "$distro_dir/.unpacked" ]; then
		rm -rf "$distro_root"
		mkdir -p "$distro_root"
		tar -C "$distro_root" -xf "$distro_dir/chroot.tar.zst"
		cp /etc/resolv.conf "$distro_root/etc/resolv.conf"
		touch "$distro_dir/.unpacked"
	fi
	# Keep the two newest chroots (each is a few GB).
	touch "$distro_dir"
	ls -1dt "$GRAID_CACHE"/distro/*/ 2>/dev/null | tail -n +3 | xargs -r rm -rf
}

# in_chroot [--overlay] [HOST_DIR:GUEST_DIR[:ro]]...: runs bash reading its script from stdin
# inside the chroot (or the root folder $chroot_root, if set), with /proc and /dev and the given
# folders bound in a private mount namespace (gone when it exits). With --overlay the chroot is
# a throwaway overlay of the cached one: what the script installs or changes there is gone
# afterwards. The host's environment stays out.
in_chroot() {
	local overlay=0
	if [ "${1:-}" = --overlay ]; then
		overlay=1
		shift
	fi
	local scratch=
	if [ "$overlay" = 1 ]; then
		scratch=$(mktemp -d "$distro_dir/overlay.XXXXXX")
	fi
	local rc=0
	unshare --mount --propagation private env lower="${chroot_root:-$distro_root}" scratch="$scratch" \
		bash -c '
		set -e
		root=$lower
		if [ -n "$scratch" ]; then
			mkdir "$scratch/upper" "$scratch/work" "$scratch/merged"
			mount -t overlay overlay \
				-o "lowerdir=$lower,upperdir=$scratch/upper,workdir=$scratch/work" "$scratch/merged"
			root=$scratch/merged
		fi
		mount -t proc proc "$root/proc"
		mount --rbind /dev "$root/dev"
		# The archive is on the network: apt tries a failed download again (a mirror in the
		# middle of its sync, a dropped connection) rather than failing the build or the test.
		if [ -d "$root/etc/apt/apt.conf.d" ]; then
			echo "Acquire::Retries \"5\";" >"$root/etc/apt/apt.conf.d/80graid-retries"
		fi
		for bind in "$@"; do
			IFS=: read -r host guest mode <<<"$bind"
			mkdir -p "$root$guest"
			mount --bind "$host" "$root$guest"
			[ "$mode" != ro ] || mount -o remount,bind,ro "$root$guest"
		done
		exec chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C.UTF-8 \
			bash -s' graid-chroot "$@" || rc=$?
	[ -z "$scratch" ] || rm -rf "$scratch"
	return "$rc"
}

# debian_boot_files ROOT DIR: copies every kernel of the Debian root folder ROOT (its
# /boot/vmlinuz-RELEASE and /boot/initrd.img-RELEASE) into DIR, where the Debian VM test boots
# them from (QEMU's -kernel and -initrd, in place of a boot loader).
debian_boot_files() {
	local root=$1 dir=$2 k rel
	mkdir -p "$dir"
	for k in "$root"/boot/vmlinuz-*; do
		rel=${k##*/vmlinuz-}
		[ -f "$root/boot/initrd.img-$rel" ] || continue
		cp "$k" "$dir/vmlinuz-$rel"
		cp "$root/boot/initrd.img-$rel" "$dir/initrd.img-$rel"
	done
}
