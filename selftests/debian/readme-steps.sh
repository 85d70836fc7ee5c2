#!/bin/bash
# The Debian VM test's README leg (selftests/debian-vm.sh): a fresh trixie machine into which the
# README's "Install on Debian 13" block was run as written, up to its reboot (build/debian-image.sh
# readme), booted into the newest kernel it has (the one trixie-backports serves today, as a
# boot loader picks it). Each boot runs the next step:
#   1. The rest of the README's block, as written (graid-readme-after-reboot: dkms status graid)
#      says raid_gpu is installed for the running kernel, with its vermagic; the monitor started
#      at boot and says nothing is missing; a RAID 5 is created, gets an ext4 that udev knows by
#      UUID and label (by-uuid and by-label links, lsblk -f's FSTYPE and UUID), which goes in
#      fstab by UUID= with nofail as the README advises, and verified data; reboot.
#   2. The array is assembled by udev with no command, its filesystem mounted by UUID, clean (no
#      resync ran, no last-resort start considered), the data verifies; power off.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
disks=(/dev/disk/by-id/nvme-QEMU_NVMe_Ctrl_graid-rd-{0,1,2})

say "kernel $(uname -r)"
case $step in
1)
	out=$(graid-readme-after-reboot 2>&1) || fail "the README's lines after its reboot: $out"
	echo "$out" | sed 's/^/readme: /'
	echo "$out" | grep -q "^graid/[^,]*, $(uname -r), x86_64: installed" ||
		fail "the README's dkms status does not show raid_gpu installed for $(uname -r)"
	dkms_installed
	systemctl is-active graid-monitor >/dev/null || fail "graid-monitor.service did not start at boot"
	journalctl -b -u graid-monitor --no-pager | grep -q module-missing &&
		fail "module-missing: $(journalctl -b -u graid-monitor --no-pager)"
	modprobe raid_gpu || fail "modprobe raid_gpu failed"
	graidctl create data --level 5 --chunk 64K "${disks[@]}" || fail "create data"
	graidctl wait data >/dev/null 2>&1 || fail "the initial resync"
	mkfs.ext4 -q -L graid-data /dev/graid/data || fail "mkfs.ext4"
	fs_links /dev/graid/data graid-data
	uuid=$(lsblk -n -d -o UUID /dev/graid/data)
	mkdir -p /srv/data
	echo "UUID=$uuid /srv/data ext4 defaults,nofail 0 2" >>/etc/fstab
	systemctl daemon-reload
	mount /srv/data || fail "mount /srv/data (UUID=$uuid)"
	fio_files write /srv/data 24M
	fio_files verify /srv/data 24M
	say "$(graidctl list)"
	done_step
	systemctl reboot
	;;
2)
	wait_for 180 "/srv/data mounted" findmnt /srv/data
	[ "$(findmnt -n -o SOURCE /srv/data)" = "$(readlink -f /dev/graid/data)" ] ||
		fail "/srv/data is mounted from $(findmnt -n -o SOURCE /srv/data)"
	[ "$(json data state)" = optimal ] || fail "data: $(graidctl detail data)"
	[ "$(json data resync_pending)" = false ] || fail "data resyncs after an orderly reboot"
	[ "$(lines 'resync')" = 0 ] || fail "a resync ran: $(journalctl -b -k --no-pager | grep resync)"
	[ "$(lines 'bitmap regions')" = 0 ] || fail "the kernel's log speaks of bitmap regions"
	no_last_resort
	fs_links /dev/graid/data graid-data
	fio_files verify /srv/data 24M
	say "$(graidctl list)"
	done_step
	systemctl poweroff
	;;
*)
	say "no step $step"
	systemctl poweroff
	;;
esac
