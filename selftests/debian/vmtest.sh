#!/bin/bash
# graid's Debian VM test, inside a stock trixie booted from Debian's own kernel, with graid
# installed from its packages (build/debian-image.sh): graid-vmtest.service runs this at every
# boot, and it runs the next step of the machine's leg (/etc/graid-vmtest/leg): readme-steps.sh
# or upgrade-steps.sh.
exec "$(dirname "$0")/$(cat /etc/graid-vmtest/leg)-steps.sh"
