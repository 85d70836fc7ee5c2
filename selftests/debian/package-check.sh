#!/bin/bash
# The checks of graid's installed packages that the Debian VM test (upgrade-steps.sh, on the booted
# machine) and build/deb-test.sh (in a chroot) share:
#   package-check.sh installed   every file a user looks for is where the packages put it
#   package-check.sh purge       apt-get purge graid graid-dkms leaves none of their files, no
#                                DKMS tree and no prepared kernel tree
# Prints what failed and exits 1 on the first failure.
set -uo pipefail

fail() {
	echo "package-check: $*"
	exit 1
}

case "${1:-}" in
installed)
	for f in /usr/sbin/graidctl /usr/sbin/graid-helper \
		/usr/share/man/man8/graidctl.8.gz /usr/share/man/man8/graidctl-create.8.gz \
		/usr/share/man/man8/graid-helper.8.gz /usr/lib/udev/rules.d/64-graid-assembly.rules \
		/usr/share/man/man5/graid.conf.5.gz /usr/share/man/man4/raid_gpu.4.gz \
		/usr/share/man/man8/graidctl-monitor.8.gz /usr/share/man/man8/graidctl-metrics.8.gz \
		/usr/lib/udev/rules.d/65-graid.rules /usr/lib/systemd/system/graid-helper.service \
		/usr/lib/systemd/system/graid-monitor.service \
		/usr/lib/systemd/system/graid-check.timer /usr/lib/systemd/system/graid-check.service \
		/usr/lib/systemd/system/graid-last-resort@.timer \
		/usr/lib/systemd/system/graid-last-resort@.service \
		/usr/lib/systemd/system/graid-export@.service /usr/share/man/man8/graidctl-export.8.gz \
		/usr/lib/systemd/system-shutdown/graid.shutdown \
		/usr/share/bash-completion/completions/graidctl /usr/share/zsh/vendor-completions/_graidctl \
		/usr/share/fish/vendor_completions.d/graidctl.fish /etc/graid/graid.conf; do
		[ -e "$f" ] || fail "$f is not installed"
	done
	graidctl --version >/dev/null || fail "graidctl --version failed"
	graid-helper --version >/dev/null || fail "graid-helper --version failed"
	;;
purge)
	files=$(dpkg -L graid graid-dkms | sort -u)
	# Each line of apt's output stamped with the uptime, so a slow step of the purge shows.
	DEBIAN_FRONTEND=noninteractive apt-get -q -y purge graid graid-dkms 2>&1 |
		while IFS= read -r line; do echo "+$(cut -d' ' -f1 /proc/uptime)s $line"; done >/tmp/purge.out
	[ "${PIPESTATUS[0]}" = 0 ] || { cat /tmp/purge.out; fail "apt-get purge failed"; }
	for f in $files; do
		[ -d "$f" ] || [ ! -e "$f" ] || fail "$f is left after purge"
	done
	[ -z "$(dkms status graid)" ] || fail "dkms still knows graid: $(dkms status graid)"
	for d in /var/lib/dkms/graid /var/cache/graid-dkms /usr/src/graid-* /etc/graid \
		/lib/modules/*/updates/dkms/raid_gpu.ko*; do
		[ ! -e "$d" ] || fail "$d is left after purge"
	done
	;;
*)
	fail "usage: package-check.sh installed|purge"
	;;
esac
