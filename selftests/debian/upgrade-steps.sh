#!/bin/bash
# The Debian VM test's upgrade leg (selftests/debian-vm.sh): a trixie machine on the oldest kernel
# graid supports, with graid installed from its packages (build/debian-image.sh upgrade), through
# a kernel upgrade to the one trixie-backports serves now and a boot into a kernel graid does not
# support. Each boot runs the next step:
#   1. (oldest kernel) DKMS installed the module for the running kernel; the helper and the
#      monitor start with the module (the monitor already runs: it started at boot); a RAID 5
#      and a RAID 1 are created (the monitor logs them), listed in graid.conf; the scheduled
#      check's service checks the RAID 1 but not the RAID 5 (check=no) and a planted mismatch
#      reaches the monitor; each gets an ext4, with udev's by-uuid and by-label links and lsblk
#      -f's FSTYPE, in fstab with nofail (the RAID 5 by UUID=, the RAID 1 by /dev/graid/r1), and
#      verified data; r1 is exported over NVMe/TCP on the loopback; reboot.
#   2. Both are assembled by udev with no command, mounted, clean (no resync ran, no last-resort
#      start considered), the data verifies; r1's export is back (graid-export@.service) and reads
#      as r1; power off (the host then boots without one of the RAID 5's members).
#   3. The RAID 5 starts degraded by the last-resort timer, is mounted, serves verified data and
#      takes more; power off (the host gives the member back).
#   4. The returned member is stale: the array starts degraded again, re-add rebuilds it, the
#      data verifies, a check finds no mismatch, parity went to the helper; then r5 is grown by
#      a fourth member (a new drive) and the machine reboots in the middle of the restripe.
#   5. r5 came back by itself (udev, with its new member) and its restripe goes on from the
#      position recorded to its end; resize2fs grows the mounted filesystem into the new room;
#      the data verifies, a check finds no mismatch; power off. The host then runs
#      selftests/debian/upgrade.sh in the machine's root: apt upgrade brings the new kernel and
#      its source, DKMS builds for it; a kernel of a series graid does not support (trixie's
#      own, without Rust) installs with apt healthy.
#   6. (the new kernel, the newest, as a boot loader would pick) DKMS's module for it is loaded;
#      both arrays are back by themselves, mounted, clean, the data verifies; the module's sysfs
#      files read and take a value; power off.
#   7. (the unsupported kernel) the machine boots (the arrays' mounts are nofail), no array
#      starts, the monitor reports module-missing naming the kernels that have the module, dpkg
#      and apt are healthy; the packages are purged and leave nothing behind; power off (the host
#      then checks that every member's superblock says clean).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
r5=(/dev/disk/by-id/nvme-QEMU_NVMe_Ctrl_graid-r5-{0,1,2,3})
r1=(/dev/disk/by-id/nvme-QEMU_NVMe_Ctrl_graid-r1-{0,1})

