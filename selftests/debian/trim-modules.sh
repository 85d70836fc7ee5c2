#!/bin/sh
# Deletes, for every kernel of the Debian VM test's machine, the modules of hardware an emulated
# machine with NVMe drives and no network card never has, and indexes the rest again: removing
# graid-dkms runs depmod over every kernel's modules, and under TCG that alone took 100 s (each
# module is compressed). Run in the machine's root (build/debian-image.sh, upgrade.sh).
set -e
for m in /lib/modules/*/kernel; do
	rm -rf $m/sound $m/drivers/media $m/drivers/gpu $m/drivers/iio $m/drivers/infiniband \
		$m/drivers/comedi $m/drivers/bluetooth $m/drivers/staging $m/drivers/net/wireless \
		$m/drivers/net/ethernet $m/drivers/net/can $m/drivers/net/usb $m/drivers/hwmon \
		$m/drivers/mtd $m/drivers/accel $m/drivers/usb $m/drivers/hid $m/net/wireless \
		$m/net/mac80211 $m/net/bluetooth
	depmod -a "$(basename "$(dirname "$m")")"
done
