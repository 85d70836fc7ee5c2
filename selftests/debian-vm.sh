#!/usr/bin/env bash
# graid on a stock Debian machine (issue 30's test): boots the image of build/debian-image.sh,
# Debian trixie with its own 7.2 kernel and graid installed from out/deb, with five NVMe drives,
# and runs selftests/debian/vmtest.sh's four steps over three power-ons:
#   power-on 1: step 1 (install checks, arrays, fstab, data), the guest's own reboot, step 2
#               (assembled, mounted and clean by themselves, data verified);
#   power-on 2: without one RAID 5 member: step 3 (started degraded by the last-resort timer);
#   power-on 3: the member back: step 4 (re-add, rebuild, check, helper, purge).
# Then every member's superblock must say clean (graidctl examine on the drive images).
# DEBIAN_VM_TIMEOUT: seconds per power-on (900).
set -euo pipefail
. "$(dirname "$0")/../build/common.sh"

image=$("$GRAID_ROOT/build/debian-image.sh")
work=$GRAID_ROOT/out/debian-vm
timeout=${DEBIAN_VM_TIMEOUT:-900}
drives=(r5-0 r5-1 r5-2 r1-0 r1-1)
for d in "${drives[@]}"; do
	rm -f "$work/$d.img"
	truncate -s 160M "$work/$d.img"
done

# power_on STEPS DRIVE...: boots with the given member drives until the guest powers off; fails
# unless it reported GRAID-STEP-OK for each of STEPS (space-separated).
power_on() {
	local steps=$1 args=() d
	shift
	for d in "$@"; do
		args+=(-drive "if=none,id=$d,file=$work/$d.img,format=raw,aio=threads,cache=unsafe"
			-device "nvme,serial=graid-$d,drive=$d")
	done
	local console=$work/console-${steps// /-}.log out=$work/steps-${steps// /-}.log
	log "Debian VM: power-on for step(s) $steps with ${*}"
	set +e
	timeout -k 10 "$timeout" qemu-system-x86_64 -accel tcg,thread=multi -cpu max -smp 2 -m 3072 \
		-nodefaults -display none \
		-kernel "$image/vmlinuz" -initrd "$image/initrd.img" \
		-append "root=/dev/vda rw console=ttyS0 panic=-1 systemd.show_status=1" \
		-drive "if=virtio,file=$image/root.img,format=raw,cache=unsafe" \
		"${args[@]}" \
		-serial "file:$console" -chardev stdio,id=out,signal=off -serial chardev:out </dev/null |
		tee "$out" | sed 's/^/# /'
	local rc=${PIPESTATUS[0]}
	set -e
	for s in $steps; do
		if ! grep -q "^GRAID-STEP-OK $s" "$out"; then
			log "step $s did not pass (qemu exit $rc); the console's last lines:"
			tail -n 40 "$console" | sed 's/^/#   /' >&2
			die "Debian VM test: step $s failed"
		fi
	done
}

start=$(date +%s)
power_on "1 2" "${drives[@]}"
# graid.shutdown's word at the reboot (after the journal stopped: only the console has it).
grep -q 'graidctl: every array is clean' "$work/console-1-2.log" ||
	die "Debian VM test: graid.shutdown did not see every array clean at the reboot"
power_on "3" r5-0 r5-1 r1-0 r1-1
power_on "4" "${drives[@]}"
for d in "${drives[@]}"; do
	state=$("$GRAID_ROOT/tools/target/release/graidctl" examine "$work/$d.img" | sed -n 's/^ *State : //p')
	[ "$state" = clean ] || die "Debian VM test: $d's superblock says '$state' after the power-off"
done
log "Debian VM test passed in $(($(date +%s) - start)) s"