say "kernel $(uname -r)"
case $step in
1)
	dkms_installed
	$lib/package-check.sh installed || fail "the installed packages"
	for page in graidctl-assemble graidctl-monitor graid.conf raid_gpu; do
		man -w $page >/dev/null 2>&1 || [ ! -x /usr/bin/man ] || fail "man finds no $page"
	done
	# The monitor runs from boot, waiting quietly for the module (installed, not loaded yet).
	systemctl is-active graid-monitor >/dev/null || fail "graid-monitor.service did not start at boot"
	journalctl -b -u graid-monitor --no-pager | grep -q module-missing &&
		fail "module-missing with the module installed: $(journalctl -b -u graid-monitor --no-pager)"
	modprobe raid_gpu || fail "modprobe raid_gpu failed"
	wait_for 30 "graid-helper.service after modprobe" systemctl is-active graid-helper
	wait_for 30 "graid-monitor watching the arrays after modprobe" monitor_watching
	graidctl create r5 --level 5 --chunk 64K "${r5[@]:0:3}" || fail "create r5"
	graidctl create r1 --level 1 "${r1[@]}" || fail "create r1"
	# (Progress bars go to standard error, a terminal here: they would fill the log.)
	graidctl wait r5 >/dev/null 2>&1 && graidctl wait r1 >/dev/null 2>&1 || fail "the initial resyncs"
	# The monitor service saw them come, and logged it to the journal.
	wait_for 30 "the monitor's new-array events in the journal" \
		sh -c '[ "$(journalctl -b -u graid-monitor --no-pager | grep -c "new-array /dev/graid")" -ge 2 ]'
	# The scheduled check: the timer is on; its service checks r1 but not r5, which graid.conf
	# leaves out (the ARRAY lines of detail --scan, which boot assembly then also reads). A
	# mismatch planted in r1's second copy (64 KiB near the end of its data area, which starts
	# at 2 MiB) reaches the monitor with the check's end; a repair clears it.
	systemctl is-enabled graid-check.timer >/dev/null && systemctl is-active graid-check.timer >/dev/null ||
		fail "graid-check.timer is not on: $(systemctl status graid-check.timer)"
	graidctl detail --scan | sed '/\/r5 /s/$/ check=no/' >>/etc/graid/graid.conf
	grep -q '^ARRAY /dev/graid/r5 UUID=.* check=no$' /etc/graid/graid.conf || fail "graid.conf: $(cat /etc/graid/graid.conf)"
	size=$(json r1 size_bytes)
	dd if=/dev/urandom of="${r1[1]}" bs=4k count=16 seek=$(((1048576 + size) / 4096)) oflag=direct \
		conv=notrunc 2>/dev/null || fail "planting a mismatch"
	graidctl set-speed r1 --min 16M --max 16M >/dev/null || fail "set-speed r1"
	systemctl start graid-check.service || fail "graid-check.service: $(journalctl -b -u graid-check --no-pager)"
	journalctl -b -u graid-check --no-pager | grep -q 'r5): not checked: check=no' ||
		fail "the scheduled check did not leave r5 out: $(journalctl -b -u graid-check --no-pager)"
	wait_for 120 "the check's mismatches reaching the monitor" \
		sh -c 'journalctl -b -u graid-monitor --no-pager | grep -Eq "check-finished /dev/graid[0-9]+: mismatches=[1-9]"'
	journalctl -b -u graid-monitor --no-pager | grep -q "mismatches-found /dev/graid" ||
		fail "no mismatches-found: $(journalctl -b -u graid-monitor --no-pager)"
	graidctl repair r1 --wait >/dev/null 2>&1 || fail "repair r1"
	graidctl check r1 --wait 2>/dev/null | grep -q 'check finished: 0 mismatched sectors' ||
		fail "r1 after the repair: $(graidctl detail r1)"
	say "scheduled check: $(journalctl -b -u graid-monitor --no-pager | grep -o 'check-finished.*' | head -n 1)"
	# NVMe-oF: r1 exported over TCP on the loopback to this host's own NQN, kept in
	# /etc/graid/exports.conf for the next boot.
	[ -s /etc/nvme/hostnqn ] || nvme gen-hostnqn >/etc/nvme/hostnqn
	graidctl export r1 --addr 127.0.0.1 --allow-host "$(cat /etc/nvme/hostnqn)" || fail "export r1"
	grep -q "^EXPORT $(json r1 uuid) name=r1 " /etc/graid/exports.conf || fail "exports.conf: $(cat /etc/graid/exports.conf)"
	udevadm settle
	# Both belong to this host (its /etc/hostname), so boot assembly starts them.
	for a in r5 r1; do
		[ "$(json $a homehost)" = "$(hostname)" ] || fail "$a's home host: $(graidctl detail $a)"
	done
	say "$(graidctl list)"
	# Each filesystem is known to udev by its UUID and label (65-graid.rules' blkid), and fstab
	# names r5's by UUID=, as Debian's installer writes fstab, with nofail as the README advises.
	for a in r5 r1; do
		mkfs.ext4 -q -L "data-$a" /dev/graid/$a || fail "mkfs.ext4 on /dev/graid/$a"
		fs_links /dev/graid/$a "data-$a"
		mkdir -p /srv/$a
	done
	echo "UUID=$(blkid -o value -s UUID /dev/graid/r5) /srv/r5 ext4 defaults,nofail 0 2" >>/etc/fstab
	echo "/dev/graid/r1 /srv/r1 ext4 defaults,nofail 0 2" >>/etc/fstab
	systemctl daemon-reload
	mount -a || fail "mount -a"
	fio_files write /srv/r5 32M
	fio_files write /srv/r1 8M
	fio_files verify /srv/r5 32M
	fio_files verify /srv/r1 8M
	say "data written and verified"
	jobs=$(graidctl --json helper | sed -n 's/.*"jobs": *\([0-9]*\).*/\1/p' | head -n 1)
	say "helper: $(graidctl helper | grep -E 'Helper|Offloaded')"
	[ "${jobs:-0}" -gt 0 ] || fail "no parity job went to graid-helper: $(graidctl helper)"
	done_step
	systemctl reboot
	;;
