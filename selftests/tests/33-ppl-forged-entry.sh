# A partial parity log entry forged into user data is never replayed (issue 29, E3). A local
# user who owns data chunks of a RAID 5 can make a partial write's partial parity (the chunks it
# leaves alone: on three members, simply the other data chunk) carry any bytes into the log: here
# a header well formed in every field a user can know (magic, the array's UUID, the log's epoch,
# checksums) claiming that stripe 1's rows were written, with a payload of its choosing. After a
# crash the replay must take nothing from it: it lacks the log's key. The crash is made without
# a reboot: every member's writes are dropped (dm-flakey), the array is stopped (its clean mark
# never lands), the members are put back and assembled, which replays the log.
. /graid/lib.sh
need_members 3
set -- $members
export DM_DISABLE_UDEV=1
# The array stays dirty (no clean mark voids the log) and is not resynced after the crash (a
# resync would rewrite stripe 1's parity from the data and hide what the replay did).
load_module_with safe_mode_delay_ms=600000 auto_resync=0
i=0
for d in "$@"; do
	dmsetup --noudevsync create p$i --table "0 131072 linear $d 0" || fail "dmsetup create p$i"
	i=$((i + 1))
done
parts="/dev/mapper/p0 /dev/mapper/p1 /dev/mapper/p2"
wipe_superblocks $parts

# KIND=linear|drop tables: every part's table, linear or dropping every write (dm-flakey,
# always down).
tables() {
	i=0
	for d in $members; do
		case $KIND in
		linear) table="0 131072 linear $d 0" ;;
		drop) table="0 131072 flakey $d 0 0 3600 1 drop_writes" ;;
		esac
		dmsetup --noudevsync suspend p$i && dmsetup --noudevsync load p$i --table "$table" &&
			dmsetup --noudevsync resume p$i || fail "cannot switch p$i to $KIND"
		i=$((i + 1))
	done
}

expect_rc 0 graidctl create forged --level 5 --chunk 64K --write-zeroes $parts
dev=$(array_dev "$OUT")
expect_rc 0 graidctl --json detail forged
uuid=$(json_field uuid "$OUT")
[ -n "$uuid" ] || fail "no UUID in detail"
# Stripe 1's parity lives on member 1 (left-symmetric): its rows 128..135 (data from 2 MiB).
p1_rows() { dd if=/dev/mapper/p1 bs=512 skip=$((4096 + 128)) count=8 iflag=direct 2>/dev/null | md5sum; }
dd if=/dev/urandom of=$dev bs=64K seek=2 count=2 oflag=direct 2>/dev/null || fail "stripe 1"
before=$(p1_rows)

# The forged header and payload as data chunk D1 of stripe 0 (array offset 64 KiB): claims that
# member 2 wrote stripe 1's rows 128..135, whose parity the replay would rebuild from 0xab bytes.
graid-probe forge-ppl "$uuid" /dev/mapper/p2 3 128 8 2 >/tmp/forged ||
	fail "graid-probe forge-ppl failed"
dd if=/tmp/forged of=$dev bs=8K seek=8 count=1 oflag=direct 2>/dev/null || fail "write D1"
# A partial write to D0's same rows: its partial parity is D1's rows, the forged blocks, logged
# on stripe 0's parity member (member 2) right behind a real entry header.
dd if=/dev/urandom of=$dev bs=8K count=1 oflag=direct 2>/dev/null || fail "write D0"
expect_rc 0 graidctl detail forged
expect_match 'Write Hole : closed by the partial parity log \([1-9]' "$OUT" "the writes were logged"

# The crash: nothing written from now on lands; the stop's clean mark is lost.
KIND=drop tables
expect_rc 0 graidctl stop forged
KIND=linear tables
dmesg -c >/dev/null
expect_rc 0 graidctl assemble forged $parts
dmesg | grep -i 'partial parity log replayed' || fail "no replay after the crash"
after=$(p1_rows)
[ "$after" = "$before" ] || fail "the replay rewrote stripe 1's parity from a forged entry"
expect_rc 0 graidctl stop forged
for i in 0 1 2; do dmsetup --noudevsync remove p$i; done
# The next test gets the module's defaults (this one ran with a 10-minute safe-mode delay).
unload_module
