# graid vs Linux md on the same members, in one VM run (`make bench`; not a test).
#
#   selftests/vm.sh --disks 6 --disk-size 512 selftests/bench.sh \
#       [RUNTIME_S [ROUNDS [CHUNK [MEMBERS [LEVELS [ONLY]]]]]]
#
# MEMBERS: nvme (default: the VM's six emulated NVMe drives) or nullblk (six memory-backed
# null_blk devices of 256 MiB: no device emulation, so the drivers' own cost shows; md needs
# members that keep its superblock, so QEMU's null-co drives cannot serve both). LEVELS: the
# levels to run, default "0 1 10 5 6"; LEVEL@CHUNK runs a level with another chunk than CHUNK
# (e.g. "5@64K"). ONLY: an extended regular expression; only workloads whose names match it
# run (e.g. "randwrite4k|seqwrite"; default: all). RAID 0 and RAID 10 (near-2) on four members, RAID 1 on
# two, RAID 5 and RAID 6 (left-symmetric) on six, created by graidctl (--assume-clean, --bitmap none,
# and for RAID 5/6 --consistency-policy resync: no partial parity log) and by
# mdadm (metadata 1.2, --assume-clean, no bitmap; raid456 with group_thread_cnt and
# stripe_cache_size as printed) with the same chunk (default 512K) and member order. The sixth
# member is a dm-linear device over the drive for both (so the degraded cell can switch it to
# an error table). fio (libaio, O_DIRECT) runs each workload RUNTIME_S seconds (default 10)
# after a 2 s ramp: RAID 0/1/10 4k random read and write at iodepth 1 and 32 and 1M
# sequential read and write at iodepth 32, one job; RAID 5/6 4k and 64k random read and write
# with 4 jobs at iodepth 32 each, 1M sequential read and write (one job, iodepth 32), and 1M
# sequential read with the sixth member failed (degraded). Each workload runs on a fresh graid
# array and a fresh md array back to back, ROUNDS times (default 2; graid first in odd rounds,
# md first in even ones), so background load and drift hit both alike; one raw member is the
# reference. Then the members' aggregate: 4k random reads, one job per member at iodepth 32,
# against RAID 0 with four such jobs. Prints every run, one table per level (means,
# graid/md), the aggregate, and the kernel log's warnings and errors. When ONLY matches
# "rebuild" (BENCH_ONLY=rebuild), each redundant level also times the rebuild of its second
# member (failed, removed, added back) on graid and md, idle and under a 4k random read load,
# both with a 100 MiB/s floor and no cap. Under QEMU TCG only the same-run ratios mean anything.
. /graid/lib.sh
runtime=${1:-10}
rounds=${2:-2}
chunk=${3:-512K}
member_kind=${4:-nvme}
levels=${5:-0 1 10 5 6}
only=${6:-.}
ramp=2
# md raid456's tuning (md's defaults are 0 and 256): one worker thread per CPU beside raid5d,
# and a stripe cache of 4096 stripes (16 MiB per member).
md_group_threads=$(nproc)
md_stripe_cache=4096
# name:fio rw:block size:iodepth:jobs:metric (iops, or mib = MiB/s). "degraded-" runs with
# the sixth member failed.
mirror_workloads="randread1:randread:4k:1:1:iops randread32:randread:4k:32:1:iops randwrite1:randwrite:4k:1:1:iops randwrite32:randwrite:4k:32:1:iops seqread:read:1M:32:1:mib seqwrite:write:1M:32:1:mib"
parity_workloads="randread4k:randread:4k:32:4:iops randwrite4k:randwrite:4k:32:4:iops randread64k:randread:64k:32:4:iops randwrite64k:randwrite:64k:32:4:iops seqread:read:1M:32:1:mib seqwrite:write:1M:32:1:mib degraded-seqread:read:1M:32:1:mib"
results=/tmp/bench.results
: >$results
fio_errors=0
# dmsetup makes its own nodes and waits for nobody (udev runs, but the bench needs no events).
export DM_DISABLE_UDEV=1
dm() {
	dmsetup --noudevsync "$@" 2>/tmp/dm.err
	rc=$?
	grep -v DM_DISABLE_UDEV /tmp/dm.err >&2
	return $rc
}

