//! The partial parity log's pure logic (`raid_gpu/engine/ppl.rs`): its blocks, which rows a
//! replay rewrites from which entry, and that the partial parity the write path logs makes a
//! torn stripe whole again.

use graid_engine::members::MemberSet;
use graid_engine::ppl::{
    add_to_group, decode_entry, decode_group, decode_head, drop_torn, encode_entry, encode_head,
    gf_mul, gf_pow2, log_area_for, plan_replay, scan_log, sort_entries, start_group, Entry,
    EntryError, EntryKind, LogArea, LogId, LogReader, LogRun, LoggedEntry, ParityKind, ReplayPiece,
    BLOCK_BYTES, DEFAULT_LOG_AREA, MAX_BARRIER_SECTORS, MAX_GROUP_ENTRIES, MAX_LOGGED_SECTORS,
};
use graid_engine::stripe::{SLICE_SECTORS, WIDE_SLICE_SECTORS};
use graid_engine::superblock::Area;
use proptest::prelude::*;

const UUID: [u8; 16] = *b"0123456789abcdef";
const ID: LogId = LogId {
    uuid: UUID,
    key: *b"the log's secret",
};

fn entry(seq: u64, start: u64, sectors: u64, written: &[(u32, u32, u32)]) -> Entry {
    let mut w = [(0, 0); 32];
    for &(m, f, t) in written {
        w[m as usize] = (f, t);
    }
    Entry {
        kind: EntryKind::Partial,
        parity: ParityKind::P,
        epoch: 7,
        seq,
        start,
        sectors,
        members: 4,
        written: w,
        payload_crc: 0xdead_beef,
        targets: MemberSet::EMPTY,
    }
}

fn logged(member: u32, payload_sector: u64, entry: Entry) -> LoggedEntry {
    LoggedEntry {
        member,
        payload_sector,
        entry,
    }
}

fn plan(entries: &mut [LoggedEntry]) -> Vec<ReplayPiece> {
    sort_entries(entries);
    let mut out = Vec::new();
    plan_replay(entries, |p| out.push(p));
    out
}

#[test]
fn the_default_area_holds_a_head_and_a_ring() {
    let log = LogArea::new(DEFAULT_LOG_AREA).unwrap();
    assert_eq!(log.offset, 2048);
    assert_eq!(log.ring_sectors, 2040);
    assert_eq!(log.ring_sector(0), 2056);
    assert_eq!(LogArea::entry_sectors(8), 16);
    assert_eq!(
        LogArea::entry_sectors(1),
        16,
        "payloads are whole 4 KiB blocks"
    );
    assert_eq!(LogArea::entry_sectors(0), 8, "a barrier is its header");
    assert_eq!(log.header_offsets().count(), 255);
    let small = Area {
        offset: 2048,
        sectors: 8 + 2 * (8 + MAX_LOGGED_SECTORS) - 8,
    };
    assert!(LogArea::new(small).is_none(), "too small for two entries");
    let unaligned = Area {
        offset: 2044,
        sectors: 2048,
    };
    assert!(LogArea::new(unaligned).is_none());
}

#[test]
fn heads_round_trip_and_refuse_damage() {
    let mut block = [0u8; BLOCK_BYTES];
    encode_head(&UUID, 42, &mut block);
    assert_eq!(decode_head(&UUID, &block), Some(42));
    assert_eq!(decode_head(b"another array...", &block), None);
    block[0x21] ^= 1;
    assert_eq!(decode_head(&UUID, &block), None, "the checksum catches it");
    assert_eq!(decode_head(&UUID, &[0; BLOCK_BYTES]), None, "never written");
}

#[test]
fn entries_round_trip() {
    let mut e = entry(9, 1000, 64, &[(0, 0, 8), (2, 8, 64)]);
    e.parity = ParityKind::Q;
    e.targets = MemberSet::of(1).with(3);
    let mut block = [0u8; BLOCK_BYTES];
    encode_entry(&ID, &e, &mut block);
    assert_eq!(decode_entry(&ID, &block), Ok(e));
    // A barrier covers a full slice: as many rows as the widest stripe buffer holds, far
    // more than a partial entry may.
    for rows in [256, 640, MAX_BARRIER_SECTORS] {
        let mut barrier = entry(10, 0, rows, &[]);
        barrier.kind = EntryKind::Barrier;
        encode_entry(&ID, &barrier, &mut block);
        assert_eq!(decode_entry(&ID, &block), Ok(barrier), "{rows} rows");
        assert_eq!(barrier.payload_sectors(), 0);
    }
}

