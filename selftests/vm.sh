#!/usr/bin/env bash
# Boots graid's test kernel in QEMU with emulated NVMe drives and runs a script inside it.
#
#   selftests/vm.sh [options] SCRIPT [ARG...]   run SCRIPT in the guest, print its output,
#                                               exit with its status
#   selftests/vm.sh [options] --shell           interactive shell on the serial console
#
# Options (or the environment variable in brackets):
#   --disks N        emulated NVMe drives, 0-24 (PCI devices on the one bus) [DISKS, default 4]
#   --disk-size MiB  size of each drive [DISK_SIZE_MB, default 256]
#   --timeout S      kill the guest after S seconds [VM_TIMEOUT, default 1800]
#   --mem MiB        guest memory [VM_MEM_MB, default 2048]
#   --cpus N         guest CPUs [VM_CPUS, default 2]
#   --null-disks     back the drives with QEMU's null-co driver (reads zero, writes vanish)
#   --keep-disks     reuse the drive images of the previous run (a "reboot"), if present
# VM_KERNEL_ARGS="...": more kernel command line (the benches pass kmemleak=off: the test kernel
#   has kmemleak, which takes a stack trace per allocation and so weighs on whoever allocates more)
# VM_EXTRA_BINARIES="PATH...": host binaries (and their libraries) copied into the guest too
# VM_TEST_TIMEOUT=S: the in-guest runner's limit per test (default 900; the debug kernel needs more)
#
# Exit status: the script's; 124 when the guest timed out, 125 when it died first (panic,
# oops: the kernel runs with oops=panic). The guest console is kept in out/vm/console.log.
# The kernel is graid's cached build (built if missing) unless KDIR names another tree.
set -euo pipefail
. "$(dirname "$0")/../build/common.sh"

disks=${DISKS:-4}
disk_mb=${DISK_SIZE_MB:-256}
timeout=${VM_TIMEOUT:-1800}
mem=${VM_MEM_MB:-2048}
cpus=${VM_CPUS:-2}
null_disks=0
keep_disks=0
shell=0
while (($#)); do
	case $1 in
	--disks) disks=$2; shift 2 ;;
	--disk-size) disk_mb=$2; shift 2 ;;
	--timeout) timeout=$2; shift 2 ;;
	--mem) mem=$2; shift 2 ;;
	--cpus) cpus=$2; shift 2 ;;
	--null-disks) null_disks=1; shift ;;
	--keep-disks) keep_disks=1; shift ;;
	--shell) shell=1; shift ;;
	--) shift; break ;;
	-*) die "unknown option $1 (see the top of $0)" ;;
	*) break ;;
	esac