2)
	wait_for 120 "/srv/r5 mounted" findmnt /srv/r5
	wait_for 120 "/srv/r1 mounted" findmnt /srv/r1
	for a in r5 r1; do
		[ "$(json $a state)" = optimal ] || fail "$a: $(graidctl detail $a)"
		[ "$(json $a resync_pending)" = false ] || fail "$a resyncs after an orderly reboot: $(graidctl detail $a)"
	done
	# Marked clean at the reboot (graid.shutdown): no resync, no partial parity log replay, and
	# nothing in the kernel's log that reads like one; no degraded start was considered.
	[ "$(lines 'resync')" = 0 ] || fail "a resync ran: $(journalctl -b -k --no-pager | grep resync)"
	[ "$(lines 'log replayed')" = 0 ] || fail "a log was replayed: $(journalctl -b -k --no-pager | grep replayed)"
	[ "$(lines 'bitmap regions')" = 0 ] || fail "the kernel's log speaks of bitmap regions: $(journalctl -b -k --no-pager | grep 'bitmap regions')"
	no_last_resort
	[ "$(findmnt -n -o SOURCE /srv/r5)" = "$(readlink -f /dev/graid/r5)" ] ||
		fail "/srv/r5 is mounted from $(findmnt -n -o SOURCE /srv/r5), not r5"
	fs_links /dev/graid/r5 data-r5
	fio_files verify /srv/r5 32M
	fio_files verify /srv/r1 8M
	say "$(graidctl list)"
	# r1's export came back at boot (udev wanted graid-export@graidN.service as r1 started); the
	# host connects over the loopback and reads what the array holds.
	wait_for 60 "r1 exported again" sh -c 'graidctl detail r1 | grep -q "Exported :"'
	systemctl list-units --all --no-legend 'graid-export@*' | grep -q . || fail "no graid-export unit ran"
	nqn=$(graidctl --json detail r1 | sed -n 's/.*"nqn": *"\([^"]*\)".*/\1/p' | head -n 1)
	modprobe nvme-tcp || fail "modprobe nvme-tcp"
	nvme connect -t tcp -a 127.0.0.1 -s 4420 -n "$nqn" >/dev/null || fail "nvme connect to $nqn"
	uuid=$(json r1 uuid)
	# The namespace's block device, not its paths (nvmeXcYnZ: hidden, no device node).
	ns_of() { grep -l "^$1\$" /sys/block/nvme*/uuid 2>/dev/null | grep -v '/nvme[0-9]*c[0-9]*n' | head -n 1; }
	has_ns() { [ -n "$(ns_of "$1")" ]; }
	wait_for 10 "the namespace of r1 on the host" has_ns "$uuid"
	fab=/dev/$(basename "$(dirname "$(ns_of $uuid)")")
	[ -b "$fab" ] || fail "$fab is not a block device"
	a=$(dd if="$fab" bs=1M count=8 iflag=direct 2>/dev/null | md5sum)
	b=$(dd if=/dev/graid/r1 bs=1M count=8 iflag=direct 2>/dev/null | md5sum)
	[ "$a" = "$b" ] || fail "$fab reads other data than /dev/graid/r1"
	say "r1 over NVMe/TCP after the reboot: $fab, $(graidctl detail r1 | grep Exported)"
	nvme disconnect -n "$nqn" >/dev/null || fail "nvme disconnect"
	graidctl unexport r1 || fail "unexport r1"
	done_step
	systemctl poweroff
	;;
3)
	# Member 2 of r5 is not attached: the last-resort timer starts it after 30 s.
	wait_for 180 "/srv/r5 mounted degraded" findmnt /srv/r5
	[ "$(json r5 state)" = degraded ] || fail "r5: $(graidctl detail r5)"
	systemctl list-units --all --no-legend 'graid-last-resort@*' | grep -q . ||
		fail "no graid-last-resort unit ran"
	fio_files verify /srv/r5 32M
	mkdir -p /srv/r5/degraded
	fio_files write /srv/r5/degraded 8M
	wait_for 60 "/srv/r1 mounted" findmnt /srv/r1
	fio_files verify /srv/r1 8M
	say "$(graidctl detail r5 | grep -E 'State|Members')"
	done_step
	systemctl poweroff
	;;