#[test]
fn an_entry_header_checksums_its_fields_and_reads_the_whole_block_format_too() {
    use graid_engine::crc32c::crc32c;
    let e = entry(9, 1000, 64, &[(0, 0, 8), (2, 8, 64)]);
    let mut block = [0u8; BLOCK_BYTES];
    encode_entry(&ID, &e, &mut block);
    assert_eq!(u32::from_le_bytes(block[8..12].try_into().unwrap()), 2);
    // Version 2: the checksum sits after the fields (the 32 members' written rows end at
    // 0x180) and covers only them; the rest of the block is not looked at.
    let fields = 0x180;
    let crc = u32::from_le_bytes(block[fields..fields + 4].try_into().unwrap());
    assert_eq!(crc, crc32c(&block[..fields]));
    let mut tail = block;
    tail[fields + 4..].fill(0xa5);
    assert_eq!(decode_entry(&ID, &tail), Ok(e));
    for at in [0x28, 0x30, 0x54, 0x80, fields - 1, fields] {
        let mut torn = block;
        torn[at] ^= 1;
        assert_eq!(
            decode_entry(&ID, &torn),
            Err(EntryError::NotEntry),
            "byte {at:#x}"
        );
    }
    // Version 1 (logs of graid before it): the checksum in the last four bytes covers the
    // block.
    let mut v1 = block;
    v1[8..12].copy_from_slice(&1u32.to_le_bytes());
    v1[fields..fields + 4].fill(0);
    let crc = crc32c(&v1[..BLOCK_BYTES - 4]);
    v1[BLOCK_BYTES - 4..].copy_from_slice(&crc.to_le_bytes());
    assert_eq!(decode_entry(&ID, &v1), Ok(e));
    let mut torn = v1;
    torn[0x1000 - 8] ^= 1;
    assert_eq!(decode_entry(&ID, &torn), Err(EntryError::NotEntry));
    // A version this code does not know, with the log's key: ours, refused.
    let mut v3 = block;
    v3[8..12].copy_from_slice(&3u32.to_le_bytes());
    assert_eq!(decode_entry(&ID, &v3), Err(EntryError::Malformed));
}

#[test]
fn every_full_slice_fits_a_barrier() {
    // The longest full slice the stripe engine plans: the wide buffer's rows over the fewest
    // columns an array has (three members).
    const { assert!(WIDE_SLICE_SECTORS / 3 <= MAX_BARRIER_SECTORS) };
    const { assert!(SLICE_SECTORS <= MAX_LOGGED_SECTORS) };
    let mut block = [0u8; BLOCK_BYTES];
    let mut barrier = entry(10, 0, MAX_BARRIER_SECTORS + 1, &[]);
    barrier.kind = EntryKind::Barrier;
    encode_entry(&ID, &barrier, &mut block);
    assert_eq!(decode_entry(&ID, &block), Err(EntryError::Malformed));
}

#[test]
fn entries_refuse_what_was_never_written() {
    let mut block = [0u8; BLOCK_BYTES];
    assert_eq!(decode_entry(&ID, &block), Err(EntryError::NotEntry));
    encode_entry(&ID, &entry(1, 0, 8, &[(1, 0, 8)]), &mut block);
    assert_eq!(
        decode_entry(
            &LogId {
                uuid: *b"another array...",
                ..ID
            },
            &block
        ),
        Err(EntryError::NotEntry)
    );
    let mut torn = block;
    torn[100] ^= 0x40;
    assert_eq!(decode_entry(&ID, &torn), Err(EntryError::NotEntry));
    // Sealed but nonsense: written rows beyond the entry, an empty range, too long, a member
    // past the count.
    for bad in [
        entry(1, 0, 8, &[(1, 0, 9)]),
        entry(1, 0, 8, &[(1, 4, 4)]),
        entry(1, 0, MAX_LOGGED_SECTORS + 1, &[(1, 0, 8)]),
        entry(1, 0, 8, &[(5, 0, 8)]),
        entry(1, 0, 0, &[]),
        Entry {
            targets: MemberSet::of(4),
            ..entry(1, 0, 8, &[(1, 0, 8)])
        },
    ] {
        encode_entry(&ID, &bad, &mut block);
        assert_eq!(
            decode_entry(&ID, &block),
            Err(EntryError::Malformed),
            "{bad:?}"
        );
    }
}

