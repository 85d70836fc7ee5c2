# graid top-level Makefile. `make help` lists the targets.
#
# The kernel is graid's cached test-VM build (build/kernel.sh) unless KDIR names another
# Rust-enabled kernel build tree: make module KDIR=/path/to/linux-build
SHELL := /bin/bash
.DEFAULT_GOAL := help
.PHONY: help deps kernel kernels module modules distro-module deb deb-test debian-vm-test distro-test rust-analyzer tools cargo-prebuild host-test lint emulated-test vm-test crash-test soak test vm-run vm-shell bench-offload bench-bitmap bench-ppl bench-shipped bench-ordering bench-dirty-start bench-nvmeof bench-reshape profile-writes \
	demo bench bench-ring ptx clean

CARGO ?= cargo
CARGO_TOOLS := $(CARGO) --locked
TOOLS := --manifest-path tools/Cargo.toml
ifdef KDIR
export KDIR
endif
# Forwarded to the VM harness (selftests/vm.sh documents them).
export DISKS DISK_SIZE_MB VM_TIMEOUT VM_TEST_TIMEOUT VM_MEM_MB VM_CPUS TESTS
# test (default) or debug: KASAN, lockdep and friends (build/kconfig/debug.config), e.g.
# make test KERNEL_VARIANT=debug
export KERNEL_VARIANT
# The test kernel's series (build/versions.env: the newest supported one by default), e.g.
# make vm-test KERNEL_SERIES=7.2
export KERNEL_SERIES
# Every kernel series graid supports (KERNEL_SERIES_SUPPORTED in build/versions.env).
SUPPORTED_SERIES := $(shell . build/versions.env && echo $$KERNEL_SERIES_SUPPORTED)

help:
	@echo "graid make targets:"
	@echo "  demo           boot the test VM and run the demo (the README's main command)"
	@echo "  test           host tests + lint + emulated-test + module build, then distro-test's"
	@echo "                 Debian VM beside the VM selftests (selftests/vm-suites.sh)"
	@echo "                 (the README's test command)"
	@echo "  deps           install the toolchain and packages (idempotent)"
	@echo "  kernel         build the test-VM kernel into the cache (no-op when cached);"
	@echo "                 KERNEL_VARIANT=debug for KASAN/lockdep, KERNEL_SERIES=7.2 for an"
	@echo "                 older supported series (both work with every target)"
	@echo "  kernels        build the test-VM kernel of every supported series"
	@echo "  module         build raid_gpu.ko (KDIR=... for another kernel tree)"
	@echo "  modules        build raid_gpu.ko for the test kernel of every supported series"
	@echo "  distro-module  build raid_gpu.ko for each of Debian's own kernels (one per supported"
	@echo "                 series, in a cached trixie chroot, with their gcc-14 and rustc 1.85.1)"
	@echo "  deb            build the Debian packages graid and graid-dkms into out/deb (dpkg-buildpackage"
	@echo "                 and lintian in the trixie chroot)"
	@echo "  deb-test       install out/deb's packages in a throwaway trixie chroot: DKMS builds the"
	@echo "                 module for Debian's kernel; purge leaves nothing behind"
	@echo "  debian-vm-test a stock Debian trixie VM (its own kernel) with graid installed from the"
	@echo "                 packages: arrays assembled, mounted and clean after reboots, degraded"
	@echo "                 start, re-add, helper, purge"
	@echo "  distro-test    distro-module, deb and debian-vm-test (part of test)"
	@echo "  tools          build graidctl and friends (cargo, release)"
	@echo "  cargo-prebuild tools plus host-test's and lint's cargo builds, nothing run (.ci/run)"
	@echo "  rust-analyzer  write rust-project.json for the module"
	@echo "  host-test      cargo test for everything that runs on the host"
	@echo "  lint           rustfmt and clippy on the tools, clippy on the module, docutils on"
	@echo "                 Documentation/"
	@echo "  emulated-test  parity engine tests on an emulated AVX-512/GFNI CPU (Bochs)"
	@echo "  vm-test        VM selftests only (TESTS='name ...' to pick some), then the crash rounds"
	@echo "  crash-test     the crash rounds only: arrays written to while the VM is killed,"
	@echo "                 resynced and verified on the next boot (CRASH_ROUNDS=n, 1)"
	@echo "  vm-run         run SCRIPT=path in the VM (DISKS=n, DISK_SIZE_MB=n)"
	@echo "  vm-shell       interactive shell in the VM"
	@echo "  bench          graid vs md RAID 0/1/10/5/6 fio benchmark in the VM (not part of test;"
	@echo "                 BENCH_MEMBERS=nullblk for null_blk members, BENCH_LEVELS='5 6')"
	@echo "  bench-offload  RAID 5/6 full-stripe writes, parity in the kernel vs graid-helper, in the VM"
	@echo "  bench-bitmap   the write-intent bitmap's write cost, graid vs md, in the VM"
	@echo "  bench-reshape  a restripe's speed and the reads during it, graid vs md, in the VM"
	@echo "  bench-ppl      the partial parity log's write cost, graid vs md's PPL, in the VM"
	@echo "  bench-nvmeof   an array through NVMe/TCP and RDMA against the same array locally"
	@echo "  bench-shipped  RAID 5/6 writes as shipped (bitmap and log on), graid vs md, in the VM"
	@echo "  bench-ordering forced writes (FUA, flushes) per 4 KiB write, graid vs md's PPL (counted)"
	@echo "  bench-dirty-start  an array's start after a crash, log read and replayed, 64 GiB members"
	@echo "  profile-writes perf profiles of 4k random writes, md and graid, in the VM"
	@echo "  ptx            recompile the CUDA kernels' committed PTX (NVRTC from PyPI; lint checks it)"
	@echo "  bench-ring     the parity ring's own cost, natively on the host: graid-helper's loopback"
	@echo "                 (no kernel) against the same jobs computed directly"
	@echo "  clean          remove build outputs (keeps the kernel cache)"