done
[[ $disks =~ ^[0-9]+$ ]] && ((disks <= 24)) || die "--disks must be 0-24, not '$disks'"
[[ $disk_mb =~ ^[0-9]+$ ]] && ((disk_mb > 0)) || die "--disk-size must be a positive number of MiB"
if ((shell == 0)); then
	(($# >= 1)) || die "usage: $0 [options] SCRIPT [ARG...] | --shell"
	script=$1; shift
	[ -f "$script" ] || die "no such script: $script"
fi

kdir=$("$GRAID_ROOT/build/kdir.sh")
kver=$(cat "$kdir/include/config/kernel.release")
# VM_MODULE: another build of the module (an A/B bench of two commits on one kernel).
ko=${VM_MODULE:-$GRAID_ROOT/out/module/$(basename "$kdir")/raid_gpu.ko}
bin=$GRAID_ROOT/tools/target/release
[ -f "$ko" ] || die "$ko is missing: run 'make module' first (with the same KERNEL_SERIES, KERNEL_VARIANT or KDIR)"
[ -x "$bin/graidctl" ] || die "$bin/graidctl is missing: run 'make tools' first"

work=${GRAID_VM_WORK:-$GRAID_ROOT/out/vm}
root=$work/root
rm -rf "$root"
mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,dev,proc,sys,tmp,run,etc,root,graid,lib/modules}

printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"

# Userspace: static busybox plus the dynamically linked tools with the libraries they need.
cp /bin/busybox "$root/bin/busybox"
copy_binary() {
	local src=$1 dst=$root/usr/bin/$(basename "$1") lib
	cp "$src" "$dst"
	for lib in $(ldd "$src" 2>/dev/null | grep -o '/[^ ]*' || true); do
		[ -e "$root$lib" ] && continue
		mkdir -p "$root$(dirname "$lib")"
		cp -L "$lib" "$root$lib"
	done
}
for b in "$bin/graidctl" "$bin/graid-probe" "$bin/graid-helper" "$bin/graid-logreplay"; do copy_binary "$b"; done
# Tools a profile or a debugging session wants (perf, ...): VM_EXTRA_BINARIES="/usr/bin/perf".
for b in ${VM_EXTRA_BINARIES:-}; do copy_binary "$b"; done
# Test tools from Debian (see APT_PACKAGES in build/versions.env).
for b in fio mkfs.ext4 e2fsck resize2fs blkid dmsetup mdadm udevadm promtool sfdisk lvm lsblk wipefs nvme blkdiscard ip rdma; do
	copy_binary "$(PATH=/usr/sbin:/sbin:$PATH command -v "$b")"
done
copy_binary /lib/systemd/systemd-udevd
cp /etc/mke2fs.conf "$root/etc/"
# udev: only graid's rules (the host's would probe and watch every drive the tests use); the
# rules call graidctl where a host install puts it.
# The assembly rules (members started as they appear) would start arrays behind the tests'
# backs: 36-incremental installs them for itself.
mkdir -p "$root/lib/udev/rules.d" "$root/graid/udev-assembly"
cp "$GRAID_ROOT"/tools/udev/65-graid.rules "$root/lib/udev/rules.d/"
cp "$GRAID_ROOT"/tools/udev/64-graid-assembly.rules "$root/graid/udev-assembly/"
ln -s ../bin/graidctl "$root/usr/sbin/graidctl"

# Kernel modules of the test kernel, plus ours, indexed for modprobe.
cp -a "$kdir/modinst/lib/modules/$kver" "$root/lib/modules/"
rm -f "$root/lib/modules/$kver"/{build,source}
mkdir -p "$root/lib/modules/$kver/extra"
cp "$ko" "$root/lib/modules/$kver/extra/raid_gpu.ko"
depmod -b "$root" "$kver"

# The payload.
cp -r "$GRAID_ROOT/selftests/." "$root/graid/"
if ((shell == 0)); then
	cp "$script" "$root/graid/payload"
	: >"$root/graid/payload.args"
	(($# == 0)) || printf '%s\n' "$@" >"$root/graid/payload.args"
fi
cat >"$root/graid/vm.env" <<ENV
GRAID_DISKS=$disks
GRAID_DISK_SIZE_MB=$disk_mb
GRAID_SHELL=$shell
GRAID_TEST_TIMEOUT=${VM_TEST_TIMEOUT:-900}
GRAID_SOAK=${GRAID_SOAK:-0}
GRAID_SWEEP_FIRST=${GRAID_SWEEP_FIRST:-}
GRAID_LOGWRITES_SEED=${GRAID_LOGWRITES_SEED:-}
GRAID_LOGWRITES_CASES=${GRAID_LOGWRITES_CASES:-}
ENV
cp "$GRAID_ROOT/selftests/guest-init" "$root/init"
chmod +x "$root/init"
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) >"$work/initramfs.cpio.gz"

drives=()
for ((i = 0; i < disks; i++)); do
	if ((null_disks)); then
		drives+=(-drive "if=none,id=nvm$i,driver=null-co,size=${disk_mb}M,read-zeroes=on")
	else
		img=$work/nvme$i.img
		if ((keep_disks == 0)) || ! [ -f "$img" ]; then
			rm -f "$img"
			truncate -s "${disk_mb}M" "$img"
		fi
		drives+=(-drive "if=none,id=nvm$i,file=$img,format=raw,aio=threads,cache=unsafe,discard=unmap")
	fi
	drives+=(-device "nvme,serial=graid-nvme$i,drive=nvm$i")
done

# The Vulkan disk: Mesa's lavapipe, the Vulkan loader and their libraries on a small read-only
# ext4 image (too big for the initramfs), made once per package versions; the guest sees it as
# /dev/vda (selftests/tests/28-offload-vulkan.sh). None when the host has no lavapipe.
vulkan_disk() {
	local libdir=/usr/lib/x86_64-linux-gnu
	local lvp=$libdir/libvulkan_lvp.so loader=$libdir/libvulkan.so.1
	[ -f "$lvp" ] && [ -f "$loader" ] || return 0
	local key img tmp
	key=$({ dpkg-query -W -f='${Package} ${Version}\n' mesa-vulkan-drivers libvulkan1 2>/dev/null ||
		sha256sum "$lvp"; } | sha256sum | cut -c1-16)
	img=$GRAID_CACHE/vulkan-disk/$key.img
	if ! [ -f "$img" ]; then
		tmp=$(mktemp -d)
		mkdir -p "$tmp/lib"
		cp -L "$loader" "$lvp" "$tmp/lib/"
		for lib in $(ldd "$lvp" | grep -o '/[^ ]*'); do cp -Ln "$lib" "$tmp/lib/"; done
		printf '{"file_format_version": "1.0.0", "ICD": {"library_path": "/vulkan/lib/libvulkan_lvp.so", "api_version": "1.3.0"}}\n' \
			>"$tmp/lvp_icd.json"
		mkdir -p "$(dirname "$img")"
		mkfs.ext4 -q -F -L graid-vulkan -d "$tmp" "$img.tmp" "$(($(du -sm "$tmp" | cut -f1) + 32))M"
		mv "$img.tmp" "$img"
		rm -rf "$tmp"
	fi
	drives+=(-drive "if=none,id=vulkan,file=$img,format=raw,readonly=on"
		-device "virtio-blk-pci,drive=vulkan")
}
vulkan_disk

qemu=(qemu-system-x86_64 -accel tcg,thread=multi -cpu max -smp "$cpus" -m "$mem"
	-nodefaults -no-reboot -display none
	-kernel "$kdir/arch/x86/boot/bzImage" -initrd "$work/initramfs.cpio.gz"
	"${drives[@]}")
# The test kernel has no ACPI (build/kconfig/graid.config): the BIOS's MP and PCI routing tables
# describe the machine, and the guest leaves with `reboot -f`, which -no-reboot turns into an exit.
cmdline="console=ttyS0 panic=-1 oops=panic rdinit=/init"
# The debug kernel under TCG with 5-level paging (-cpu max has LA57) reports a KASAN wild access
# in an interrupt during identify_cpu; the report taints the kernel, which turns lockdep off.
if [ "${KERNEL_VARIANT:-test}" = debug ]; then
	cmdline="$cmdline no5lvl"
fi
cmdline="$cmdline ${VM_KERNEL_ARGS:-}"

if ((shell)); then
	exec "${qemu[@]}" -append "$cmdline" -serial mon:stdio
fi

# ttyS0 is the kernel console (to a file); the script's output comes back on ttyS1, framed by
# a start marker (the guest reached the payload) and its exit status.
console=$work/console.log
exit_file=$work/exit-status
start_file=$work/started
boot_once() {
	rm -f "$exit_file" "$start_file"
	set +e
	timeout -k 10 "$timeout" "${qemu[@]}" -append "$cmdline quiet" \
		-serial "file:$console" -chardev stdio,id=out,signal=off -serial chardev:out </dev/null |
		while IFS= read -r line || [ -n "$line" ]; do
			line=${line%$'\r'}
			case $line in
			"GRAID-VM-START") : >"$start_file" ;;
			"GRAID-VM-EXIT: "*) echo "${line#GRAID-VM-EXIT: }" >"$exit_file" ;;
			*) printf '%s\n' "$line" ;;
			esac
		done
	qemu_rc=${PIPESTATUS[0]}
	set -e
}

# A guest that dies while booting, before any graid code ran, is retried: under TCG the
# kernel occasionally oopses in early boot (int3 from text patching under multi-threaded TCG).
for attempt in 1 2 3; do
	boot_once
	[ -s "$exit_file" ] || [ -e "$start_file" ] || ((qemu_rc == 124 || qemu_rc == 137)) || {
		log "the guest died while booting (attempt $attempt, before the payload started); console:"
		grep -E 'Oops|BUG|panic|RIP' "$console" | head -n 5 | sed 's/^/    /' >&2
		continue
	}
	break
done

if [ -s "$exit_file" ]; then
	exit "$(cat "$exit_file")"
fi
if ((qemu_rc == 124 || qemu_rc == 137)); then
	log "the guest timed out after ${timeout}s; last console lines:"
	rc=124
else
	log "the guest died before the script finished (qemu exit $qemu_rc); last console lines:"
	rc=125
fi
tail -n 60 "$console" | sed 's/^/    /' >&2
exit "$rc"