#[test]
fn gf_powers_are_mds() {
    assert_eq!(gf_pow2(0), 1);
    assert_eq!(gf_pow2(1), 2);
    assert_eq!(gf_pow2(7), 0x80);
    assert_eq!(gf_pow2(8), 0x1d, "x^8 = x^4 + x^3 + x^2 + 1");
    assert_eq!(gf_pow2(255), 1, "g generates the 255 non-zero elements");
    let all: std::collections::BTreeSet<u8> = (0..255).map(gf_pow2).collect();
    assert_eq!(all.len(), 255);
}

#[test]
fn a_replay_splits_where_the_written_members_change() {
    // Member 0 wrote rows 0..8, member 2 rows 4..16 of a 16-row entry at 100.
    let mut entries = [logged(3, 5000, entry(1, 100, 16, &[(0, 0, 8), (2, 4, 16)]))];
    let pieces = plan(&mut entries);
    let shape: Vec<_> = pieces
        .iter()
        .map(|p| (p.start, p.sectors, p.modified.bits(), p.pp))
        .collect();
    assert_eq!(
        shape,
        [
            (100, 4, 0b001, Some((3, 5000))),
            (104, 4, 0b101, Some((3, 5004))),
            (108, 8, 0b100, Some((3, 5008))),
        ]
    );
    assert!(pieces.iter().all(|p| p.pq.is_none()));
}

#[test]
fn a_later_entry_voids_the_rows_it_covers() {
    let mut entries = [
        logged(3, 5000, entry(1, 100, 32, &[(0, 0, 32)])),
        logged(3, 6000, entry(2, 108, 8, &[(1, 0, 8)])),
    ];
    let pieces = plan(&mut entries);
    let shape: Vec<_> = pieces
        .iter()
        .map(|p| (p.start, p.sectors, p.modified, p.pp))
        .collect();
    assert_eq!(
        shape,
        [
            (100, 8, MemberSet::of(0), Some((3, 5000))),
            (116, 16, MemberSet::of(0), Some((3, 5016))),
            (108, 8, MemberSet::of(1), Some((3, 6000))),
        ]
    );
    // An earlier entry never voids a later one.
    let mut entries = [
        logged(3, 5000, entry(5, 100, 32, &[(0, 0, 32)])),
        logged(3, 6000, entry(2, 108, 8, &[(1, 0, 8)])),
    ];
    let pieces = plan(&mut entries);
    assert_eq!(pieces.len(), 1);
    assert_eq!((pieces[0].start, pieces[0].sectors), (100, 32));
}

#[test]
fn a_barrier_voids_older_entries_and_replays_nothing() {
    let mut barrier = entry(3, 64, 128, &[]);
    barrier.kind = EntryKind::Barrier;
    let mut entries = [
        logged(3, 5000, entry(1, 100, 16, &[(0, 0, 16)])),
        logged(1, 0, barrier),
        logged(2, 7000, entry(4, 120, 8, &[(0, 0, 8)])),
    ];
    let pieces = plan(&mut entries);
    assert_eq!(pieces.len(), 1, "{pieces:?}");
    assert_eq!((pieces[0].start, pieces[0].pp), (120, Some((2, 7000))));
}

#[test]
fn p_and_q_halves_of_one_write_pair_up() {
    let e = entry(8, 0, 8, &[(1, 0, 8)]);
    let mut q = e;
    q.parity = ParityKind::Q;
    let mut entries = [logged(2, 3000, e), logged(3, 4000, q)];
    let pieces = plan(&mut entries);
    assert_eq!(pieces.len(), 1);
    assert_eq!(pieces[0].pp, Some((2, 3000)));
    assert_eq!(pieces[0].pq, Some((3, 4000)));
    // Only Q's half survived (P's member is gone).
    let mut entries = [logged(3, 4000, q)];
    let pieces = plan(&mut entries);
    assert_eq!((pieces[0].pp, pieces[0].pq), (None, Some((3, 4000))));
}

