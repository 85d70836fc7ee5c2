#!/usr/bin/env bash
# graid on stock Debian machines (issues 30 and 44): boots Debian trixie machines made by
# build/debian-image.sh, each booting Debian's own kernels, with graid installed from out/deb
# the way a user installs it, and runs the steps of selftests/debian/ over several power-ons:
#
# The README leg (readme-steps.sh): a fresh trixie into which the README's "Install on Debian
# 13" block was run as written (extracted from README.md), on the kernel trixie-backports serves
# today:
#   power-on 1: step 1 (the block's lines after its reboot, an array whose filesystem goes in
#               fstab by UUID), the guest's own reboot, step 2 (mounted by UUID, clean).
# The upgrade leg (upgrade-steps.sh): trixie on the oldest supported kernel ($DISTRO_KERNELS'
# first, pinned):
#   power-on 1: step 1 (install checks, arrays, fstab, data), the guest's own reboot, step 2
#               (assembled, mounted and clean by themselves, data verified);
#   power-on 2: without one RAID 5 member: step 3 (started degraded by the last-resort timer);
#   power-on 3: the member back and a fourth drive: step 4 (re-add, rebuild, check, helper, a
#               grow by the fourth drive), the guest's own reboot in the middle of the grow,
#               step 5 (back by itself, the restripe ends, resize2fs, verified, check);
#   then selftests/debian/upgrade.sh in the machine's root: apt upgrade to the kernel backports
#   serves now, and a kernel of a series graid does not support;
#   power-on 4: the new kernel: step 6 (arrays back, mounted, clean, verified);
#   power-on 5: the unsupported kernel: step 7 (boots, module-missing, apt healthy, purge).
# Then every member's superblock must say clean (graidctl examine on the drive images).
# DEBIAN_VM_LEGS: the legs to run ("readme upgrade"); DEBIAN_VM_TIMEOUT: seconds per power-on
# (900).
set -euo pipefail
. "$(dirname "$0")/../build/common.sh"
. "$GRAID_ROOT/build/distro-chroot.sh"

timeout=${DEBIAN_VM_TIMEOUT:-900}
graidctl=$GRAID_ROOT/tools/target/release/graidctl

# power_on DIR RELEASE STEPS DRIVE...: boots the machine of DIR (root.img, boot/) into kernel
# RELEASE with the given member drives until the guest powers off; fails unless it reported
# GRAID-STEP-OK for each of STEPS (space-separated).
power_on() {
	local dir=$1 rel=$2 steps=$3 args=() d
	shift 3
	for d in "$@"; do
		args+=(-drive "if=none,id=$d,file=$dir/$d.img,format=raw,aio=threads,cache=unsafe"
			-device "nvme,serial=graid-$d,drive=$d")
	done
	local tag="${steps// /-}"
	local console=$dir/console-$tag.log out=$dir/steps-$tag.log
	log "Debian VM ($(basename "$dir")): power-on for step(s) $steps, kernel $rel, with ${*}"
	set +e
	timeout -k 10 "$timeout" qemu-system-x86_64 -accel tcg,thread=multi -cpu max -smp 2 -m 3072 \
		-nodefaults -display none \
		-kernel "$dir/boot/vmlinuz-$rel" -initrd "$dir/boot/initrd.img-$rel" \
		-append "root=/dev/vda rw console=ttyS0 panic=-1 systemd.show_status=1" \
		-drive "if=virtio,file=$dir/root.img,format=raw,cache=unsafe" \
		"${args[@]}" \
		-serial "file:$console" -chardev stdio,id=out,signal=off -serial chardev:out </dev/null |
		tee "$out" | sed 's/^/# /'
	local rc=${PIPESTATUS[0]}
	set -e
	for s in $steps; do
		if ! grep -q "^GRAID-STEP-OK $s" "$out"; then
			log "step $s did not pass (qemu exit $rc); the console's last lines:"
			tail -n 40 "$console" | sed 's/^/#   /' >&2
			die "Debian VM test ($(basename "$dir")): step $s failed"
		fi
	done
}