load_module
dmesg -c >/dev/null   # the report at the end shows only what the bench caused
# Without /sbin/modprobe the kernel cannot load md personalities on demand.
modprobe -a raid0 raid1 raid10 raid456 dm-mod || fail "cannot load md raid0/1/10/456 or dm"
case $member_kind in
nvme)
	set -- $(graid_nvme_disks)
	[ $# -ge 6 ] || fail "needs 6 NVMe drives"
	size_mb=$GRAID_DISK_SIZE_MB
	;;
nullblk)
	size_mb=256
	nullblk_devices 6 $size_mb
	set -- $nullblk_devices
	;;
*) fail "MEMBERS is nvme or nullblk, not '$member_kind'" ;;
esac
drives="$1 $2 $3 $4 $5 $6"
raw=$1
# The sixth member through dm-linear: the degraded cell switches it to an error table.
last_sectors=$(cat /sys/class/block/${6#/dev/}/size)
dm create bench-last --table "0 $last_sectors linear $6 0" || fail "dmsetup create"
dm mknodes || fail "dmsetup mknodes"
[ -b /dev/mapper/bench-last ] || fail "no /dev/mapper/bench-last"
members="$1 $2 $3 $4 $5 /dev/mapper/bench-last"
echo "members: $member_kind $drives (${size_mb} MiB each; the sixth through dm-linear), chunk $chunk, ${runtime} s + ${ramp} s ramp per run, $rounds rounds, levels $levels"

# run_workload LEVEL KIND DEVS WORKLOAD: one fio run; appends "LEVEL KIND NAME VALUE". DEVS is
# one device, or several separated by ':' (one job each, results summed).
run_workload() {
	IFS=: read -r name rw bs iodepth njobs metric <<EOF2
$4
EOF2
	jobs=
	for f in $(echo "$3" | tr ':' ' '); do jobs="$jobs --name=$name --filename=$f"; done
	fio --rw="$rw" --bs="$bs" --direct=1 --ioengine=libaio --iodepth="$iodepth" \
		--numjobs="$njobs" --time_based --runtime="$runtime" --ramp_time=$ramp --norandommap \
		--randrepeat=0 --group_reporting --minimal $jobs >/tmp/fio.out 2>&1
	rc=$?
	# Terse v3: field 5 error, 7/8 read KiB/s and IOPS, 48/49 write KiB/s and IOPS.
	v=$(awk -F';' -v m="$metric" -v w="$rw" '$1 == 3 {
		if ($5 != 0) exit 1
		wr = (w ~ /write/)
		if (m == "iops") v = wr ? $49 : $8; else v = (wr ? $48 : $7) / 1024
		printf "%.1f\n", v
	}' /tmp/fio.out)
	if [ $rc != 0 ] || [ -z "$v" ]; then
		echo "fio $name on $3 failed (exit $rc):"
		cat /tmp/fio.out
		fio_errors=$((fio_errors + 1))
		v=0
	fi
	echo "$1 $2 $name $v" >>$results
	printf '%-7s %-6s %-17s %10s %s\n' "$1" "$2" "$name" "$v" "$([ "$metric" = iops ] && echo IOPS || echo MiB/s)"
}

# level_members LEVEL: RAID 1 mirrors the first two members, RAID 0/10 use four, RAID 5/6 six.
level_members() {
	case $1 in
	1) echo "$members" | cut -d' ' -f1-2 ;;
	0 | 10) echo "$members" | cut -d' ' -f1-4 ;;
	*) echo "$members" ;;
	esac
}

# selected WORKLOAD...: the workloads whose names match ONLY.
selected() {
	echo $(echo "$@" | tr ' ' '\n' | grep -E "^($only)[^:]*:")
}

level_workloads() {
	case $1 in
	5 | 6) selected $parity_workloads ;;
	*) selected $mirror_workloads ;;
	esac
}