/// `entries` without those `drop_torn` drops, by (member, seq).
fn whole(entries: &mut [LoggedEntry], logs: MemberSet) -> Vec<(u32, u64)> {
    let kept = drop_torn(entries, logs);
    let mut left: Vec<_> = entries[..kept]
        .iter()
        .map(|l| (l.member, l.entry.seq))
        .collect();
    left.sort_unstable();
    left
}

#[test]
fn a_write_missing_an_entry_in_a_log_read_whole_is_dropped() {
    let pq = MemberSet::of(2).with(3);
    let half = |member, seq, parity| {
        let mut e = entry(seq, 0, 8, &[(1, 0, 8)]);
        e.parity = parity;
        e.targets = pq;
        logged(member, 1000 * seq, e)
    };
    // Write 8 logged both halves; write 9 only P's (the cut came between them).
    let mut entries = [
        half(3, 9, ParityKind::P),
        half(2, 8, ParityKind::P),
        half(3, 8, ParityKind::Q),
    ];
    entries[0].member = 2;
    assert_eq!(
        whole(&mut entries, MemberSet::first(4)),
        [(2, 8), (3, 8)],
        "write 9 sent nothing: its entry must not void write 8's"
    );
    // Without Q's member (gone, or its log unreadable) nothing shows write 9 was cut short.
    let mut entries = [half(2, 9, ParityKind::P), half(2, 8, ParityKind::P)];
    assert_eq!(
        whole(&mut entries, MemberSet::first(4).minus(MemberSet::of(3))),
        [(2, 8), (2, 9)]
    );
    // A barrier with one of its three members' headers missing, and an entry from before
    // graid recorded targets.
    let mut barrier = entry(10, 0, 64, &[]);
    barrier.kind = EntryKind::Barrier;
    barrier.targets = MemberSet::of(0).with(1).with(2);
    let old = entry(4, 0, 8, &[(1, 0, 8)]);
    let mut entries = [
        logged(0, 100, barrier),
        logged(2, 200, barrier),
        logged(2, 300, old),
    ];
    assert_eq!(whole(&mut entries, MemberSet::first(4)), [(2, 4)]);
}

proptest! {
    /// One row of a RAID 6 stripe: the write changes some data columns, the partial P and Q
    /// of the unchanged ones are logged, then any subset of the data and parity writes reaches
    /// the members. Rewriting P and Q from the log and the changed columns as they are leaves
    /// every unchanged column recoverable from P (and Q) alone.
    #[test]
    fn the_partial_parity_makes_a_torn_row_whole(
        old in prop::collection::vec(any::<u8>(), 6),
        new in prop::collection::vec(any::<u8>(), 6),
        changed in 1u32..63,
        landed in any::<u8>(),
    ) {
        let q_of = |d: &[u8]| d.iter().enumerate().fold(0, |q, (i, &x)| q ^ gf_mul(gf_pow2(i as u32), x));
        let p_of = |d: &[u8]| d.iter().fold(0, |p, &x| p ^ x);
        let is_changed = |i: usize| changed & (1 << i) != 0;
        let unchanged: Vec<u8> = (0..6).map(|i| if is_changed(i) { 0 } else { old[i] }).collect();
        let (pp, pq) = (p_of(&unchanged), q_of(&unchanged));
        // What the write path computes: the new P, Q minus the changed columns' new data.
        let after: Vec<u8> = (0..6).map(|i| if is_changed(i) { new[i] } else { old[i] }).collect();
        let (p_new, q_new) = (p_of(&after), q_of(&after));
        let minus_p = (0..6).filter(|&i| is_changed(i)).fold(p_new, |p, i| p ^ after[i]);
        let minus_q = (0..6).filter(|&i| is_changed(i)).fold(q_new, |q, i| q ^ gf_mul(gf_pow2(i as u32), after[i]));
        prop_assert_eq!((minus_p, minus_q), (pp, pq));
        // The torn stripe: each changed column old or new.
        let disk: Vec<u8> = (0..6).map(|i| if is_changed(i) && landed & (1 << i) != 0 { new[i] } else { old[i] }).collect();
        let changed_p = (0..6).filter(|&i| is_changed(i)).fold(0, |p, i| p ^ disk[i]);
        let changed_q = (0..6).filter(|&i| is_changed(i)).fold(0, |q, i| q ^ gf_mul(gf_pow2(i as u32), disk[i]));
        let (p, q) = (pp ^ changed_p, pq ^ changed_q);
        prop_assert_eq!((p, q), (p_of(&disk), q_of(&disk)));
    }
}