4)
	# All members are back; the one missed the degraded writes and stays out until re-added.
	wait_for 180 "/srv/r5 mounted" findmnt /srv/r5
	[ "$(json r5 state)" = degraded ] || fail "r5 took its stale member back by itself: $(graidctl detail r5)"
	graidctl re-add r5 "${r5[2]}" || fail "re-add"
	graidctl wait r5 >/dev/null 2>&1 || fail "the rebuild after re-add"
	[ "$(json r5 state)" = optimal ] || fail "r5 after re-add: $(graidctl detail r5)"
	fio_files verify /srv/r5 32M
	fio_files verify /srv/r5/degraded 8M
	graidctl check r5 --wait 2>/dev/null | grep -q 'check finished: 0 mismatched sectors' ||
		fail "check after the re-add: $(graidctl detail r5)"
	jobs=$(graidctl --json helper | sed -n 's/.*"jobs": *\([0-9]*\).*/\1/p' | head -n 1)
	[ "${jobs:-0}" -gt 0 ] || fail "no parity job went to graid-helper: $(graidctl helper)"
	say "re-added, rebuilt, read back and checked"
	# Grown by a fourth drive (issue 46), slowly, and the machine reboots in the middle.
	graidctl set-speed r5 --min 1M --max 1M || fail "set-speed"
	graidctl grow r5 --raid-devices 4 --add "${r5[3]}" || fail "grow r5"
	sleep 2
	graidctl detail r5 | grep -q 'Reshape : ' || fail "r5 is not restriping: $(graidctl detail r5)"
	say "$(graidctl detail r5 | grep 'Reshape : ')"
	done_step
	systemctl reboot
	;;
5)
	# r5 came back by itself with its new member, and its restripe goes on where it stopped.
	wait_for 180 "/srv/r5 mounted after the reboot mid-grow" findmnt /srv/r5
	[ "$(lines 'its reshape goes on from sector')" -ge 1 ] ||
		fail "the restripe was not taken up: $(journalctl -b -k --no-pager | grep -i reshape)"
	no_last_resort
	graidctl set-speed r5 --min 100M --max 0 || fail "set-speed"
	graidctl wait r5 >/dev/null 2>&1 || fail "the restripe after the reboot: $(graidctl detail r5)"
	graidctl wait r5 >/dev/null 2>&1 || fail "the resync of the new room: $(graidctl detail r5)"
	[ "$(json r5 raid_devices)" = 4 ] || fail "r5 after its restripe: $(graidctl detail r5)"
	[ "$(json r5 state)" = optimal ] || fail "r5 after its restripe: $(graidctl detail r5)"
	dev=$(readlink -f /dev/graid/r5)
	before=$(df -k --output=size /srv/r5 | tail -n 1)
	resize2fs "$dev" >/tmp/resize2fs.out 2>&1 || fail "online resize2fs: $(cat /tmp/resize2fs.out)"
	after=$(df -k --output=size /srv/r5 | tail -n 1)
	[ "$after" -gt $((before * 4 / 3)) ] || fail "/srv/r5 has $after KiB after resize2fs, $before before"
	fio_files verify /srv/r5 32M
	fio_files verify /srv/r5/degraded 8M
	graidctl check r5 --wait 2>/dev/null | grep -q 'check finished: 0 mismatched sectors' ||
		fail "check after the restripe: $(graidctl detail r5)"
	say "restriped across a reboot: $(graidctl detail r5 | grep -E 'Members|Array Size')"
	done_step
	systemctl poweroff
	;;