# up_graid LEVEL, up_md LEVEL: create the array on the members; its device in $dev.
# down_graid LEVEL, down_md LEVEL: stop it and blank the members' superblocks.
up_graid() {
	c="--chunk $chunk"
	[ "$1" = 1 ] && c=
	# No bitmap on either side (md's is off too): its cost is selftests/bench-bitmap.sh's. No
	# partial parity log either (md has no PPL by default): bench-ppl.sh measures it.
	case $1 in 5 | 6) c="$c --consistency-policy resync" ;; esac
	graidctl create "bench$1" --level "$1" $c --bitmap none --assume-clean $(level_members $1) >/tmp/create.out 2>&1 ||
		{ cat /tmp/create.out; fail "graidctl create failed"; }
	dev=$(grep -o '/dev/graid[0-9]*' /tmp/create.out | head -n 1)
	[ -b "$dev" ] || { cat /tmp/create.out; fail "no graid block device"; }
}

down_graid() {
	detail=$(graidctl --json detail "bench$1")
	[ -n "$degraded" ] || ! echo "$detail" | grep -q '"errors": [1-9]' ||
		{ echo "graid member errors:"; echo "$detail"; }
	graidctl stop "bench$1" >/dev/null || fail "graidctl stop failed"
	restore_last
	for m in $(level_members $1); do
		graidctl zero-superblock "$m" >/dev/null 2>&1 || wipe_superblocks "$m"
	done
}

up_md() {
	opts="--chunk=$chunk"
	case $1 in
	10) opts="$opts --layout=n2 --bitmap=none" ;;
	1) opts="--bitmap=none" ;;
	5 | 6) opts="$opts --layout=left-symmetric --bitmap=none" ;;
	esac
	m=$(level_members $1)
	mdadm --create /dev/md0 --run --level="$1" $opts --raid-devices=$(echo $m | wc -w) \
		--metadata=1.2 --assume-clean $m >/tmp/create.out 2>&1 ||
		{ cat /tmp/create.out; dmesg | tail -n 5; fail "mdadm --create failed"; }
	dev=/dev/md0
	[ -b $dev ] || fail "no /dev/md0"
	if [ -e /sys/block/md0/md/group_thread_cnt ]; then
		echo $md_group_threads >/sys/block/md0/md/group_thread_cnt || fail "group_thread_cnt"
		echo $md_stripe_cache >/sys/block/md0/md/stripe_cache_size || fail "stripe_cache_size"
	fi
	if [ -z "$md_shown" ]; then
		md_shown=1
		grep -A1 md0 /proc/mdstat
		mdadm --examine "$raw" | grep -E 'Data Offset|Chunk Size|Layout'
		[ -e /sys/block/md0/md/group_thread_cnt ] &&
			echo "md group_thread_cnt $(cat /sys/block/md0/md/group_thread_cnt), stripe_cache_size $(cat /sys/block/md0/md/stripe_cache_size)"
	fi
}

down_md() {
	mdadm --stop /dev/md0 >/dev/null 2>&1 || fail "mdadm --stop failed"
	restore_last
	mdadm --zero-superblock $(level_members $1) >/dev/null 2>&1
	wipe_superblocks $(level_members $1)
}

# last_table TABLE: the sixth member's dm table becomes TABLE (one target over all of it).
last_table() {
	dm suspend bench-last && dm load bench-last --table "0 $last_sectors $1" &&
		dm resume bench-last || fail "cannot switch the sixth member to '$1'"
}

# fail_last: every I/O to the sixth member fails from now on; a 16 MiB read (chunks on every
# member) makes the array fail it (graid at the first error, md after its rewrite fails too),
# so the measured run is degraded from its start.
fail_last() {
	last_table error
	degraded=1
	dd if="$dev" of=/dev/null bs=1M count=16 iflag=direct 2>/dev/null
}

restore_last() {
	[ -n "$degraded" ] || return 0
	last_table "linear $drives_last 0"
	degraded=
}
drives_last=$6
degraded=

# Write every drive once, so no run meets never-written (sparse) backing blocks first.
fill=
for m in $drives; do fill="$fill --name=fill-${m#/dev/} --filename=$m"; done
fio --rw=write --bs=1M --direct=1 --ioengine=libaio --iodepth=8 $fill --minimal >/dev/null ||
	fail "prefill failed"
wipe_superblocks $members

echo "--- raw member $raw"
for w in $(selected $mirror_workloads $parity_workloads); do
	case $w in degraded-*) continue ;; esac
	run_workload raw raw "$raw" "$w"