/// A log in memory for `scan_log`: blocks by (member, sector), payload CRCs by (member, sector).
#[derive(Default)]
struct FakeLogs {
    blocks: std::collections::HashMap<(u32, u64), [u8; BLOCK_BYTES]>,
    crcs: std::collections::HashMap<(u32, u64), u32>,
}

impl LogReader for FakeLogs {
    fn read(&mut self, member: u32, sector: u64, block: &mut [u8; BLOCK_BYTES]) -> bool {
        *block = self
            .blocks
            .get(&(member, sector))
            .copied()
            .unwrap_or([0; BLOCK_BYTES]);
        member != 3
    }

    fn payload_crc(&mut self, member: u32, sector: u64, _sectors: u64) -> Option<u32> {
        self.crcs.get(&(member, sector)).copied()
    }
}

/// Member 0's log: its head at epoch 5 and one entry of that epoch (seq 1, `rows` rows from
/// row 0, member 0 written) at ring offset 0, its payload intact from offset 8 on.
fn log_with_one_entry(area: &LogArea, rows: u64) -> FakeLogs {
    let mut logs = FakeLogs::default();
    let mut block = [0u8; BLOCK_BYTES];
    encode_head(&UUID, 5, &mut block);
    logs.blocks.insert((0, area.offset), block);
    let mut e = entry(1, 0, rows, &[(0, 0, rows as u32)]);
    e.epoch = 5;
    encode_entry(&ID, &e, &mut block);
    logs.blocks.insert((0, area.ring_sector(0)), block);
    logs.crcs
        .insert((0, area.ring_sector(0) + 8), e.payload_crc);
    logs
}

#[test]
fn a_scan_takes_the_heads_epoch_and_the_next_with_intact_payloads() {
    let area = LogArea::new(DEFAULT_LOG_AREA).unwrap();
    let mut logs = FakeLogs::default();
    let mut head = [0u8; BLOCK_BYTES];
    // Member 0's head is one epoch behind member 1's (a head write it missed).
    encode_head(&UUID, 4, &mut head);
    logs.blocks.insert((0, area.offset), head);
    encode_head(&UUID, 5, &mut head);
    logs.blocks.insert((1, area.offset), head);
    let mut put = |member: u32, at: u64, epoch: u64, seq: u64, crc: u32, stored: u32| {
        let mut e = entry(seq, 64 * seq, 8, &[(0, 0, 8)]);
        e.epoch = epoch;
        e.payload_crc = crc;
        // Sent to this member's log, and another's (seq 7: only another's).
        e.targets = MemberSet::of(if seq == 7 { 2 } else { member }).with(3);
        let mut block = [0u8; BLOCK_BYTES];
        encode_entry(&ID, &e, &mut block);
        logs.blocks.insert((member, area.ring_sector(at)), block);
        logs.crcs.insert((member, area.ring_sector(at) + 8), stored);
    };
    put(0, 0, 4, 1, 7, 7); // older than the newest head: void
    put(0, 16, 5, 2, 7, 7); // the heads' epoch
    put(1, 0, 6, 3, 7, 7); // the next one, written before the heads moved on
    put(1, 16, 7, 4, 7, 7); // two ahead: cannot be this log's
    put(1, 32, 5, 5, 7, 8); // torn payload
    put(1, 2032, 5, 6, 7, 7); // runs past the ring's end
    put(0, 48, 5, 7, 7, 7); // sent to other members: not this log's
    let mut found = Vec::new();
    let mut block = [0u8; BLOCK_BYTES];
    let stats = scan_log(
        &ID,
        &area,
        MemberSet::first(4),
        &mut logs,
        &mut block,
        Some(&mut |e| found.push(e.entry.seq)),
    );
    found.sort_unstable();
    assert_eq!(found, [2, 3]);
    assert_eq!(stats.epoch, 5);
    assert_eq!((stats.entries, stats.refused), (2, 3));
    assert_eq!(stats.unreadable, MemberSet::of(3));
}

