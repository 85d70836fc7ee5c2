#!/bin/bash
# graid's Debian VM test, inside a stock trixie booted from its own kernel, with graid installed
# from its packages (build/debian-image.sh). selftests/debian-vm.sh boots it four times; each
# boot runs the next step (the number is kept in /var/lib/graid-vmtest/step) and ends with
# GRAID-STEP-OK N or GRAID-STEP-FAIL N on this script's output (the second serial port):
#   1. DKMS installed the module for the running kernel; the helper and the monitor start with
#      the module; a RAID 5 and a RAID 1 are created (the monitor logs them), listed in
#      graid.conf; the scheduled check's service checks the RAID 1 but not the RAID 5 (check=no)
#      and a planted mismatch reaches the monitor; both get an ext4 each in fstab, and verified
#      data; r1 is exported over NVMe/TCP on the loopback; reboot.
#   2. Both are assembled by udev with no command, mounted, clean (no resync ran), the data
#      verifies; r1's export is back (graid-export@.service) and reads as r1; power off (the
#      host then boots without one of the RAID 5's members).
#   3. The RAID 5 starts degraded by the last-resort timer, is mounted, serves verified data and
#      takes more; power off (the host gives the member back).
#   4. The returned member is stale: the array starts degraded again, re-add rebuilds it, the
#      data verifies, a check finds no mismatch, parity went to the helper; the packages are
#      purged (arrays running) and leave nothing behind; power off (the host then checks that
#      every member's superblock says clean).
set -uo pipefail
state=/var/lib/graid-vmtest
lib=$(dirname "$0")
mkdir -p $state
step=$(cat $state/step 2>/dev/null || echo 1)
r5=(/dev/disk/by-id/nvme-QEMU_NVMe_Ctrl_graid-r5-{0,1,2})
r1=(/dev/disk/by-id/nvme-QEMU_NVMe_Ctrl_graid-r1-{0,1})

say() { echo "vmtest[$step] +$(cut -d" " -f1 /proc/uptime)s: $*"; }
fail() {
	echo "GRAID-STEP-FAIL $step: $*"
	journalctl -b --no-pager -o short-monotonic | grep -iE 'graid|raid_gpu|srv-r' | tail -n 60
	systemctl poweroff
	exit 1
}
done_step() {
	echo $((step + 1)) >$state/step
	sync
	echo "GRAID-STEP-OK $step"
}
# wait_for SECONDS WHAT CMD...: runs CMD until it succeeds.
wait_for() {
	local n=0 limit=$1 what=$2
	shift 2
	until "$@" >/dev/null 2>&1; do
		n=$((n + 1))
		[ $n -le "$limit" ] || fail "$what: not after $limit s"
		sleep 1
	done
}
json() { graidctl --json detail "$1" | sed -n "s/.*\"$2\": *\"\{0,1\}\([^\",}]*\).*/\1/p" | head -n 1; }
fio_files() {
	# fio_files MODE DIR SIZE: writes (MODE write) or re-reads (MODE verify) DIR/data with crc32c
	# verification headers.
	local extra=(--do_verify=0)
	[ "$1" = verify ] && extra=(--verify_only)
	fio --name=data --filename="$2/data" --size="$3" --rw=write --bs=64k --direct=1 \
		--ioengine=psync --verify=crc32c --verify_fatal=1 "${extra[@]}" >/tmp/fio.out 2>&1 ||
		{ cat /tmp/fio.out; fail "fio $1 of $2 failed"; }
}
lines() { journalctl -b -k --no-pager | grep -c "$1"; }

say "kernel $(uname -r)"
case $step in
1)
	dkms status graid | grep -q "^graid/[^,]*, $(uname -r), x86_64: installed" ||
		fail "dkms status: $(dkms status graid)"
	vermagic=$(modinfo -F vermagic raid_gpu) || fail "modinfo finds no raid_gpu"
	case "$vermagic" in "$(uname -r) "*) ;; *) fail "raid_gpu's vermagic is '$vermagic'" ;; esac
	say "dkms: $(dkms status graid); vermagic: $vermagic"
	$lib/package-check.sh installed || fail "the installed packages"
	for page in graidctl-assemble graidctl-monitor graid.conf raid_gpu; do
		man -w $page >/dev/null 2>&1 || [ ! -x /usr/bin/man ] || fail "man finds no $page"
	done
	modprobe raid_gpu || fail "modprobe raid_gpu failed"
	wait_for 30 "graid-helper.service after modprobe" systemctl is-active graid-helper
	wait_for 30 "graid-monitor.service after modprobe" systemctl is-active graid-monitor
	graidctl create r5 --level 5 --chunk 64K "${r5[@]}" || fail "create r5"
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
	for a in r5 r1; do
		mkfs.ext4 -q /dev/graid/$a || fail "mkfs.ext4 on /dev/graid/$a"
		mkdir -p /srv/$a
		echo "/dev/graid/$a /srv/$a ext4 defaults 0 2" >>/etc/fstab
	done
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
	# Marked clean at the reboot (graid.shutdown): no resync, no partial parity log replay.
	[ "$(lines 'resync')" = 0 ] || fail "a resync ran: $(journalctl -b -k --no-pager | grep resync)"
	[ "$(lines 'log replayed')" = 0 ] || fail "a log was replayed: $(journalctl -b -k --no-pager | grep replayed)"
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
	$lib/package-check.sh purge || fail "the purge"
	sed 's/^/purge: /' /tmp/purge.out
	# The arrays keep running on the loaded module; unmounted, they go idle and are marked
	# clean, which the host checks on the members after the power-off.
	umount /srv/r5 /srv/r1 || fail "umount"
	sed -i '/graid/d' /etc/fstab
	[ -e /sys/block/graid0 ] || fail "the arrays stopped with the packages"
	say "purged; arrays still running"
	done_step
	systemctl poweroff
	;;
*)
	say "no step $step"
	systemctl poweroff
	;;
esac
