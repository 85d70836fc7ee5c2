# graid demo (make demo), run inside the test VM: load the module, show versions and drives.
# Later issues grow this into create / write / fail / rebuild / verify.
. /graid/lib.sh
step() { printf '\n=== %s\n' "$*"; }

step "Loading raid_gpu"
load_module
dmesg | grep raid_gpu | tail -n 1

step "graidctl version"
graidctl version || exit 1

step "NVMe drives in this VM"
for d in $(graid_nvme_disks); do
	n=${d#/dev/}
	c=${n%n[0-9]*}
	printf '%-14s %6s MiB  serial %s\n' "$d" $(($(cat /sys/class/block/$n/size) / 2048)) "$(tr -d " " </sys/class/nvme/$c/serial)"
done

step "Unloading raid_gpu"
unload_module
echo "done"
