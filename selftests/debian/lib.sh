# shellcheck shell=bash
# What the Debian VM test's legs share (sourced by readme-steps.sh and upgrade-steps.sh, in the
# booted machine): the step counter, reporting, waiting and verified data. Each boot runs the
# leg's next step (the number is kept in /var/lib/graid-vmtest/step), which ends with
# GRAID-STEP-OK N or GRAID-STEP-FAIL N on the second serial port (graid-vmtest.service).
state=/var/lib/graid-vmtest
lib=$(dirname "$0")
mkdir -p $state
step=$(cat $state/step 2>/dev/null || echo 1)

say() { echo "vmtest[$step] +$(cut -d" " -f1 /proc/uptime)s: $*"; }
fail() {
	echo "GRAID-STEP-FAIL $step: $*"
	journalctl -b --no-pager -o short-monotonic | grep -iE 'graid|raid_gpu|srv-' | tail -n 60
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
# lines PATTERN: how many lines of this boot's kernel log match.
lines() { journalctl -b -k --no-pager | grep -c "$1"; }
# monitor_watching: the monitor (started at boot) has taken its first look at the module's
# arrays: an array started after this is a new-array event.
monitor_watching() { [ "$(systemctl show -P StatusText graid-monitor)" = "watching the arrays" ]; }
# dkms_installed: DKMS installed raid_gpu for the running kernel, with its vermagic.
dkms_installed() {
	dkms status graid | grep -q "^graid/[^,]*, $(uname -r), x86_64: installed" ||
		fail "dkms status: $(dkms status graid)"
	local vermagic
	vermagic=$(modinfo -F vermagic raid_gpu) || fail "modinfo finds no raid_gpu"
	case "$vermagic" in "$(uname -r) "*) ;; *) fail "raid_gpu's vermagic is '$vermagic'" ;; esac
	say "dkms: $(dkms status graid | tr '\n' ' '); vermagic: $vermagic"
}
# no_last_resort: no degraded start was even considered for arrays that came up complete (the
# timer is wanted only for arrays left waiting, and stops as they appear).
no_last_resort() {
	if journalctl -b --no-pager | grep -q 'Start graid array .* degraded'; then
		fail "a last-resort start ran for a complete array: $(journalctl -b --no-pager | grep 'graid array')"
	fi
	if systemctl list-units --all --no-legend 'graid-last-resort@*' | grep -q 'timer.*active.*waiting'; then
		fail "a last-resort timer still waits: $(systemctl list-units --all --no-legend 'graid-last-resort@*')"
	fi
}
# fs_links DEVICE LABEL: udev gave the filesystem on DEVICE (an array) blkid's properties and
# the by-uuid and by-label links, and lsblk -f shows them.
fs_links() {
	local dev uuid
	dev=$(readlink -f "$1")
	uuid=$(blkid -o value -s UUID "$dev") || fail "blkid finds no filesystem on $dev"
	# The watch's change event is queued when udevd reads the writer's close from inotify,
	# which may come after a settle has found the queue empty (it did under a loaded host):
	# wait for the link itself, 20 s at most.
	local n=0
	udevadm settle
	until [ "$(readlink -f "/dev/disk/by-uuid/$uuid")" = "$dev" ] || [ $n -ge 100 ]; do
		sleep 0.2
		udevadm settle
		n=$((n + 1))
	done
	[ "$(readlink -f "/dev/disk/by-uuid/$uuid")" = "$dev" ] ||
		fail "/dev/disk/by-uuid/$uuid does not lead to $dev: $(ls -l /dev/disk/by-uuid/)"
	[ "$(readlink -f "/dev/disk/by-label/$2")" = "$dev" ] ||
		fail "/dev/disk/by-label/$2 does not lead to $dev: $(ls -l /dev/disk/by-label/ 2>&1)"
	[ "$(lsblk -n -d -o FSTYPE "$dev")" = ext4 ] && [ "$(lsblk -n -d -o UUID "$dev")" = "$uuid" ] ||
		fail "lsblk -f: $(lsblk -f "$dev")"
	say "$dev: $(lsblk -n -d -o NAME,FSTYPE,LABEL,UUID "$dev"), /dev/disk/by-uuid/$uuid"
}