done
# Each workload runs on graid and md back to back, so both see the same background load.
default_chunk=$chunk
for token in $levels; do
	level=${token%@*}
	chunk=$default_chunk
	case $token in *@*) chunk=${token#*@} ;; esac
	echo "--- RAID $level, chunk $chunk"
	md_shown=
	for w in $(level_workloads $level); do
		r=1
		while [ $r -le "$rounds" ]; do
			if [ $((r % 2)) = 1 ]; then order="graid md"; else order="md graid"; fi
			for kind in $order; do
				up_$kind $level
				case $w in degraded-*) fail_last ;; esac
				run_workload "raid$token" $kind "$dev" "$w"
				down_$kind $level
			done
			r=$((r + 1))
		done
	done
done
chunk=$default_chunk

case " $levels " in
*" 0 "*)
	echo "--- the members' aggregate 4k random read vs RAID 0 (one job per member, iodepth 32 each)"
	agg="aggregate:randread:4k:32:1:iops"
	four=$(echo $drives | cut -d' ' -f1-4)
	r=1
	while [ $r -le "$rounds" ]; do
		run_workload members raw "$(echo $four | tr ' ' ':')" "$agg"
		for kind in graid md; do
			up_$kind 0
			run_workload raid0 $kind "$dev:$dev:$dev:$dev" "$agg"
			down_$kind 0
		done
		r=$((r + 1))
	done
	;;
esac

