#!/usr/bin/env bash
# The Debian VM test's machines (selftests/debian-vm.sh), Debian trixie booting Debian's own
# kernels, each a root folder made into an ext4 image. Two legs:
#
#   build/debian-image.sh readme   a fresh trixie (its own 6.12 kernel, nothing of graid's), into
#                                  which the README's "Install on Debian 13" block is run as
#                                  written, up to its reboot: it installs the kernel that
#                                  trixie-backports serves today, its headers and source, and
#                                  graid's packages from out/deb (DKMS builds the module)
#   build/debian-image.sh upgrade  trixie on the oldest supported kernel ($DISTRO_KERNELS' first,
#                                  pinned), with graid's packages installed; selftests/debian-vm.sh
#                                  later upgrades it (selftests/debian/upgrade.sh)
#   build/debian-image.sh --base   only make (or find) both base systems
#
# Each prints the folder holding root.img and boot/ (every kernel's vmlinuz and initrd.img). The
# installs run in the image's root as a chroot on this machine, natively (inside the emulated VM
# a module's first build would take hours), as the packages' DKMS hooks would run on the
# machine. The base systems are cached as tarballs under $GRAID_CACHE/debian-vm/LEG-HASH.
#
# The kernel trees graid-dkms-build prepares once per kernel (its Rust build outputs, minutes
# each) are cached by kernel version and toolchain in $GRAID_CACHE/dkms-prepared, which the
# installs see as their /var/cache/graid-dkms: the distro chroot's (build/distro-module.sh) are
# put there first, so a kernel already prepared there is not prepared again.
set -euo pipefail
. "$(dirname "$0")/common.sh"
. "$GRAID_ROOT/build/distro-chroot.sh"

leg=${1:-}
case $leg in
readme | upgrade | --base) ;;
*) die "usage: build/debian-image.sh readme|upgrade|--base" ;;
esac
debs=$GRAID_ROOT/out/deb
[ "$leg" = --base ] || ls "$debs"/graid_*_amd64.deb "$debs"/graid-dkms_*_all.deb >/dev/null 2>&1 ||
	die "no packages in $debs (make deb)"
prepared=$GRAID_CACHE/dkms-prepared

# What makes either root a bootable machine under QEMU: a root on the first virtio disk, root
# without a password, a fresh machine id; and, for the upgrade leg, which removes graid-dkms in
# the VM, no modules of hardware the VM never has (selftests/debian/trim-modules.sh says why).
machine_setup='echo graid-vm >/etc/hostname
printf "127.0.0.1 localhost\n127.0.1.1 graid-vm\n" >/etc/hosts
printf "/dev/vda / ext4 rw,errors=remount-ro 0 1\n" >/etc/fstab
passwd -d root >/dev/null
: >/etc/machine-id'
trim_modules=$(cat "$GRAID_ROOT/selftests/debian/trim-modules.sh")

# The upgrade leg's base: the distro chroot (its compilers, dkms) with the oldest kernel's image,
# and the metapackages as backports served them while that kernel was its newest (the archive
# keeps only the newest linux-image-amd64 and linux-headers-amd64, so stand-ins of the same
# name, version and dependency are made: selftests/debian/stand-in-meta.sh), so that apt upgrade
# moves the machine to the kernel backports serves now. The headers and source of the newer
# kernels the chroot holds are removed: the upgrade must bring them.
newer_packages=
for i in "${!distro_rels[@]}"; do
	((i == 0)) && continue
	newer_packages+=" linux-headers-${distro_rels[i]} linux-source-$(distro_series "${distro_rels[i]}")"