#[test]
fn a_scan_without_a_replay_reads_the_heads_only() {
    let area = LogArea::new(DEFAULT_LOG_AREA).unwrap();
    let mut logs = log_with_one_entry(&area, 8);
    let mut block = [0u8; BLOCK_BYTES];
    let mut found = 0;
    let stats = scan_log(
        &ID,
        &area,
        MemberSet::of(0),
        &mut logs,
        &mut block,
        Some(&mut |_| found += 1),
    );
    assert_eq!((stats.epoch, stats.entries, found), (5, 1, 1));
    let stats = scan_log(&ID, &area, MemberSet::of(0), &mut logs, &mut block, None);
    assert_eq!((stats.epoch, stats.entries), (5, 0), "the ring was read");
}

#[test]
fn new_arrays_get_a_thousandth_of_a_member_for_the_log() {
    const MIB: u64 = 2048;
    for (member, log) in [
        (64 * MIB, MIB),
        (1024 * MIB, MIB),
        (4096 * MIB, 4 * MIB),
        (20 * 1024 * MIB, 16 * MIB),
        (64 * 1024 * MIB, 64 * MIB),
        (4 << 40 >> 9, 64 * MIB),
    ] {
        let area = log_area_for(member);
        assert_eq!(area.offset, DEFAULT_LOG_AREA.offset);
        assert_eq!(area.sectors, log, "member of {member} sectors");
        assert!(LogArea::new(area).is_some());
    }
}

/// A block the log did not write as a header (a payload, whose bytes the data chunks a write
/// left alone decide: user data) is never taken for an entry, however well formed: right
/// magic, UUID, epoch and checksums, but not the log's key, which only the superblocks hold.
#[test]
fn a_header_planted_in_a_payload_is_no_entry() {
    let area = LogArea::new(DEFAULT_LOG_AREA).unwrap();
    // A real entry at ring offset 0, its payload from offset 8 on.
    let mut logs = log_with_one_entry(&area, 16);
    let mut block = [0u8; BLOCK_BYTES];
    // The payload's first block reads as an entry of the heads' epoch over other rows, with
    // the latest sequence number, whose own "payload" checks out too.
    for guess in [[0u8; 16], *b"the log's secreT"] {
        let mut forged = entry(u64::MAX, 4096, 8, &[(1, 0, 8)]);
        forged.epoch = 5;
        encode_entry(
            &LogId {
                uuid: UUID,
                key: guess,
            },
            &forged,
            &mut block,
        );
        logs.blocks.insert((0, area.ring_sector(8)), block);
        logs.crcs
            .insert((0, area.ring_sector(8) + 8), forged.payload_crc);
        let mut found = Vec::new();
        let mut scratch = [0u8; BLOCK_BYTES];
        let stats = scan_log(
            &ID,
            &area,
            MemberSet::of(0),
            &mut logs,
            &mut scratch,
            Some(&mut |e| found.push(e.entry.seq)),
        );
        assert_eq!(found, [1], "a planted header was taken for an entry");
        assert_eq!(stats.entries, 1);
    }
}

/// A header block for `e`.
fn header(e: &Entry) -> [u8; BLOCK_BYTES] {
    let mut block = [0u8; BLOCK_BYTES];
    encode_entry(&ID, e, &mut block);
    block
}

/// A group block of `entries`, as the batcher makes it from their headers.
fn group_of(entries: &[Entry]) -> [u8; BLOCK_BYTES] {
    let mut block = header(&entries[0]);
    start_group(&ID, &mut block);
    for e in &entries[1..] {
        assert!(add_to_group(&mut block, &header(e)));
    }
    block
}