echo
echo "fio libaio O_DIRECT, ${runtime} s per run after ${ramp} s ramp, iodepth (QD) and jobs as named;"
echo "graid and md: mean of $rounds runs each, paired back to back; pairs: the median of the"
echo "rounds' graid/md ratios; raw member: one run on $raw."
echo "IOPS for 4k and 64k, MiB/s for 1M. QEMU TCG: absolute numbers mean nothing, compare ratios."
for token in $levels; do
	level=${token%@*}
	c=$default_chunk
	case $token in *@*) c=${token#*@} ;; esac
	echo
	n=$(echo $(level_members $level) | wc -w)
	echo "RAID $level, $n $member_kind members, chunk $([ $level = 1 ] && echo - || echo $c)$(case $level in 5 | 6) echo ", left-symmetric; md group_thread_cnt $md_group_threads, stripe_cache_size $md_stripe_cache" ;; esac)"
	awk -v lv="raid$token" -v wl="$(level_workloads $level)" '
	{ k = $1 " " $2 " " $3; sum[k] += $4; n[k]++; v[k, n[k]] = $4; runs[k] = runs[k] " " $4 }
	END {
		printf "%-24s %-6s %10s %10s %9s %8s %11s   %s\n", "workload", "unit", "graid", "md", "graid/md", "pairs", "raw member", "runs: graid | md"
		nw = split(wl, ws, " ")
		for (i = 1; i <= nw; i++) {
			split(ws[i], f, ":")
			w = f[1]
			label = (w ~ /^degraded-/ ? "degraded " : "") f[3] " " f[2] " QD" f[4] (f[5] > 1 ? "x" f[5] : "")
			unit = f[6] == "iops" ? "IOPS" : "MiB/s"
			kg = lv " graid " w; km = lv " md " w
			g = n[kg] ? sum[kg] / n[kg] : 0
			m = n[km] ? sum[km] / n[km] : 0
			rw = w; sub(/^degraded-/, "", rw)
			r = n["raw raw " rw] ? sum["raw raw " rw] / n["raw raw " rw] : 0
			# pairs: the median of each round'"'"'s graid/md ratio (the two runs of a round are
			# back to back, so drift of the host cancels within a pair).
			np = 0
			for (j = 1; j <= n[kg] && j <= n[km]; j++) {
				if (v[km, j] <= 0) continue
				x = v[kg, j] / v[km, j]
				for (q = np; q > 0 && pr[q] > x; q--) pr[q + 1] = pr[q]
				pr[q + 1] = x; np++
			}
			med = np == 0 ? 0 : (np % 2 ? pr[(np + 1) / 2] : (pr[np / 2] + pr[np / 2 + 1]) / 2)
			printf "%-24s %-6s %10.1f %10.1f %9.2f %8.2f %11.1f  %s |%s\n", label, unit,
				g, m, (m > 0 ? g / m : 0), med, r, runs[kg], runs[km]
			if (w == "seqread") { og = g; om = m }
			if (w == "degraded-seqread" && og > 0 && om > 0)
				printf "%-24s %-6s %10.2f %10.2f\n", "degraded/optimal 1M read", "ratio", g / og, m / om
		}
	}' $results
done
if [ -s $results ] && grep -q aggregate $results; then
	echo
	awk '$3 == "aggregate" { k = $1 " " $2; s[k] += $4; n[k]++; runs[k] = runs[k] " " $4 }
	END {
		m = s["members raw"] / n["members raw"]; g = s["raid0 graid"] / n["raid0 graid"]
		d = s["raid0 md"] / n["raid0 md"]
		printf "4k randread, 4 jobs x QD32, IOPS: members %.1f, graid RAID 0 %.1f (%.2f of the members), md RAID 0 %.1f (%.2f)\n", m, g, (m > 0 ? g / m : 0), d, (m > 0 ? d / m : 0)
		printf "runs: members%s | graid%s | md%s\n", runs["members raw"], runs["raid0 graid"], runs["raid0 md"]
	}' $results
fi

# randread_iops DEV SECONDS: the 4k random read load's IOPS (QD32) on DEV over SECONDS.
randread_iops() {
	fio --name=load --filename=$1 --rw=randread --bs=4k --direct=1 --ioengine=libaio \
		--iodepth=32 --time_based --runtime=$2 --norandommap --randrepeat=0 --minimal \
		>/tmp/load.out 2>&1 || fail "fio randread on $1 failed"
	awk -F';' '$1 == 3 { printf "%.0f", $8 }' /tmp/load.out
}

# uptime_s: seconds since boot to the hundredth (busybox's date has no %N: whole seconds were
# all a rebuild of a few seconds got).
uptime_s() { cut -d' ' -f1 /proc/uptime; }

# rebuild_once LEVEL KIND LOAD: fails and removes the level's second member, adds it back and
# times its rebuild, idle or (LOAD=read) under a 4k random read load (QD32) on the array
# throughout, and the load's IOPS over it, and before the failure on the whole array. Appends
# "rebuildLEVEL KIND LOAD SECONDS IOPS IDLE_IOPS".
rebuild_once() {
	up_$2 $1
	[ $2 = graid ] && graidctl set-speed "bench$1" --min 100M --max 0 >/dev/null
	victim=$(echo $(level_members $1) | cut -d' ' -f2)
	before=-
	[ $3 = read ] && before=$(randread_iops $dev 5)
	if [ $2 = graid ]; then
		graidctl fail "bench$1" $victim >/dev/null && graidctl remove "bench$1" $victim >/dev/null ||
			fail "graidctl fail/remove failed"
	else
		mdadm /dev/md0 --fail $victim --remove $victim >/dev/null 2>&1 || fail "mdadm --fail/--remove failed"
		mdadm --zero-superblock $victim >/dev/null 2>&1
	fi
	iops=-
	if [ $3 = read ]; then
		fio --name=load --filename=$dev --rw=randread --bs=4k --direct=1 --ioengine=libaio \
			--iodepth=32 --time_based --runtime=3600 --norandommap --randrepeat=0 \
			--minimal >/tmp/load.out 2>&1 &
		loader=$!
		usleep 500000
	fi
	t0=$(uptime_s)
	if [ $2 = graid ]; then
		graidctl add "bench$1" $victim >/dev/null && graidctl wait "bench$1" >/dev/null 2>&1 ||
			fail "graidctl add/wait failed"
	else
		mdadm /dev/md0 --add $victim >/dev/null 2>&1 || fail "mdadm --add failed"
		usleep 200000
		mdadm --wait /dev/md0 >/dev/null 2>&1
	fi
	t1=$(uptime_s)
	if [ $3 = read ]; then
		# fio ends on SIGINT and prints its numbers: the load's IOPS over the whole rebuild.
		kill -INT $loader
		wait $loader
		iops=$(awk -F';' '$1 == 3 { printf "%.0f", $8 }' /tmp/load.out)
	fi
	secs=$(echo "$t0 $t1" | awk '{ printf "%.2f", $2 - $1 }')
	echo "rebuild$1 $2 $3 $secs $iops $before" >>$results
	printf 'rebuild RAID %-3s %-6s %-5s %7s s  load %s IOPS (%s before the failure)\n' "$1" "$2" "$3" \
		"$secs" "$iops" "$before"
	down_$2 $1
}

if echo rebuild | grep -Eq "^($only)"; then
	# Both with the same knobs: no cap (md's 200 MB/s default lifted), and the floor they keep
	# to under load at graid's default, 100 MiB/s (md's default, 1 MB/s, would take minutes).
	echo 10000000 >/proc/sys/dev/raid/speed_limit_max
	echo 102400 >/proc/sys/dev/raid/speed_limit_min
	echo "--- rebuild of one member: idle, and under 4k random reads (QD32); floor 100 MiB/s, no cap (graid and md)"
	# What a rebuild could reach at best: the replacement's own sequential write speed, on the
	# raw device (the bench's arrays are made afresh after this).
	fio --name=raw --filename=$2 --rw=write --bs=1M --direct=1 --ioengine=libaio --iodepth=32 \
		--size=$((size_mb - 2))M --minimal >/tmp/raw.out 2>&1 || fail "fio write on $2 failed"
	raw_kib=$(awk -F';' '$1 == 3 { print $48 }' /tmp/raw.out)
	echo "raw $raw_kib" >>$results
	echo "replacement $2, raw 1M sequential write: $((raw_kib / 1024)) MiB/s"
	for token in $levels; do
		level=${token%@*}
		chunk=$default_chunk
		case $token in *@*) chunk=${token#*@} ;; esac
		[ $level = 0 ] && continue
		for load in idle read; do
			r=1
			while [ $r -le "$rounds" ]; do
				for kind in graid md; do rebuild_once $level $kind $load; done
				r=$((r + 1))
			done
		done
	done
	chunk=$default_chunk
	echo
	echo "rebuild of one $((size_mb)) MiB member (seconds, mean of $rounds; idle: the rebuild's speed"
	echo "as a fraction of the replacement's raw write speed; load: 4k randread QD32 IOPS during the"
	echo "rebuild and as a fraction of the same load before the failure)"
	awk -v data_mib=$((size_mb - 2)) '
	$1 == "raw" { raw = $2 / 1024 }
	$1 ~ /^rebuild/ { k = $1 " " $3; t[k " " $2] += $4; n[k " " $2]++; keys[k] = 1
		if ($5 != "-") { io[k " " $2] += $5; before[k " " $2] += $6 } }
	END {
		printf "%-14s %-5s %9s %9s %9s %11s %11s %8s %8s\n", "level", "load", "graid s", "md s", "md/graid",
			"graid IOPS", "md IOPS", "graid", "md"
		for (k in keys) {
			split(k, f, " ")
			g = t[k " graid"] / n[k " graid"]; m = t[k " md"] / n[k " md"]
			if (f[2] == "idle") {
				# MiB/s of the rebuild over the raw write speed.
				fg = (g > 0 && raw > 0 ? data_mib / g / raw : 0); fm = (m > 0 && raw > 0 ? data_mib / m / raw : 0)
			} else {
				fg = (before[k " graid"] > 0 ? io[k " graid"] / before[k " graid"] : 0)
				fm = (before[k " md"] > 0 ? io[k " md"] / before[k " md"] : 0)
			}
			printf "%-14s %-5s %9.2f %9.2f %9.2f %11.0f %11.0f %8.2f %8.2f\n", f[1], f[2], g, m, (g > 0 ? m / g : 0),
				io[k " graid"] / n[k " graid"], io[k " md"] / n[k " md"], fg, fm
		}
	}' $results | sort
fi

dm remove bench-last || fail "dmsetup remove"
unload_module
echo
echo "--- kernel log during the bench (warn|bug|error), failed-member messages of the degraded cells left out:"
dmesg | grep -iE 'warn|bug|error' | grep -vE 'I/O error, dev dm-|Buffer I/O error on dev dm-|md/raid:md0: (read error|Disk failure)|md: super_written gets error=-5|graid: bench[56]: member [0-9]+ failed, array degraded' || echo "(none)"
[ $fio_errors = 0 ] || fail "$fio_errors fio runs failed"