# newest DIR: the newest kernel of the machine (what a boot loader boots by default).
newest() { ls "$1/boot" | sed -n 's/^vmlinuz-//p' | sort -V | tail -n 1; }

# drives DIR NAME...: fresh, empty member drives.
drives() {
	local dir=$1 d
	shift
	for d in "$@"; do
		rm -f "$dir/$d.img"
		truncate -s 160M "$dir/$d.img"
	done
}

# all_clean DIR DRIVE...: every member's superblock says clean after the last power-off.
all_clean() {
	local dir=$1 d state
	shift
	for d in "$@"; do
		state=$("$graidctl" examine "$dir/$d.img" | sed -n 's/^ *State : //p')
		[ "$state" = clean ] || die "Debian VM test: $d's superblock says '$state' after the power-off"
	done
}

readme_leg() {
	local dir rel
	dir=$("$GRAID_ROOT/build/debian-image.sh" readme)
	rel=$(newest "$dir")
	drives "$dir" rd-0 rd-1 rd-2
	power_on "$dir" "$rel" "1 2" rd-0 rd-1 rd-2
	all_clean "$dir" rd-0 rd-1 rd-2
}

upgrade_leg() {
	local dir mnt
	dir=$("$GRAID_ROOT/build/debian-image.sh" upgrade)
	local u=(r5-0 r5-1 r5-2 r1-0 r1-1)
	drives "$dir" "${u[@]}" r5-3
	power_on "$dir" "$distro_rel" "1 2" "${u[@]}"
	# graid.shutdown's word at the reboot (after the journal stopped: only the console has it).
	grep -q 'graidctl: every array is clean' "$dir/console-1-2.log" ||
		die "Debian VM test: graid.shutdown did not see every array clean at the reboot"
	power_on "$dir" "$distro_rel" "3" r5-0 r5-1 r1-0 r1-1
	# From here on r5 has a fourth drive (step 4 grows it onto it).
	u+=(r5-3)
	power_on "$dir" "$distro_rel" "4 5" "${u[@]}"

	# The upgrade, in the machine's root: the image mounted here (a loop device).
	mnt=$dir/mnt
	mkdir -p "$mnt"
	mount -o loop "$dir/root.img" "$mnt" || die "cannot mount $dir/root.img (the upgrade needs a loop device)"
	local rc=0
	log "Debian VM (upgrade): apt upgrade in the machine's root"
	chroot_root=$mnt in_chroot "$GRAID_CACHE/dkms-prepared:/var/cache/graid-dkms" \
		"$GRAID_ROOT/selftests/debian:/checks:ro" <<<'bash /checks/upgrade.sh' 2>&1 |
		sed 's/^/# /' || rc=$?
	[ "$rc" = 0 ] || { umount "$mnt"; die "Debian VM test (upgrade): the upgrade failed"; }
	debian_boot_files "$mnt" "$dir/boot"
	local new unsupported
	new=$(cat "$mnt/etc/graid-vmtest/new-kernel")
	unsupported=$(cat "$mnt/etc/graid-vmtest/unsupported-kernel")
	umount "$mnt"
	[ "$(newest "$dir")" = "$new" ] || die "the upgrade's kernel $new is not the newest: $(ls "$dir/boot")"

	power_on "$dir" "$new" "6" "${u[@]}"
	power_on "$dir" "$unsupported" "7" "${u[@]}"
	all_clean "$dir" "${u[@]}"
}

start=$(date +%s)
for leg in ${DEBIAN_VM_LEGS:-readme upgrade}; do
	case $leg in
	readme) readme_leg ;;
	upgrade) upgrade_leg ;;
	*) die "unknown Debian VM leg '$leg' (readme, upgrade)" ;;
	esac
	log "Debian VM test: the $leg leg passed at +$(($(date +%s) - start)) s"
done
log "Debian VM test passed in $(($(date +%s) - start)) s"
