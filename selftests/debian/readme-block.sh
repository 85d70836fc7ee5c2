#!/bin/bash
# Prints the README's "Install on Debian 13" block (the sh code block after the line
# "<!-- debian-install ..."), as written, for the Debian VM test to run:
#   readme-block.sh before-reboot README.md   its lines before "sudo reboot" (run on the machine
#                                            before it reboots: build/debian-image.sh readme)
#   readme-block.sh after-reboot README.md    its lines after it, as a script (run once the
#                                            machine is up again: readme-steps.sh)
# Fails if the README has no such block, or the block no "sudo reboot" line.
set -euo pipefail
mode=${1:-}
readme=${2:-}
[ -f "$readme" ] || { echo "readme-block.sh: no README at '$readme'" >&2; exit 1; }
block=$(awk '
	/^<!-- debian-install/ { marked = 1; next }
	marked && !inside && /^```sh$/ { inside = 1; next }
	inside && /^```$/ { exit }
	inside { print }' "$readme")
[ -n "$block" ] || { echo "readme-block.sh: $readme has no debian-install block" >&2; exit 1; }
echo "$block" | grep -q '^sudo reboot' ||
	{ echo "readme-block.sh: the debian-install block of $readme has no 'sudo reboot' line" >&2; exit 1; }
case $mode in
before-reboot) echo "$block" | sed '/^sudo reboot/,$d' ;;
after-reboot)
	echo '#!/bin/bash'
	echo '# The lines of the README'"'"'s "Install on Debian 13" block after its reboot.'
	echo 'set -euxo pipefail'
	echo "$block" | sed '1,/^sudo reboot/d'
	;;
*) echo "usage: readme-block.sh before-reboot|after-reboot README.md" >&2; exit 2 ;;
esac