done
upgrade_packages="linux-image-$distro_rel=$distro_ver $DEBIAN_VM_PACKAGES"
upgrade_setup="apt-get -q -y purge $newer_packages >&2
rmdir /lib/modules/* 2>/dev/null || true
$machine_setup
$trim_modules"
upgrade_key=$(printf '%s\n' "$(basename "$distro_dir")" "$upgrade_packages" "$upgrade_setup" | sha256sum | cut -c1-16)

# The readme leg's base: what a fresh trixie install is (a kernel, systemd, sudo), plus the test's
# own tools (fio, procps). Nothing of graid's or of backports.
readme_packages="linux-image-amd64 systemd-sysv dbus udev kmod initramfs-tools e2fsprogs util-linux sudo fio procps"
readme_setup=$machine_setup
readme_key=$(printf '%s\n' "$DISTRO_SUITE" "$readme_packages" "$readme_setup" | sha256sum | cut -c1-16)

mkdir -p "$GRAID_CACHE/debian-vm"
# The newest base of each leg is kept (each is a few hundred MB), and no base of an older
# layout of this cache (HASH without a leg).
keep_newest() {
	ls -1dt "$GRAID_CACHE/debian-vm/$1"-*/ 2>/dev/null | tail -n +2 | xargs -r rm -rf
	find "$GRAID_CACHE/debian-vm" -mindepth 1 -maxdepth 1 -type d ! -name 'readme-*' ! -name 'upgrade-*' \
		-exec rm -rf {} +
}

# make_base LEG: the leg's cached base tarball (made if missing); prints its path.
make_base() {
	local leg=$1 cache start
	case $leg in
	upgrade) cache=$GRAID_CACHE/debian-vm/upgrade-$upgrade_key ;;
	readme) cache=$GRAID_CACHE/debian-vm/readme-$readme_key ;;
	esac
	exec 8>"$GRAID_CACHE/debian-vm/build.lock"
	flock 8
	if ! [ -f "$cache/base.tar.zst" ]; then
		start=$(date +%s)
		log "creating the Debian VM's $leg base system"
		rm -rf "$cache"
		mkdir -p "$cache/root"
		if [ "$leg" = upgrade ]; then
			tar -C "$cache/root" -xf "$distro_dir/chroot.tar.zst"
			cp /etc/resolv.conf "$cache/root/etc/resolv.conf"
			local meta=$cache/root/tmp/meta stand_in=$GRAID_ROOT/selftests/debian/stand-in-meta.sh
			"$stand_in" linux-image-amd64 "$distro_ver" "linux-image-$distro_rel (= $distro_ver)" "$meta"
			"$stand_in" linux-headers-amd64 "$distro_ver" "linux-headers-$distro_rel (= $distro_ver)" "$meta"
			"$stand_in" linux-source "$distro_ver" "linux-source-$(distro_series "$distro_rel") (= $distro_ver)" "$meta"
			chroot_root=$cache/root in_chroot <<EOS
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get -q update >/dev/null
apt-get -q -y install --no-install-recommends $upgrade_packages >&2
apt-get -q -y install /tmp/meta/*.deb >&2
rm -rf /tmp/meta
apt-get clean
$upgrade_setup
EOS
		else
			# shellcheck disable=SC2086 # the package list is words
			mmdebstrap --quiet --variant=apt --components=main \
				--include="$(echo $readme_packages | tr ' ' ,)" \
				"$DISTRO_SUITE" "$cache/root" "deb $distro_mirror $DISTRO_SUITE main" >&2
			cp /etc/resolv.conf "$cache/root/etc/resolv.conf"
			chroot_root=$cache/root in_chroot <<EOS
set -euo pipefail
apt-get clean
$readme_setup
EOS
		fi
		rm -rf "$cache/root/var/lib/apt/lists"/*
		tar -C "$cache/root" -cf - . | zstd -q -T0 -3 >"$cache/base.tmp.tar.zst"
		mv "$cache/base.tmp.tar.zst" "$cache/base.tar.zst"
		rm -rf "$cache/root"
		log "$leg base system made in $(($(date +%s) - start)) s"
	fi
	touch "$cache"
	keep_newest "$leg"
	flock -u 8
	echo "$cache/base.tar.zst"
}

# seed_prepared: the distro chroot's prepared kernel trees into the shared cache (hard links),
# for the kernels not there yet.
seed_prepared() {
	local t
	mkdir -p "$prepared"
	for t in "$distro_root"/var/cache/graid-dkms/*/; do
		[ -d "$t" ] || continue
		[ -e "$prepared/$(basename "$t")" ] || cp -al "$t" "$prepared/"
	done
}

