#!/usr/bin/env bash
# The Debian VM test's machine (selftests/debian-vm.sh): a stock trixie system booting Debian's
# own kernel ($DISTRO_KERNEL_RELEASE from backports) and initramfs, with graid installed from
# out/deb the way a user installs it (apt-get install ./graid-dkms_*.deb ./graid_*.deb: DKMS
# builds the module). The install runs in the image's root as a chroot on this machine, natively
# (inside the emulated VM the module's first build would take hours), as the package's DKMS hook
# would run on the machine. Prints the folder holding root.img, vmlinuz and initrd.img.
#
# The base system is the distro chroot (build/distro-chroot.sh: the kernel's headers and source,
# its compilers, dkms) with the kernel image and $DEBIAN_VM_PACKAGES installed, cached as a
# tarball under $GRAID_CACHE/debian-vm/HASH (the chroot's own hash, the package list, the
# setup). The kernel tree graid-dkms-build prepares once per kernel comes from the distro
# chroot's root (build/distro-module.sh made it with the same script and toolchain), so only the
# module is compiled here. --base: only make the base system.
set -euo pipefail
. "$(dirname "$0")/common.sh"
. "$GRAID_ROOT/build/distro-chroot.sh"

out=$GRAID_ROOT/out/debian-vm
debs=$GRAID_ROOT/out/deb
[ "${1:-}" = --base ] || ls "$debs"/graid_*_amd64.deb "$debs"/graid-dkms_*_all.deb >/dev/null 2>&1 ||
	die "no packages in $debs (make deb)"
# The base system: the distro chroot (its kernel headers and source, the compilers, dkms), plus
# the kernel image and what makes it a bootable machine. Made once (a few minutes).
packages="linux-image-$distro_rel=$distro_ver $DEBIAN_VM_PACKAGES"
# The kernel's modules for hardware an emulated machine with NVMe drives and no network card
# never has are left out: removing graid-dkms runs depmod over all of them, and under TCG that
# alone took 100 s of the test (each module is xz-compressed).
setup='echo graid-vm >/etc/hostname
printf "/dev/vda / ext4 rw,errors=remount-ro 0 1\n" >/etc/fstab
passwd -d root >/dev/null
: >/etc/machine-id
m=/lib/modules/'$distro_rel'/kernel
rm -rf $m/sound $m/drivers/media $m/drivers/gpu $m/drivers/iio $m/drivers/infiniband \
	$m/drivers/comedi $m/drivers/bluetooth $m/drivers/staging $m/drivers/net/wireless \
	$m/drivers/net/ethernet $m/drivers/net/can $m/drivers/net/usb $m/drivers/hwmon $m/drivers/mtd \
	$m/drivers/accel $m/drivers/usb $m/drivers/hid $m/net/wireless $m/net/mac80211 $m/net/bluetooth
depmod -a '$distro_rel
key=$(printf '%s\n' "$(basename "$distro_dir")" "$packages" "$setup" | sha256sum | cut -c1-16)
cache=$GRAID_CACHE/debian-vm/$key
distro_chroot_ready

mkdir -p "$GRAID_CACHE/debian-vm"
exec 8>"$GRAID_CACHE/debian-vm/build.lock"
flock 8
if ! [ -f "$cache/base.tar.zst" ]; then
	start=$(date +%s)
	log "creating the Debian VM's base system ($DISTRO_SUITE with $distro_rel)"
	rm -rf "$cache"
	mkdir -p "$cache/root"
	tar -C "$cache/root" -xf "$distro_dir/chroot.tar.zst"
	cp /etc/resolv.conf "$cache/root/etc/resolv.conf"
	chroot_root=$cache/root in_chroot <<EOS
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get -q update >/dev/null
apt-get -q -y install --no-install-recommends $packages >&2
apt-get clean
rm -rf /var/lib/apt/lists/*
$setup
EOS
	tar -C "$cache/root" -cf - . | zstd -q -T0 -3 >"$cache/base.tmp.tar.zst"
	mv "$cache/base.tmp.tar.zst" "$cache/base.tar.zst"
	rm -rf "$cache/root"
	log "base system made in $(($(date +%s) - start)) s"
fi
touch "$cache"
ls -1dt "$GRAID_CACHE"/debian-vm/*/ 2>/dev/null | tail -n +2 | xargs -r rm -rf
[ "${1:-}" != --base ] || exit 0

# A fresh root from the base every run, graid installed into it.
rm -rf "$out"
mkdir -p "$out/root"
tar -C "$out/root" -xf "$cache/base.tar.zst"
prepared=$distro_root/var/cache/graid-dkms
if [ -d "$prepared" ]; then
	mkdir -p "$out/root/var/cache"
	cp -a "$prepared" "$out/root/var/cache/"
	rm -f "$out/root/var/cache/graid-dkms/.lock"
fi
mkdir -p "$out/root/tmp/debs"
cp "$debs"/graid_*_amd64.deb "$debs"/graid-dkms_*_all.deb "$out/root/tmp/debs/"
log "installing graid's packages in the Debian VM's root (DKMS builds the module)"
chroot_root=$out/root in_chroot <<EOS
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get -q -y install /tmp/debs/graid-dkms_*_all.deb /tmp/debs/graid_*_amd64.deb >&2
# The postinst builds for the running kernel; this chroot's is the build machine's, so build for
# the image's kernel as booting it would.
dkms autoinstall -k $distro_rel >&2
rm -rf /tmp/debs
EOS
# The test: a unit that runs the next step of selftests/debian/vmtest.sh at every boot.
install -D -m 0755 -t "$out/root/usr/local/lib/graid-vmtest" \
	"$GRAID_ROOT/selftests/debian/vmtest.sh" "$GRAID_ROOT/selftests/debian/package-check.sh"
install -D -m 0644 "$GRAID_ROOT/selftests/debian/graid-vmtest.service" \
	"$out/root/etc/systemd/system/graid-vmtest.service"
ln -sf /etc/systemd/system/graid-vmtest.service "$out/root/etc/systemd/system/multi-user.target.wants/"
# Under emulation the kernel's parity is faster than the helper's, and the module would send it
# little; the test wants to see jobs go there (as tests/26-offload does).
echo 'options raid_gpu offload_balance=0' >"$out/root/etc/modprobe.d/graid-vmtest.conf"
cp "$out/root/boot/vmlinuz-$distro_rel" "$out/vmlinuz"
cp "$out/root/boot/initrd.img-$distro_rel" "$out/initrd.img"
size=$(($(du -sm "$out/root" | cut -f1) + 1024))
mkfs.ext4 -q -F -L graid-vm-root -d "$out/root" "$out/root.img" "${size}M" >&2
rm -rf "$out/root"
echo "$out"