deps:
	build/deps.sh

kernel: deps
	build/kernel.sh >/dev/null

kernels: deps
	for s in $(SUPPORTED_SERIES); do KERNEL_SERIES=$$s build/kernel.sh >/dev/null || exit 1; done

module: deps
	build/module.sh modules

modules: deps
	for s in $(SUPPORTED_SERIES); do KERNEL_SERIES=$$s build/module.sh modules || exit 1; done

rust-analyzer: deps
	build/module.sh rust-analyzer

tools:
	$(CARGO_TOOLS) build --release $(TOOLS)

# What tools, host-test and lint build with cargo, built and nothing run: .ci/run makes these
# beside the kernel build, so the same arguments must give the same outputs.
cargo-prebuild: tools
	$(CARGO_TOOLS) test $(TOOLS) --workspace --no-run
	$(CARGO_TOOLS) clippy $(TOOLS) --workspace --all-targets -- -D warnings

# The Vulkan engine's tests run for real on Mesa's lavapipe (installed by deps); without a
# Vulkan device they would skip, which here is a failure.
host-test: deps
	GRAID_REQUIRE_VULKAN=1 $(CARGO_TOOLS) test $(TOOLS) --workspace

lint: deps
	$(CARGO) fmt $(TOOLS) --all -- --check
	$(CARGO_TOOLS) clippy $(TOOLS) --workspace --all-targets -- -D warnings
	@# The module through clippy against every supported series' kernel (rust/compat.rs differs).
	for s in $(SUPPORTED_SERIES); do KERNEL_SERIES=$$s build/module.sh clippy || exit 1; done
	@# The CUDA engine's committed PTX is what its source compiles to (NVRTC from PyPI).
	build/ptx.sh --check
	@# The hand-written man pages name every module parameter, event and graid.conf keyword.
	build/man-check.sh
	@# Every document parses without a warning (Debian's python3-docutils).
	for f in Documentation/*.rst; do /usr/bin/docutils --halt=warning "$$f" /dev/null || exit 1; done

# raid_gpu.ko for each of Debian's own kernels (trixie-backports, one per supported series),
# built in a trixie chroot with their gcc-14 and rustc 1.85.1 (build/distro-module.sh;
# Documentation/build.rst).
distro-module: deps
	build/distro-module.sh

# graid's Debian packages (build/deb.sh; Documentation/build.rst), and their install test.
deb: deps
	build/deb.sh

deb-test: deps
	build/deb-test.sh

debian-vm-test: tools
	selftests/debian-vm.sh

# The packages on Debian: their install test in a chroot (a kernel's source arriving late, an
# unsupported series), then the Debian VM test's two legs.
distro-test: distro-module deb deb-test debian-vm-test

vm-test: module tools
	selftests/run.sh

# The crash rounds alone (selftests/crash.sh; vm-test runs them after the other tests):
# CRASH_ROUNDS=N machine kills (1).
crash-test: module tools
	selftests/crash.sh

# The VM suite with its long sweeps in full (16-fault-injection's CREATE sweep of a RAID 10 as
# well as a RAID 6, every allocation of each sweep), the cases `make test` leaves out as
# repeats of a harder one (13, 16, 18), and eight crash rounds instead of two.
soak: module tools
	GRAID_SOAK=1 CRASH_ROUNDS=$${CRASH_ROUNDS:-8} VM_TIMEOUT=3600 selftests/run.sh

# The parity engine's AVX-512 and GFNI levels on a CPU that has them, emulated: this machine
# has neither. Needs the cached kernel (it boots it).
ptx:
	build/ptx.sh

emulated-test: deps
	build/emulated-parity.sh

# The VM suite, and beside it the Debian VM test and the older kernel series' tests
# (selftests/vm-suites.sh): under TCG one guest leaves part of two cores idle.
test: host-test lint emulated-test modules tools distro-module deb deb-test
	selftests/vm-suites.sh

vm-run: module tools
	@test -n "$(SCRIPT)" || { echo "usage: make vm-run SCRIPT=path [DISKS=n]"; exit 2; }
	selftests/vm.sh $(SCRIPT)

vm-shell: module tools
	selftests/vm.sh --shell

demo: module tools
	selftests/vm.sh selftests/demo.sh

# The benches boot without kmemleak: the test kernel has it, and its stack trace per allocation
# weighed on whoever allocates more (Documentation/benchmarks.rst, make profile-writes).
BENCH_KERNEL_ARGS := kmemleak=off

# RAID 5/6 1 MiB sequential writes with parity in the kernel and with graid-helper attached,
# alternating in one VM run (selftests/bench-offload.sh), about 5 minutes under TCG.
bench-offload: module tools
	set -o pipefail; mkdir -p out; \
	VM_KERNEL_ARGS=$(BENCH_KERNEL_ARGS) GRAID_VM_WORK=$(CURDIR)/out/vm-bench-offload selftests/vm.sh --disks 6 --disk-size 512 \
		selftests/bench-offload.sh | tee out/bench-offload.txt; rc=$$?; \
		rm -f out/vm-bench-offload/nvme*.img; exit $$rc

# The write-intent bitmap's write cost, graid and md each with and without one, in one VM run
# (selftests/bench-bitmap.sh), about 15 minutes under TCG.
bench-bitmap: module tools
	set -o pipefail; mkdir -p out; \
	VM_KERNEL_ARGS=$(BENCH_KERNEL_ARGS) GRAID_VM_WORK=$(CURDIR)/out/vm-bench-bitmap selftests/vm.sh --disks 6 --disk-size 512 \
		--timeout 3600 selftests/bench-bitmap.sh | tee out/bench-bitmap.txt; rc=$$?; \
		rm -f out/vm-bench-bitmap/nvme*.img; exit $$rc

# A restripe's speed (RAID 5 grown by a drive, RAID 6 onto another chunk), idle and under random
# reads, graid against md in one VM run (selftests/bench-reshape.sh), about 10 minutes under TCG.
bench-reshape: module tools
	set -o pipefail; mkdir -p out; \
	VM_KERNEL_ARGS=$(BENCH_KERNEL_ARGS) GRAID_VM_WORK=$(CURDIR)/out/vm-bench-reshape selftests/vm.sh --disks 6 --disk-size 512 \
		--timeout 3600 selftests/bench-reshape.sh | tee out/bench-reshape.txt; rc=$$?; \
		rm -f out/vm-bench-reshape/nvme*.img; exit $$rc

# The partial parity log's write cost, graid and md (its PPL) each with and without one, RAID 5
# in one VM run (selftests/bench-ppl.sh), about 10 minutes under TCG.
bench-ppl: module tools
	set -o pipefail; mkdir -p out; \
	VM_KERNEL_ARGS=$(BENCH_KERNEL_ARGS) GRAID_VM_WORK=$(CURDIR)/out/vm-bench-ppl selftests/vm.sh --disks 6 --disk-size 512 \
		--timeout 3600 selftests/bench-ppl.sh | tee out/bench-ppl.txt; rc=$$?; \
		rm -f out/vm-bench-ppl/nvme*.img; exit $$rc

# An array through NVMe/TCP on the loopback and NVMe/RDMA on soft-RoCE (graidctl export, nvme
# connect) against the same array locally: 1M writes and reads, 4k random reads
# (selftests/bench-nvmeof.sh), about 8 minutes under TCG.
bench-nvmeof: module tools
	set -o pipefail; mkdir -p out; \
	VM_KERNEL_ARGS=$(BENCH_KERNEL_ARGS) GRAID_VM_WORK=$(CURDIR)/out/vm-bench-nvmeof selftests/vm.sh --disks 6 --disk-size 512 \
		--timeout 3600 selftests/bench-nvmeof.sh | tee out/bench-nvmeof.txt; rc=$$?; \
		rm -f out/vm-bench-nvmeof/nvme*.img; exit $$rc

# graid vs md: RAID 0/1/10 on four (RAID 1: two) and RAID 5/6 on six 512 MiB NVMe drives
# (BENCH_MEMBERS=nullblk: memory-backed null_blk devices; BENCH_LEVELS picks levels), about
# 45 minutes under TCG with every level. The table also lands in out/bench-MEMBERS.txt.
# Its own VM work folder; the prefilled drive images are removed.
BENCH_RUNTIME ?= 6
BENCH_ROUNDS ?= 2
BENCH_CHUNK ?= 512K
BENCH_MEMBERS ?= nvme
BENCH_LEVELS ?= 0 1 10 5 6
BENCH_ONLY ?= .
# Parity writes as shipped (bitmap and log on), graid against md, RAID 5/6 on six drives at
# 512 KiB and 64 KiB chunks (selftests/bench-shipped.sh), about 25 minutes under TCG.
# BENCH_MEMBERS=nullblk runs it on memory-backed null_blk disks (out/bench-shipped-nullblk.txt).
SHIPPED_CHUNKS ?= 512K 64K
SHIPPED_LEVELS ?= 5 6
SHIPPED_SUFFIX := $(if $(filter nullblk,$(BENCH_MEMBERS)),-nullblk)
# null_blk's memory holds what the arrays wrote (about 1.3 GiB at most).
SHIPPED_MEM := $(if $(filter nullblk,$(BENCH_MEMBERS)),4608,3072)
bench-shipped: module tools
	set -o pipefail; mkdir -p out; \
	VM_KERNEL_ARGS=$(BENCH_KERNEL_ARGS) GRAID_VM_WORK=$(CURDIR)/out/vm-bench-shipped selftests/vm.sh --disks 6 --disk-size 512 --mem $(SHIPPED_MEM) \
		--timeout 3600 selftests/bench-shipped.sh $(BENCH_RUNTIME) $(BENCH_ROUNDS) "$(SHIPPED_CHUNKS)" "$(SHIPPED_LEVELS)" \
		$(BENCH_MEMBERS) | tee out/bench-shipped$(SHIPPED_SUFFIX).txt; rc=$$?; \
		rm -f out/vm-bench-shipped/nvme*.img; exit $$rc

# Forced writes (FUA writes and flushes) and member I/Os per 4 KiB array write, graid as
# shipped against md's PPL (RAID 5) and bitmap (RAID 6), counted from every drive's completed
# requests (selftests/bench-ordering.sh), about 10 minutes under TCG.
bench-ordering: module tools
	set -o pipefail; mkdir -p out; \
	VM_KERNEL_ARGS=$(BENCH_KERNEL_ARGS) GRAID_VM_WORK=$(CURDIR)/out/vm-bench-ordering selftests/vm.sh --disks 6 --disk-size 512 \
		--timeout 3600 selftests/bench-ordering.sh | tee out/bench-ordering.txt; rc=$$?; \
		rm -f out/vm-bench-ordering/nvme*.img; exit $$rc

# How long an array takes to start after a crash (its log read and replayed), RAID 5 on members
# seen as 64 GiB (selftests/bench-dirty-start.sh), a few minutes under TCG.
bench-dirty-start: module tools
	set -o pipefail; mkdir -p out; \
	VM_KERNEL_ARGS=$(BENCH_KERNEL_ARGS) GRAID_VM_WORK=$(CURDIR)/out/vm-bench-dirty-start selftests/vm.sh --disks 6 --disk-size 512 \
		--timeout 3600 selftests/bench-dirty-start.sh | tee out/bench-dirty-start.txt; rc=$$?; \
		rm -f out/vm-bench-dirty-start/nvme*.img; exit $$rc

# Where the CPU goes on writes (PROFILE_LOAD: rand4k or seq1m), md and graid (bare, as shipped)
# under perf in one VM run (selftests/profile-writes.sh; needs the host's perf, Debian's
# linux-perf), about 3 minutes. BENCH_MEMBERS=nullblk profiles on null_blk disks.
PROFILE_LEVEL ?= 5
PROFILE_CHUNK ?= 64K
PROFILE_LOAD ?= rand4k
profile-writes: module tools
	@[ -x /usr/bin/perf ] || { echo "needs /usr/bin/perf (apt install linux-perf)"; exit 1; }
	set -o pipefail; mkdir -p out; \
	VM_EXTRA_BINARIES=/usr/bin/perf VM_KERNEL_ARGS=$(BENCH_KERNEL_ARGS) GRAID_VM_WORK=$(CURDIR)/out/vm-profile \
		selftests/vm.sh --disks 6 --disk-size 512 --mem 3072 selftests/profile-writes.sh \
		$(PROFILE_LEVEL) $(PROFILE_CHUNK) $(PROFILE_LOAD) 8 $(BENCH_MEMBERS) | tee out/profile-writes.txt; rc=$$?; \
		rm -f out/vm-profile/nvme*.img; exit $$rc

bench: module tools
	set -o pipefail; mkdir -p out; \
	VM_KERNEL_ARGS=$(BENCH_KERNEL_ARGS) GRAID_VM_WORK=$(CURDIR)/out/vm-bench selftests/vm.sh --disks 6 --disk-size 512 --mem 3072 \
		--timeout 7200 selftests/bench.sh $(BENCH_RUNTIME) $(BENCH_ROUNDS) $(BENCH_CHUNK) \
		$(BENCH_MEMBERS) "$(BENCH_LEVELS)" "$(BENCH_ONLY)" | tee out/bench-$(BENCH_MEMBERS).txt; rc=$$?; \
		rm -f out/vm-bench/nvme*.img; exit $$rc

# The ring with no kernel (tools/graid-helper/src/loopback.rs): RAID 6 shapes and chunk sizes,
# one and all engine threads. Native, so it measures the host, not the VM.
RING_SHAPES ?= 8:64 8:1024 16:64 16:1024
bench-ring: tools
	@for shape in $(RING_SHAPES); do \
		for threads in 1 $$(nproc); do \
			tools/target/release/graid-helper loopback --data $${shape%:*} --parity 2 \
				--chunk-kib $${shape#*:} --threads $$threads \
				--jobs $$((8000000 / $${shape#*:} / $${shape%:*})) || exit 1; \
		done; \
	done

# Outputs only: every module build goes to out/module (older checkouts built in the tree, whose
# leftovers go too); the kernel cache stays, and nothing is built to find it.
clean:
	rm -rf out tools/target raid_gpu.ko rust-project.json
	find . raid_gpu rust -maxdepth 1 \( -name '*.o' -o -name '*.ko' -o -name '*.mod' -o -name '*.mod.c' \
		-o -name '.*.cmd' -o -name '*.d' -o -name '*.rmeta' -o -name Module.symvers \
		-o -name modules.order \) -type f -delete