distro_chroot_ready
if [ "$leg" = --base ]; then
	make_base readme >/dev/null
	make_base upgrade >/dev/null
	exit 0
fi
base=$(make_base "$leg")
seed_prepared

out=$GRAID_ROOT/out/debian-vm/$leg
rm -rf "$out"
mkdir -p "$out/root" "$out/boot"
tar -C "$out/root" -xf "$base"
mkdir -p "$out/root/tmp/debs"
cp "$debs"/graid_*_amd64.deb "$debs"/graid-dkms_*_all.deb "$out/root/tmp/debs/"
if [ "$leg" = readme ]; then
	# The README's block up to its reboot, as written: apt's questions answered yes (a person
	# types y), in the folder holding the packages it names.
	"$GRAID_ROOT/selftests/debian/readme-block.sh" before-reboot "$GRAID_ROOT/README.md" >"$out/root/tmp/readme-install.sh"
	log "running the README's install block in the Debian VM's root:"
	sed 's/^/[graid]   /' "$out/root/tmp/readme-install.sh" >&2
	echo 'APT::Get::Assume-Yes "true";' >"$out/root/etc/apt/apt.conf.d/90graid-vmtest"
	chroot_root=$out/root in_chroot "$prepared:/var/cache/graid-dkms" <<EOS
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
cd /tmp/debs
bash -euxo pipefail /tmp/readme-install.sh >&2
EOS
	rm "$out/root/etc/apt/apt.conf.d/90graid-vmtest"
	"$GRAID_ROOT/selftests/debian/readme-block.sh" after-reboot "$GRAID_ROOT/README.md" >"$out/root/usr/local/sbin/graid-readme-after-reboot"
	chmod +x "$out/root/usr/local/sbin/graid-readme-after-reboot"
else
	log "installing graid's packages in the Debian VM's root (DKMS builds the module)"
	chroot_root=$out/root in_chroot "$prepared:/var/cache/graid-dkms" <<EOS
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get -q update >/dev/null
apt-get -q -y install /tmp/debs/graid-dkms_*_all.deb /tmp/debs/graid_*_amd64.deb >&2
EOS
fi
rm -rf "$out/root/tmp/debs" "$out/root/tmp/readme-install.sh"

# The test: a unit that runs the next step of the leg (selftests/debian/vmtest.sh) at every boot.
install -D -m 0755 -t "$out/root/usr/local/lib/graid-vmtest" "$GRAID_ROOT"/selftests/debian/*.sh
install -D -m 0644 "$GRAID_ROOT/selftests/debian/graid-vmtest.service" \
	"$out/root/etc/systemd/system/graid-vmtest.service"
ln -sf /etc/systemd/system/graid-vmtest.service "$out/root/etc/systemd/system/multi-user.target.wants/"
mkdir -p "$out/root/etc/graid-vmtest"
echo "$leg" >"$out/root/etc/graid-vmtest/leg"
# Under emulation the kernel's parity is faster than the helper's, and the module would send it
# little; the test wants to see jobs go there (as tests/26-offload does).
echo 'options raid_gpu offload_balance=0' >"$out/root/etc/modprobe.d/graid-vmtest.conf"
debian_boot_files "$out/root" "$out/boot"
size=$(($(du -sm "$out/root" | cut -f1) + 1024))
mkfs.ext4 -q -F -L graid-vm-root -d "$out/root" "$out/root.img" "${size}M" >&2
rm -rf "$out/root"
echo "$out"