#[test]
fn a_group_block_holds_its_entries_and_refuses_damage() {
    assert_eq!(MAX_GROUP_ENTRIES, 10);
    let entries: Vec<Entry> = (0..MAX_GROUP_ENTRIES as u64)
        .map(|i| {
            let mut e = entry(i + 1, 64 * i, 8 + i, &[(i as u32 % 4, 0, 8)]);
            e.payload_crc = i as u32;
            e
        })
        .collect();
    let mut block = group_of(&entries);
    {
        let group = decode_group(&ID, &block).expect("a whole group");
        assert_eq!(group.len(), entries.len());
        for (i, e) in entries.iter().enumerate() {
            assert_eq!(group.entry(&ID, i), Ok(*e), "record {i}");
        }
        assert_eq!(group.entry(&ID, entries.len()), Err(EntryError::Malformed));
    }
    // Full: one more does not fit, and the group stays as it was.
    let before = block;
    assert!(!add_to_group(&mut block, &header(&entries[0])));
    assert_eq!(block, before);
    // A group is no entry header, nor an entry header a group.
    assert_eq!(decode_entry(&ID, &block), Err(EntryError::NotEntry));
    assert!(matches!(
        decode_group(&ID, &header(&entries[0])),
        Err(EntryError::NotEntry)
    ));
    // Another log's (or a forged one without the key), or torn anywhere up to its checksum:
    // no group.
    let other = LogId {
        uuid: UUID,
        key: *b"another log key!",
    };
    assert!(matches!(
        decode_group(&other, &block),
        Err(EntryError::NotEntry)
    ));
    let used = 0x40 + entries.len() * 388 + 4;
    for at in (0..used).step_by(7) {
        let mut torn = block;
        torn[at] ^= 0x10;
        assert!(decode_group(&ID, &torn).is_err(), "byte {at} flipped");
    }
    // Past the checksum the block is not read.
    let mut tail = block;
    tail[used..].fill(0xa5);
    assert!(decode_group(&ID, &tail).is_ok());
    // A barrier is never in a group; sealed all the same: malformed, not skipped.
    let mut barrier = entries[0];
    barrier.kind = EntryKind::Barrier;
    let mut with_barrier = group_of(&entries[..1]);
    assert!(add_to_group(&mut with_barrier, &header(&barrier)));
    let group = decode_group(&ID, &with_barrier).expect("sealed");
    assert_eq!(group.entry(&ID, 0), Ok(entries[0]));
    assert_eq!(group.entry(&ID, 1), Err(EntryError::Malformed));
}

/// Member 0's log at epoch 5 with a group of `rows` entries (each `rows[i]` rows, seq i + 1)
/// at ring offset `at`, the payloads back to back after it, each rounded up to a block, and
/// intact unless `torn` names one.
fn log_with_a_group(area: &LogArea, at: u64, rows: &[u64], torn: Option<usize>) -> FakeLogs {
    let mut logs = FakeLogs::default();
    let mut block = [0u8; BLOCK_BYTES];
    encode_head(&UUID, 5, &mut block);
    logs.blocks.insert((0, area.offset), block);
    let entries: Vec<Entry> = rows
        .iter()
        .enumerate()
        .map(|(i, &r)| {
            let mut e = entry(i as u64 + 1, 256 * i as u64, r, &[(1, 0, r as u32)]);
            e.epoch = 5;
            e.payload_crc = 100 + i as u32;
            e
        })
        .collect();
    logs.blocks
        .insert((0, area.ring_sector(at)), group_of(&entries));
    let mut payload = area.ring_sector(at) + 8;
    for (i, e) in entries.iter().enumerate() {
        let stored = if torn == Some(i) { 0 } else { e.payload_crc };
        logs.crcs.insert((0, payload), stored);
        payload += e.sectors.div_ceil(8) * 8;
    }
    logs
}