6)
	# The kernel apt upgrade brought (selftests/debian/upgrade.sh), booted as the newest.
	[ "$(uname -r)" = "$(cat /etc/graid-vmtest/new-kernel)" ] ||
		fail "booted $(uname -r), not the upgrade's $(cat /etc/graid-vmtest/new-kernel)"
	dkms_installed
	wait_for 180 "/srv/r5 mounted after the upgrade" findmnt /srv/r5
	wait_for 60 "/srv/r1 mounted after the upgrade" findmnt /srv/r1
	for a in r5 r1; do
		[ "$(json $a state)" = optimal ] || fail "$a after the upgrade: $(graidctl detail $a)"
		[ "$(json $a resync_pending)" = false ] || fail "$a resyncs after the upgrade: $(graidctl detail $a)"
	done
	[ "$(lines 'resync')" = 0 ] || fail "a resync ran: $(journalctl -b -k --no-pager | grep resync)"
	no_last_resort
	fio_files verify /srv/r5 32M
	fio_files verify /srv/r5/degraded 8M
	fio_files verify /srv/r1 8M
	# What differs between kernel series (rust/compat.rs) works here too: the sysfs files read
	# and take a value (the module's parameters have no sysfs files: the VM suite's tests load
	# the module with them, on both series).
	d=$(readlink -f /dev/graid/r5)
	[ "$(cat /sys/block/${d#/dev/}/graid/level)" = raid5 ] || fail "sysfs level: $(cat /sys/block/${d#/dev/}/graid/level)"
	[ "$(cat /sys/block/${d#/dev/}/graid/array_state)" = clean ] ||
		[ "$(cat /sys/block/${d#/dev/}/graid/array_state)" = active ] || fail "sysfs array_state: $(cat /sys/block/${d#/dev/}/graid/array_state)"
	# (Above the floor, 100 MiB/s by default: a cap under it is refused.)
	echo 512000 >/sys/block/${d#/dev/}/graid/sync_speed_max || fail "sysfs sync_speed_max refused 512000"
	[ "$(cat /sys/block/${d#/dev/}/graid/sync_speed_max)" = 512000 ] ||
		fail "sysfs sync_speed_max reads $(cat /sys/block/${d#/dev/}/graid/sync_speed_max) after 512000"
	wait_for 30 "graid-monitor watching the arrays" monitor_watching
	journalctl -b -u graid-monitor --no-pager | grep -q module-missing && fail "module-missing under $(uname -r)"
	say "$(graidctl list)"
	done_step
	systemctl poweroff
	;;
7)
	# A kernel graid does not support (trixie's own, of another series and without Rust): the
	# machine still boots, the arrays do not start, and the monitor says why.
	[ "$(uname -r)" = "$(cat /etc/graid-vmtest/unsupported-kernel)" ] ||
		fail "booted $(uname -r), not $(cat /etc/graid-vmtest/unsupported-kernel)"
	! ls /lib/modules/"$(uname -r)"/updates/dkms/raid_gpu.ko* >/dev/null 2>&1 ||
		fail "DKMS built raid_gpu for $(uname -r)"
	wait_for 60 "the monitor's module-missing event" \
		sh -c 'journalctl -b -u graid-monitor --no-pager | grep -q "module-missing raid_gpu"'
	event=$(journalctl -b -u graid-monitor --no-pager | grep -o "module-missing raid_gpu.*" | head -n 1)
	say "monitor: $event"
	case $event in *"$(cat /etc/graid-vmtest/new-kernel)"*) ;; *) fail "module-missing does not name $(cat /etc/graid-vmtest/new-kernel)" ;; esac
	systemctl is-active graid-monitor >/dev/null || fail "the monitor stopped: $(systemctl status graid-monitor)"
	[ ! -e /sys/module/raid_gpu ] || fail "raid_gpu is loaded under $(uname -r)"
	ls /sys/block | grep -q '^graid' && fail "an array is there under $(uname -r)"
	findmnt /srv/r5 >/dev/null || findmnt /srv/r1 >/dev/null && fail "an array's filesystem is mounted"
	# Up, not in emergency mode: the boot waited for no array (nofail), and once the arrays'
	# devices timed out (90 s) their mounts were given up, leaving no job but this test's own
	# (which keeps is-system-running at "starting").
	settled() { [ -z "$(systemctl list-jobs --no-legend | grep -v graid-vmtest)" ]; }
	wait_for 150 "the boot's jobs done: $(systemctl list-jobs --no-legend | tr '\n' ';')" settled
	systemctl is-active multi-user.target >/dev/null || fail "multi-user.target is not active"
	! systemctl is-active emergency.target rescue.target >/dev/null || fail "emergency or rescue mode"
	for m in srv-r5.mount srv-r1.mount; do
		[ "$(systemctl show -P ActiveState $m)" != active ] || fail "$m is active"
	done
	system="multi-user, $(systemctl --failed --no-legend | wc -l) failed units"
	[ -z "$(dpkg --audit)" ] || fail "dpkg --audit: $(dpkg --audit)"
	apt-get check >/dev/null 2>&1 || fail "apt-get check: $(apt-get check 2>&1)"
	say "system $system, dpkg and apt healthy, no array"
	$lib/package-check.sh purge || fail "the purge"
	sed 's/^/purge: /' /tmp/purge.out
	sed -i '/graid/d; /\/srv\/r/d' /etc/fstab
	say "purged"
	done_step
	systemctl poweroff
	;;
*)
	say "no step $step"
	systemctl poweroff
	;;
esac