#[test]
fn a_scan_takes_a_groups_entries_with_their_payloads_back_to_back() {
    let area = LogArea::new(DEFAULT_LOG_AREA).unwrap();
    let rows = [8, 3, 16, 8];
    let scan = |logs: &mut FakeLogs| {
        let mut found = Vec::new();
        let mut block = [0u8; BLOCK_BYTES];
        let stats = scan_log(
            &ID,
            &area,
            MemberSet::of(0),
            logs,
            &mut block,
            Some(&mut |e| found.push((e.entry.seq, e.payload_sector))),
        );
        found.sort_unstable();
        (stats, found)
    };
    let base = area.ring_sector(16) + 8;
    let (stats, found) = scan(&mut log_with_a_group(&area, 16, &rows, None));
    assert_eq!(
        found,
        [(1, base), (2, base + 8), (3, base + 16), (4, base + 32)],
        "each payload after the ones before it, rounded up to a block"
    );
    assert_eq!((stats.entries, stats.grouped, stats.refused), (4, 4, 0));
    // A torn payload loses its entry only.
    let (stats, found) = scan(&mut log_with_a_group(&area, 16, &rows, Some(2)));
    assert_eq!(found.iter().map(|f| f.0).collect::<Vec<_>>(), [1, 2, 4]);
    assert_eq!((stats.entries, stats.grouped, stats.refused), (3, 3, 1));
    // A stale header of an older epoch in the blocks the group left unwritten is void.
    let mut logs = log_with_a_group(&area, 16, &rows, None);
    let mut old = entry(9, 0, 8, &[(1, 0, 8)]);
    old.epoch = 3;
    logs.blocks
        .insert((0, area.ring_sector(16 + 8 + 48)), header(&old));
    assert_eq!(scan(&mut logs).0.entries, 4);
    // A group whose payloads would run past the ring's end: those entries are refused.
    let last = area.ring_sectors - 8 - 24;
    let (stats, found) = scan(&mut log_with_a_group(&area, last, &rows, None));
    assert_eq!(found.iter().map(|f| f.0).collect::<Vec<_>>(), [1, 2]);
    assert_eq!(stats.refused, 2);
}

/// A run of a member's log entries (one write, one group block at its first entry's place)
/// takes entries that lie back to back, at most a group's worth, and never crosses the middle
/// of the ring: the later half belongs to the next epoch, and a record of it in the earlier
/// half would be overwritten by the epoch after while still live (review 3's F1).
#[test]
fn a_log_run_stays_in_its_half_of_the_ring() {
    let area = LogArea::new(DEFAULT_LOG_AREA).expect("the default area");
    let half = area.half_sectors();
    let entry = LogArea::entry_sectors(8);
    // An entry that ends exactly at the middle, then one at the start of the later half.
    let last = area.ring_sector(half - entry);
    let mut run = LogRun::start(&area, last - entry, 8);
    assert!(run.join(last, 8), "adjacent entries in one half form a run");
    assert!(
        !run.join(area.ring_sector(half), 8),
        "a run crossed the middle"
    );
    assert_eq!(run.len(), 2);
    // Not adjacent: a gap, or an entry before the run's end.
    let mut run = LogRun::start(&area, area.ring_sector(0), 8);
    assert!(!run.join(area.ring_sector(entry + 8), 8));
    assert!(!run.join(area.ring_sector(0), 8));
    // Runs in the later half end at the end of the ring's halves.
    let mut run = LogRun::start(&area, area.ring_sector(2 * half - 2 * entry), 8);
    assert!(run.join(area.ring_sector(2 * half - entry), 8));
    assert!(!run.join(area.ring_sector(2 * half), 8));
    // At most a group's worth.
    let mut run = LogRun::start(&area, area.ring_sector(0), 8);
    let mut at = entry;
    while run.join(area.ring_sector(at), 8) {
        at += entry;
    }
    assert_eq!(run.len(), MAX_GROUP_ENTRIES.min((half / entry) as usize));
}

proptest! {
    /// Whatever the entries' sizes, a run never covers sectors of both halves.
    #[test]
    fn no_log_run_crosses_the_middle(sizes in proptest::collection::vec(1u64..=64, 1..200)) {
        let area = LogArea::new(DEFAULT_LOG_AREA).expect("the default area");
        let middle = area.ring_sector(area.half_sectors());
        let mut at = area.ring_sector(0);
        let mut run: Option<(LogRun, u64)> = None;
        for payload in sizes {
            let end = at + LogArea::entry_sectors(payload);
            if end > area.ring_sector(2 * area.half_sectors()) {
                break;
            }
            let joined = run
                .as_mut()
                .and_then(|(r, first)| r.join(at, payload).then_some(*first));
            match joined {
                Some(first) => {
                    prop_assert!(first >= middle || end <= middle, "run from {first} to {end}");
                }
                None => run = Some((LogRun::start(&area, at, payload), at)),
            }
            at = end;
        }
    }
}
