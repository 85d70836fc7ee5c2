//! The on-disk superblock: golden encoding, round trips, every rejection, and hostile input.

use graid_engine::bitmap::Regions;
use graid_engine::geometry::{GeometryError, Level, ParityLayout, MAX_SECTORS};
use graid_engine::superblock::{
    decode, encode, offset, Area, AreaKind, ArrayName, HomeHost, NameError, Reshape, Slot,
    Superblock, SuperblockError, DEFAULT_BITMAP_AREA, DEFAULT_DATA_OFFSET_SECTORS,
    FEATURES_COMPAT_KNOWN, FEATURE_BITMAP, FEATURE_RESHAPE, MAX_SLOTS, METADATA_END_SECTOR,
    RECOVERY_COMPLETE, SUPERBLOCK_SIZE,
};
use proptest::prelude::*;

type Block = [u8; SUPERBLOCK_SIZE];

const ARRAY_UUID: [u8; 16] = [
    0x10, 0x21, 0x32, 0x43, 0x54, 0x65, 0x46, 0x87, 0x98, 0xa9, 0xba, 0xcb, 0xdc, 0xed, 0xfe, 0x0f,
];
const MEMBER_UUID: [u8; 16] = [
    0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0x46, 0xa7, 0x88, 0xa9, 0xaa, 0xab, 0xac, 0xad, 0xae, 0xaf,
];

/// A degraded-then-repaired RAID 10 of three, seen from the device in slot 3, which is being
/// rebuilt into role 2; slot 2 held the failed device, slot 4 is a spare.
fn sample() -> Superblock {
    let mut slots = [Slot::Empty; MAX_SLOTS];
    slots[0] = Slot::Active { role: 0 };
    slots[1] = Slot::Active { role: 1 };
    slots[2] = Slot::Faulty;
    slots[3] = Slot::Active { role: 2 };
    slots[4] = Slot::Spare;
    Superblock {
        features_compat: 0,
        features_incompat: 0,
        array_uuid: ARRAY_UUID,
        array_name: ArrayName::new("golden").unwrap(),
        homehost: HomeHost::EMPTY,
        created: 1_767_225_600, // 2026-01-01T00:00:00Z
        events: 42,
        clean: true,
        resync_offset: RECOVERY_COMPLETE,
        level: Level::Raid10,
        chunk_sectors: 128,
        members: 3,
        member_uuid: MEMBER_UUID,
        this_slot: 3,
        data_offset: DEFAULT_DATA_OFFSET_SECTORS,
        data_size: 1 << 21,
        recovery_offset: 0x1234,
        bitmap: Area {
            offset: 16,
            sectors: 2032,
        },
        bitmap_region: 0,
        bitmap_events: 0,
        journal: Area {
            offset: 2048,
            sectors: 2048,
        },
        ppl: false,
        log_key: [0; 16],
        slots,
        reshape: None,
    }
}

fn encoded(sb: &Superblock) -> Block {
    let mut block = [0xEE; SUPERBLOCK_SIZE];
    encode(sb, &mut block).expect("encodable");
    block
}

/// Overwrites bytes at `at` and fixes the checksum (computed by the `crc32c` crate).
fn patch(block: &mut Block, at: usize, bytes: &[u8]) {
    block[at..at + bytes.len()].copy_from_slice(bytes);
    reseal(block);
}

fn reseal(block: &mut Block) {
    let crc = crc32c::crc32c(&block[..offset::CHECKSUM]);
    block[offset::CHECKSUM..].copy_from_slice(&crc.to_le_bytes());
}

fn decode_patched(at: usize, bytes: &[u8]) -> Result<Superblock, SuperblockError> {
    let mut block = encoded(&sample());
    patch(&mut block, at, bytes);
    decode(&block)
}

/// Decoding a patched block and encoding the patched superblock must fail the same way.
fn rejected(change: impl Fn(&mut Superblock)) -> SuperblockError {
    let mut sb = sample();
    change(&mut sb);
    let mut block = [0; SUPERBLOCK_SIZE];
    let err = encode(&sb, &mut block).unwrap_err();
    assert_eq!(sb.validate().unwrap_err(), err);
    err
}

// ---- golden encoding ----

/// `sample()` as written by format version 1: every non-zero 16-byte row. Any change here is an
/// on-disk format change and needs a new version or a feature bit.
const GOLDEN_ROWS: &[(usize, &str)] = &[
    (0x000, "47 52 41 49 44 2d 53 42 01 00 00 00 01 00 00 00"),
    (0x020, "10 21 32 43 54 65 46 87 98 a9 ba cb dc ed fe 0f"),
    (0x030, "67 6f 6c 64 65 6e 00 00 00 00 00 00 00 00 00 00"),
    (0x050, "00 b9 55 69 00 00 00 00 2a 00 00 00 00 00 00 00"),
    (0x060, "0a 00 00 00 02 01 00 00 80 00 00 00 03 00 00 00"),
    (0x070, "a0 a1 a2 a3 a4 a5 46 a7 88 a9 aa ab ac ad ae af"),
    (0x080, "03 00 00 00 00 00 00 00 00 10 00 00 00 00 00 00"),
    (0x090, "00 00 20 00 00 00 00 00 34 12 00 00 00 00 00 00"),
    (0x0a0, "10 00 00 00 00 00 00 00 f0 07 00 00 00 00 00 00"),
    (0x0b0, "00 08 00 00 00 00 00 00 00 08 00 00 00 00 00 00"),
    (0x100, "00 01 01 01 00 03 02 01 00 02 00 00 00 00 00 00"),
    (0xff0, "00 00 00 00 00 00 00 00 00 00 00 00 74 55 5f 37"),
];

fn golden() -> Block {
    let mut block = [0; SUPERBLOCK_SIZE];
    for &(at, hex) in GOLDEN_ROWS {
        for (i, byte) in hex.split(' ').enumerate() {
            block[at + i] = u8::from_str_radix(byte, 16).unwrap();
        }
    }
    block
}

#[test]
fn encoding_matches_the_golden_block() {
    let block = encoded(&sample());
    let golden = golden();
    for (row, (got, want)) in block.chunks(16).zip(golden.chunks(16)).enumerate() {
        assert_eq!(got, want, "row {:#05x}", row * 16);
    }
    assert_eq!(
        u32::from_le_bytes(golden[offset::CHECKSUM..].try_into().unwrap()),
        crc32c::crc32c(&golden[..offset::CHECKSUM])
    );
}

/// The same superblock as a RAID 5, left-symmetric: only the level/layout row and the checksum
/// change.
#[test]
fn raid5_golden_block() {
    let mut sb = sample();
    sb.level = Level::Raid5(ParityLayout::LeftSymmetric);
    let block = encoded(&sb);
    let mut golden = golden();
    let row = "05 00 00 00 02 00 00 00 80 00 00 00 03 00 00 00";
    for (i, byte) in row.split(' ').enumerate() {
        golden[0x060 + i] = u8::from_str_radix(byte, 16).unwrap();
    }
    golden[offset::CHECKSUM..].copy_from_slice(&RAID5_GOLDEN_CHECKSUM.to_le_bytes());
    for (row, (got, want)) in block.chunks(16).zip(golden.chunks(16)).enumerate() {
        assert_eq!(got, want, "row {:#05x}", row * 16);
    }
    assert_eq!(decode(&golden), Ok(sb));
}

const RAID5_GOLDEN_CHECKSUM: u32 = 0x2dbd_6a2b;

/// A pending resync: state bit 1 and the position at 0x0C0; none: bit clear and zeroes there
/// (so format-1 superblocks from before the field read as "no resync pending").
#[test]
fn a_pending_resync_is_state_bit_1_and_its_position() {
    let mut sb = sample();
    sb.clean = false;
    sb.resync_offset = 0x1_0000;
    let block = encoded(&sb);
    assert_eq!(block[offset::STATE], 0b10, "not clean, resync pending");
    assert_eq!(
        block[offset::RESYNC_OFFSET..][..8],
        0x1_0000u64.to_le_bytes()
    );
    assert_eq!(decode(&block), Ok(sb));
    sb.resync_offset = RECOVERY_COMPLETE;
    let block = encoded(&sb);
    assert_eq!(block[offset::STATE], 0);
    assert_eq!(block[offset::RESYNC_OFFSET..][..8], [0; 8]);
    assert_eq!(decode(&block), Ok(sb));
    // The bit with a zero position: from the start.
    let mut block = encoded(&sample());
    patch(&mut block, offset::STATE, &[0b11]);
    assert_eq!(decode(&block).unwrap().resync_offset, 0);
    // RAID 10 of 3 with 1 GiB members walks 1.5 GiB of array sectors.
    let walk = 3 * (1u64 << 21) / 2;
    assert_eq!(
        rejected(|sb| sb.resync_offset = walk + 1),
        SuperblockError::BadResyncOffset {
            resync_offset: walk + 1,
            sectors: walk
        }
    );
    let mut at_end = sample();
    at_end.resync_offset = walk;
    assert_eq!(decode(&encoded(&at_end)), Ok(at_end));
}

/// A bitmap: compatible feature bit 0 and the region size at 0x0C8; without the bit (an older
/// writer dropped it) the array has none.
#[test]
fn a_bitmap_is_compat_bit_0_and_its_region_size() {
    let mut sb = sample();
    sb.bitmap_region = 1 << 17;
    sb.bitmap_events = 40;
    let block = encoded(&sb);
    assert_eq!(block[offset::BITMAP_EVENTS..][..8], 40u64.to_le_bytes());
    assert_eq!(
        block[offset::FEATURES_COMPAT..][..8],
        FEATURE_BITMAP.to_le_bytes()
    );
    assert_eq!(
        block[offset::BITMAP_REGION_SECTORS..][..8],
        (1u64 << 17).to_le_bytes()
    );
    let decoded = decode(&block).unwrap();
    assert_eq!(decoded, sb);
    assert_eq!(decoded.features_compat, 0, "the bit is the field's");
    let regions = decoded.bitmap_regions().unwrap();
    // RAID 10 of 3 with 1 GiB members walks 1.5 GiB: 24 regions of 64 MiB.
    assert_eq!(regions.count(), 24);
    let mut dropped = block;
    patch(&mut dropped, offset::FEATURES_COMPAT, &[0; 8]);
    reseal(&mut dropped);
    let old = decode(&dropped).unwrap();
    assert_eq!((old.bitmap_region, old.bitmap_events), (0, 0));
    assert_eq!(old.bitmap_regions(), None);
    assert_eq!(sample().bitmap_regions(), None);
    // The default area holds the bits of a 32 TiB walk at 64 MiB regions.
    assert_eq!(DEFAULT_BITMAP_AREA.offset, METADATA_END_SECTOR);
    assert_eq!(
        DEFAULT_BITMAP_AREA.offset + DEFAULT_BITMAP_AREA.sectors,
        2048
    );
}

#[test]
fn rejects_bad_bitmaps() {
    let bad = |region: u64, area: Area| SuperblockError::BadBitmap {
        region_sectors: region,
        area_sectors: area.sectors,
    };
    let area = sample().bitmap;
    assert_eq!(
        rejected(|sb| sb.bitmap_region = 3 << 10),
        bad(3 << 10, area)
    );
    assert_eq!(rejected(|sb| sb.bitmap_region = 4), bad(4, area));
    let none = Area::NONE;
    assert_eq!(
        rejected(|sb| {
            sb.bitmap_region = 1 << 17;
            sb.bitmap = none;
        }),
        bad(1 << 17, none)
    );
    let unaligned = Area {
        offset: 20,
        sectors: 2000,
    };
    assert_eq!(
        rejected(|sb| {
            sb.bitmap_region = 1 << 17;
            sb.bitmap = unaligned;
        }),
        bad(1 << 17, unaligned)
    );
    // 8 sectors hold 32,736 bits: 1.5 GiB of 8-sector regions needs 97 blocks.
    let one_block = Area {
        offset: 16,
        sectors: 8,
    };
    assert_eq!(
        rejected(|sb| {
            sb.bitmap_region = 8;
            sb.bitmap = one_block;
        }),
        bad(8, one_block)
    );
    assert_eq!(
        rejected(|sb| {
            sb.level = Level::Raid0;
            sb.slots[2] = Slot::Empty;
            sb.slots[3] = Slot::Active { role: 2 };
            sb.bitmap_region = 1 << 17;
        }),
        bad(1 << 17, area),
        "RAID 0 has nothing to resync"
    );
    assert_eq!(
        rejected(|sb| {
            sb.bitmap_region = 1 << 17;
            sb.bitmap_events = sb.events + 1;
        }),
        bad(1 << 17, area),
        "events from the future"
    );
    assert_eq!(
        rejected(|sb| sb.bitmap_events = 1),
        bad(0, area),
        "no bitmap"
    );
}

#[test]
fn golden_block_decodes() {
    assert_eq!(decode(&golden()), Ok(sample()));
}

#[test]
fn documented_offsets() {
    // Documentation/on-disk-format.rst, field table.
    let fields = [
        (offset::MAGIC, 8),
        (offset::VERSION, 4),
        (offset::STATE, 4),
        (offset::FEATURES_COMPAT, 8),
        (offset::FEATURES_INCOMPAT, 8),
        (offset::ARRAY_UUID, 16),
        (offset::ARRAY_NAME, 32),
        (offset::CREATED, 8),
        (offset::EVENTS, 8),
        (offset::LEVEL, 4),
        (offset::LAYOUT, 4),
        (offset::CHUNK_SECTORS, 4),
        (offset::MEMBERS, 4),
        (offset::MEMBER_UUID, 16),
        (offset::THIS_SLOT, 4),
        (offset::DATA_OFFSET, 8),
        (offset::DATA_SIZE, 8),
        (offset::RECOVERY_OFFSET, 8),
        (offset::BITMAP_OFFSET, 8),
        (offset::BITMAP_SECTORS, 8),
        (offset::JOURNAL_OFFSET, 8),
        (offset::JOURNAL_SECTORS, 8),
        (offset::RESYNC_OFFSET, 8),
        (offset::BITMAP_REGION_SECTORS, 8),
        (offset::BITMAP_EVENTS, 8),
        (offset::SLOTS, 2 * MAX_SLOTS),
        (offset::HOMEHOST, 64),
        (offset::RESHAPE_POSITION, 8),
        (offset::NEW_LEVEL, 4),
        (offset::NEW_LAYOUT, 4),
        (offset::NEW_CHUNK_SECTORS, 4),
        (offset::NEW_MEMBERS, 4),
        (offset::NEW_DATA_OFFSET, 8),
        (offset::RESHAPE_FLAGS, 4),
        (offset::CHECKSUM, 4),
    ];
    let mut end = 0;
    for (at, len) in fields {
        assert!(at >= end, "field at {at:#x} overlaps the previous one");
        assert_eq!(at % len.min(8), 0, "field at {at:#x} is misaligned");
        end = at + len;
    }
    assert_eq!(end, SUPERBLOCK_SIZE);
    assert_eq!(offset::EVENTS, 0x58);
    assert_eq!(offset::RESYNC_OFFSET, 0xc0);
    assert_eq!(offset::SLOTS, 0x100);
    assert_eq!(offset::CHECKSUM, 0xffc);
}

/// The home host: 64 NUL-padded bytes at 0x180, right after the slot table. All zero (what every
/// superblock written before the field holds) reads as "no host", so the golden block above is
/// unchanged.
#[test]
fn the_home_host_is_64_bytes_at_0x180() {
    let mut sb = sample();
    sb.homehost = HomeHost::new("node-17.example.org").unwrap();
    let block = encoded(&sb);
    assert_eq!(&block[0x180..0x193], b"node-17.example.org");
    assert!(block[0x193..0x1c0].iter().all(|&b| b == 0));
    let mut golden = golden();
    patch(&mut golden, 0x180, b"node-17.example.org");
    assert_eq!(block, golden);
    assert_eq!(decode(&block), Ok(sb));
    assert!(sample().homehost.is_empty() && !sb.homehost.is_empty());
    // The longest host fits without a NUL, as an array name does.
    let longest = "h".repeat(64);
    sb.homehost = HomeHost::new(&longest).unwrap();
    assert_eq!(decode(&encoded(&sb)).unwrap().homehost.as_str(), longest);
    assert_eq!(
        HomeHost::new(&"h".repeat(65)),
        Err(NameError::TooLong { len: 65, max: 64 })
    );
}

#[test]
fn rejects_bad_home_hosts() {
    for (bytes, why) in [
        (&b"a\0b"[..], NameError::NotNulPadded),
        (&b"\xff\xfe"[..], NameError::NotUtf8),
        (&b"a/b"[..], NameError::ForbiddenChar),
        (&b"tab\there"[..], NameError::ForbiddenChar),
    ] {
        assert_eq!(
            decode_patched(offset::HOMEHOST, bytes),
            Err(SuperblockError::BadHomeHost(why)),
            "{bytes:?}"
        );
    }
}

// ---- accepted variations ----

#[test]
fn longer_input_is_read_from_its_start() {
    let mut bytes = encoded(&sample()).to_vec();
    bytes.extend_from_slice(&[0xAB; 512]);
    assert_eq!(decode(&bytes), Ok(sample()));
}

#[test]
fn reserved_bytes_are_ignored_and_rewritten_as_zero() {
    let mut block = encoded(&sample());
    patch(&mut block, 0x0c4, &[0x55; 8]);
    patch(&mut block, 0x800, &[0x66; 16]);
    let sb = decode(&block).unwrap();
    assert_eq!(encoded(&sb), encoded(&sample()));
}

#[test]
fn unknown_compatible_features_are_accepted_and_dropped() {
    let sb = decode_patched(offset::FEATURES_COMPAT, &(1u64 << 63).to_le_bytes()).unwrap();
    assert_eq!(sb.features_compat, 1 << 63);
    assert_eq!(encoded(&sb), encoded(&sample()));
}

#[test]
fn raid1_and_raid0_round_trip() {
    for (level, chunk) in [(Level::Raid1, 0), (Level::Raid0, 2048)] {
        let sb = Superblock {
            level,
            chunk_sectors: chunk,
            clean: false,
            resync_offset: RECOVERY_COMPLETE,
            recovery_offset: RECOVERY_COMPLETE,
            bitmap: Area::NONE,
            bitmap_region: 0,
            bitmap_events: 0,
            journal: Area::NONE,
            ppl: false,
            log_key: [0; 16],
            ..sample()
        };
        assert_eq!(decode(&encoded(&sb)), Ok(sb));
    }
}

#[test]
fn accessors() {
    let sb = sample();
    assert_eq!(sb.this_role(), Some(2));
    assert_eq!(sb.this_slot_entry(), Some(Slot::Active { role: 2 }));
    assert_eq!(sb.geometry().unwrap().array_sectors(), 3 << 20);
    assert_eq!(sb.array_name.as_str(), "golden");
    assert_eq!(format!("{:?}", sb.array_name), "\"golden\"");
    let spare = Superblock {
        this_slot: 4,
        ..sample()
    };
    assert_eq!(spare.this_role(), None);
}

#[test]
fn array_names() {
    assert_eq!(ArrayName::new("").unwrap().as_str(), "");
    assert_eq!(ArrayName::new(&"x".repeat(32)).unwrap().as_str().len(), 32);
    assert_eq!(ArrayName::new("ünïcødé").unwrap().as_str(), "ünïcødé");
    assert_eq!(
        ArrayName::new(&"x".repeat(33)),
        Err(NameError::TooLong { len: 33, max: 32 })
    );
    for bad in ["a/b", "a\nb", "a\0b", "\u{7f}"] {
        assert!(ArrayName::new(bad).is_err(), "{bad:?}");
    }
    let mut padded = [0; 32];
    padded[..3].copy_from_slice(b"a\0b");
    assert_eq!(ArrayName::from_padded(padded), Err(NameError::NotNulPadded));
    padded[..3].copy_from_slice(&[b'a', 0xC3, 0x28]);
    assert_eq!(ArrayName::from_padded(padded), Err(NameError::NotUtf8));
}

#[test]
fn slot_encoding() {
    for (slot, raw) in [
        (Slot::Empty, 0x0000),
        (Slot::Active { role: 0 }, 0x0100),
        (Slot::Active { role: 31 }, 0x011f),
        (Slot::Spare, 0x0200),
        (Slot::Faulty, 0x0300),
    ] {
        assert_eq!(slot.encode(), raw);
        assert_eq!(Slot::decode(raw), Some(slot));
    }
    for raw in [0x0001, 0x0201, 0x0301, 0x0400, 0xffff] {
        assert_eq!(Slot::decode(raw), None);
    }
}

// ---- rejections, one per error ----

#[test]
fn rejects_short_input() {
    assert_eq!(
        decode(&[0; 4095]),
        Err(SuperblockError::TooShort { len: 4095 })
    );
    assert_eq!(decode(&[]), Err(SuperblockError::TooShort { len: 0 }));
}

#[test]
fn rejects_bad_magic() {
    assert_eq!(decode(&[0; 4096]), Err(SuperblockError::BadMagic));
    assert_eq!(
        decode_patched(offset::MAGIC, b"GRAID-SC"),
        Err(SuperblockError::BadMagic)
    );
}

#[test]
fn rejects_other_versions() {
    for version in [0u32, 2, u32::MAX] {
        assert_eq!(
            decode_patched(offset::VERSION, &version.to_le_bytes()),
            Err(SuperblockError::UnsupportedVersion { version })
        );
    }
}

#[test]
fn rejects_bad_checksum() {
    let mut block = encoded(&sample());
    block[offset::EVENTS] ^= 1;
    let computed = crc32c::crc32c(&block[..offset::CHECKSUM]);
    assert_eq!(
        decode(&block),
        Err(SuperblockError::BadChecksum {
            stored: 0x375f_5574,
            computed
        })
    );
}

#[test]
fn rejects_unknown_required_features() {
    assert_eq!(
        decode_patched(offset::FEATURES_INCOMPAT, &0x8002u64.to_le_bytes()),
        Err(SuperblockError::UnknownRequiredFeatures { bits: 0x8002 })
    );
    assert_eq!(
        rejected(|sb| sb.features_incompat = 4),
        SuperblockError::UnknownRequiredFeatures { bits: 4 }
    );
}

#[test]
fn rejects_unknown_state_flags() {
    assert_eq!(
        decode_patched(offset::STATE, &7u32.to_le_bytes()),
        Err(SuperblockError::UnknownState { bits: 4 })
    );
}

#[test]
fn rejects_unknown_levels_and_layouts() {
    for level in [4u32, 7, 0xffff_ffff] {
        assert_eq!(
            decode_patched(offset::LEVEL, &level.to_le_bytes()),
            Err(SuperblockError::UnknownLevel { level })
        );
    }
    // RAID 5 and 6 take md's algorithms 0..=3 only, never RAID 10's layout.
    for level in [5u32, 6] {
        let mut block = encoded(&sample());
        patch(&mut block, offset::LEVEL, &level.to_le_bytes());
        assert!(matches!(
            decode(&block),
            Err(SuperblockError::BadLayout { layout: 0x102, .. })
        ));
        patch(&mut block, offset::LAYOUT, &4u32.to_le_bytes());
        assert!(matches!(
            decode(&block),
            Err(SuperblockError::BadLayout { layout: 4, .. })
        ));
    }
    // md's far-2 layout (0x201) and offset layouts are not graid's.
    for layout in [0u32, 0x201, 0x10102] {
        assert_eq!(
            decode_patched(offset::LAYOUT, &layout.to_le_bytes()),
            Err(SuperblockError::BadLayout {
                level: Level::Raid10,
                layout
            })
        );
    }
}

#[test]
fn rejects_impossible_geometry() {
    let members = |n: u32| decode_patched(offset::MEMBERS, &n.to_le_bytes());
    assert_eq!(
        members(1),
        Err(SuperblockError::Geometry(GeometryError::MemberCount {
            level: Level::Raid10,
            members: 1
        }))
    );
    assert!(matches!(
        members(33),
        Err(SuperblockError::Geometry(GeometryError::MemberCount { .. }))
    ));
    assert!(matches!(
        decode_patched(offset::CHUNK_SECTORS, &96u32.to_le_bytes()),
        Err(SuperblockError::Geometry(GeometryError::ChunkSize { .. }))
    ));
    assert!(matches!(
        decode_patched(offset::DATA_SIZE, &100u64.to_le_bytes()),
        Err(SuperblockError::Geometry(GeometryError::TooSmall { .. }))
    ));
    assert!(matches!(
        rejected(|sb| {
            sb.level = Level::Raid1;
            sb.chunk_sectors = 128;
        }),
        SuperblockError::Geometry(GeometryError::ChunkSize { .. })
    ));
}

#[test]
fn rejects_empty_data_area() {
    assert_eq!(
        decode_patched(offset::DATA_SIZE, &0u64.to_le_bytes()),
        Err(SuperblockError::EmptyDataArea)
    );
}

#[test]
fn rejects_bad_names() {
    assert_eq!(
        decode_patched(offset::ARRAY_NAME + 6, b"\0x"),
        Err(SuperblockError::BadName(NameError::NotNulPadded))
    );
    assert_eq!(
        decode_patched(offset::ARRAY_NAME, &[0xff]),
        Err(SuperblockError::BadName(NameError::NotUtf8))
    );
    assert_eq!(
        decode_patched(offset::ARRAY_NAME, b"a/b"),
        Err(SuperblockError::BadName(NameError::ForbiddenChar))
    );
}

#[test]
fn rejects_nil_uuids() {
    assert_eq!(
        decode_patched(offset::ARRAY_UUID, &[0; 16]),
        Err(SuperblockError::NilArrayUuid)
    );
    assert_eq!(
        decode_patched(offset::MEMBER_UUID, &[0; 16]),
        Err(SuperblockError::NilMemberUuid)
    );
}

#[test]
fn rejects_bad_slot_tables() {
    assert_eq!(
        decode_patched(offset::SLOTS + 2 * 7, &0x0400u16.to_le_bytes()),
        Err(SuperblockError::BadSlotEntry {
            slot: 7,
            raw: 0x0400
        })
    );
    // Role 3 of a 3-member array.
    assert_eq!(
        decode_patched(offset::SLOTS + 2 * 5, &0x0103u16.to_le_bytes()),
        Err(SuperblockError::RoleOutOfRange {
            slot: 5,
            role: 3,
            members: 3
        })
    );
    assert_eq!(
        decode_patched(offset::SLOTS + 2 * 63, &0x0101u16.to_le_bytes()),
        Err(SuperblockError::DuplicateRole { role: 1 })
    );
    for slot in [5u32, 64, u32::MAX] {
        assert_eq!(
            decode_patched(offset::THIS_SLOT, &slot.to_le_bytes()),
            Err(SuperblockError::BadThisSlot { slot })
        );
    }
    assert!(matches!(
        rejected(|sb| sb.slots[9] = Slot::Active { role: 200 }),
        SuperblockError::RoleOutOfRange { slot: 9, .. }
    ));
}

#[test]
fn rejects_bad_data_placement() {
    for data_offset in [0u64, 8, 15, 4097, 4100] {
        let sb = Superblock {
            data_offset,
            bitmap: Area::NONE,
            bitmap_region: 0,
            bitmap_events: 0,
            journal: Area::NONE,
            ppl: false,
            log_key: [0; 16],
            ..sample()
        };
        let mut block = [0; SUPERBLOCK_SIZE];
        assert_eq!(
            encode(&sb, &mut block),
            Err(SuperblockError::BadDataOffset { data_offset })
        );
    }
    assert_eq!(
        decode_patched(offset::DATA_OFFSET, &16u64.to_le_bytes()),
        Err(SuperblockError::BadArea {
            area: AreaKind::Bitmap,
            offset: 16,
            sectors: 2032
        })
    );
    let data_offset = MAX_SECTORS & !7;
    assert_eq!(
        rejected(|sb| sb.data_offset = data_offset),
        SuperblockError::DataAreaTooLarge {
            data_offset,
            data_size: 1 << 21
        }
    );
    assert!(matches!(
        decode_patched(offset::DATA_OFFSET, &(!7u64).to_le_bytes()),
        Err(SuperblockError::DataAreaTooLarge { .. })
    ));
}

#[test]
fn rejects_bad_reserved_areas() {
    let bad = |area, offset, sectors| SuperblockError::BadArea {
        area,
        offset,
        sectors,
    };
    use AreaKind::{Bitmap, Journal};
    // Inside the superblock, past the data offset, offset without size, overflowing.
    assert_eq!(
        rejected(|sb| sb.bitmap = Area {
            offset: 8,
            sectors: 8
        }),
        bad(Bitmap, 8, 8)
    );
    assert_eq!(
        rejected(|sb| sb.journal = Area {
            offset: 2048,
            sectors: 2049
        }),
        bad(Journal, 2048, 2049)
    );
    assert_eq!(
        rejected(|sb| sb.journal = Area {
            offset: 100,
            sectors: 0
        }),
        bad(Journal, 100, 0)
    );
    assert_eq!(
        decode_patched(offset::BITMAP_SECTORS, &u64::MAX.to_le_bytes()),
        Err(bad(Bitmap, 16, u64::MAX))
    );
    // Overlapping each other.
    assert_eq!(
        rejected(|sb| sb.journal = Area {
            offset: 2040,
            sectors: 16
        }),
        bad(Journal, 2040, 16)
    );
    assert_eq!(METADATA_END_SECTOR, 16);
}

#[test]
fn rejects_recovery_offset_beyond_data() {
    assert_eq!(
        decode_patched(offset::RECOVERY_OFFSET, &((1u64 << 21) + 1).to_le_bytes()),
        Err(SuperblockError::BadRecoveryOffset {
            recovery_offset: (1 << 21) + 1,
            data_size: 1 << 21
        })
    );
    assert!(decode_patched(offset::RECOVERY_OFFSET, &(1u64 << 21).to_le_bytes()).is_ok());
}

#[test]
fn every_error_explains_itself() {
    let errors = [
        SuperblockError::TooShort { len: 1 },
        SuperblockError::BadMagic,
        SuperblockError::UnsupportedVersion { version: 2 },
        SuperblockError::BadChecksum {
            stored: 1,
            computed: 2,
        },
        SuperblockError::UnknownRequiredFeatures { bits: 1 },
        SuperblockError::UnknownState { bits: 2 },
        SuperblockError::UnknownLevel { level: 5 },
        SuperblockError::BadLayout {
            level: Level::Raid10,
            layout: 0x201,
        },
        SuperblockError::EmptyDataArea,
        SuperblockError::Geometry(GeometryError::TooSmall {
            member_data_sectors: 1,
        }),
        SuperblockError::BadName(NameError::NotUtf8),
        SuperblockError::BadHomeHost(NameError::ForbiddenChar),
        SuperblockError::NilArrayUuid,
        SuperblockError::NilMemberUuid,
        SuperblockError::BadSlotEntry {
            slot: 1,
            raw: 0x400,
        },
        SuperblockError::RoleOutOfRange {
            slot: 1,
            role: 5,
            members: 2,
        },
        SuperblockError::DuplicateRole { role: 1 },
        SuperblockError::BadThisSlot { slot: 70 },
        SuperblockError::BadDataOffset { data_offset: 3 },
        SuperblockError::DataAreaTooLarge {
            data_offset: 8,
            data_size: 9,
        },
        SuperblockError::BadArea {
            area: AreaKind::Bitmap,
            offset: 1,
            sectors: 2,
        },
        SuperblockError::BadRecoveryOffset {
            recovery_offset: 10,
            data_size: 5,
        },
        SuperblockError::BadResyncOffset {
            resync_offset: 10,
            sectors: 5,
        },
        SuperblockError::BadBitmap {
            region_sectors: 3,
            area_sectors: 8,
        },
    ];
    let mut texts: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert!(texts.iter().all(|t| t.len() > 10));
    texts.sort();
    texts.dedup();
    assert_eq!(texts.len(), errors.len());
}

// ---- property tests ----

fn uuid() -> impl Strategy<Value = [u8; 16]> {
    any::<[u8; 16]>().prop_filter("nil", |u| *u != [0; 16])
}

/// No area, or one inside sectors `start..end`.
fn area_within(start: u64, end: u64) -> BoxedStrategy<Area> {
    if start >= end {
        return Just(Area::NONE).boxed();
    }
    prop_oneof![
        Just(Area::NONE),
        (start..end, start..end).prop_map(|(a, b)| Area {
            offset: a.min(b),
            sectors: a.max(b) - a.min(b) + 1,
        }),
    ]
    .boxed()
}

fn slot_table(members: u32) -> impl Strategy<Value = [Slot; MAX_SLOTS]> {
    let roles = proptest::collection::vec(any::<bool>(), members as usize);
    (roles, 0usize..8, 0usize..8).prop_flat_map(|(present, spares, faulty)| {
        let mut entries: Vec<Slot> = present
            .iter()
            .enumerate()
            .map(|(role, &here)| {
                if here {
                    Slot::Active { role: role as u8 }
                } else {
                    Slot::Faulty
                }
            })
            .collect();
        entries.extend(std::iter::repeat_n(Slot::Spare, spares));
        entries.extend(std::iter::repeat_n(Slot::Faulty, faulty));
        entries.resize(MAX_SLOTS, Slot::Empty);
        Just(entries)
            .prop_shuffle()
            .prop_map(|v| <[Slot; MAX_SLOTS]>::try_from(v).unwrap())
    })
}

prop_compose! {
    fn valid_superblock()(
        (level, members, chunk) in prop_oneof![
            (2u32..=32, 3u32..=11).prop_map(|(m, s)| (Level::Raid0, m, 1u32 << s)),
            (2u32..=32).prop_map(|m| (Level::Raid1, m, 0)),
            (2u32..=32, 3u32..=11).prop_map(|(m, s)| (Level::Raid10, m, 1u32 << s)),
        ],
        data_offset_blocks in 2u64..=1 << 16,
        data_size in 2048u64..=1 << 40,
        name in "[a-zA-Z0-9._-]{0,32}",
        scalars in any::<(u64, u64, bool)>(),
        uuids in (uuid(), uuid()),
        recovery in prop_oneof![Just(RECOVERY_COMPLETE), 0u64..=2048],
        this_slot_seed in any::<usize>(),
    )(
        slots in slot_table(members),
        // The space between superblock and data, split in two: bitmap first, then journal.
        bitmap in area_within(16, data_offset_blocks * 4 + 8),
        journal in area_within(data_offset_blocks * 4 + 8, data_offset_blocks * 8),
        level in Just(level), members in Just(members), chunk in Just(chunk),
        data_offset_blocks in Just(data_offset_blocks), data_size in Just(data_size),
        name in Just(name), scalars in Just(scalars), uuids in Just(uuids),
        recovery in Just(recovery), this_slot_seed in Just(this_slot_seed),
        with_bitmap in any::<bool>(),
    ) -> Superblock {
        let used: Vec<usize> = (0..MAX_SLOTS).filter(|&i| slots[i] != Slot::Empty).collect();
        let this_slot = used[this_slot_seed % used.len()] as u32;
        let (created, events, clean) = scalars;
        let mut sb = Superblock {
            features_compat: 0,
            features_incompat: 0,
            array_uuid: uuids.0,
            array_name: ArrayName::new(&name).unwrap(),
            homehost: if events % 3 == 0 {
                HomeHost::EMPTY
            } else {
                HomeHost::new(&format!("host-{name}")).unwrap()
            },
            created,
            events,
            clean,
            // Pending or not independently of the recovery offset (any position up to 2048 is
            // within every array's resync walk).
            resync_offset: if recovery == RECOVERY_COMPLETE {
                events % 2049
            } else {
                RECOVERY_COMPLETE
            },
            level,
            chunk_sectors: chunk,
            members,
            member_uuid: uuids.1,
            this_slot,
            data_offset: data_offset_blocks * 8,
            data_size,
            recovery_offset: recovery,
            bitmap,
            bitmap_region: 0,
            bitmap_events: 0,
            journal,
            ppl: false,
            log_key: [0; 16],
            slots,
            reshape: None,
        };
        // A bitmap where the area allows one (RAID 1/10, 4 KiB aligned, at least a block).
        let walk = sb.geometry().map(|g| g.resync_sectors()).unwrap_or(0);
        if with_bitmap && level != Level::Raid0 && bitmap.offset % 8 == 0 {
            if let Some(regions) = Regions::fitting(walk, bitmap.sectors) {
                sb.bitmap_region = regions.region_sectors();
                sb.bitmap_events = events / 2;
            }
        }
        // A partial parity log where the journal area allows one (RAID 5/6).
        sb.ppl = with_bitmap
            && level.has_parity()
            && graid_engine::ppl::LogArea::new(journal).is_some();
        sb
    }
}

fn expected_rejection(at: usize) -> SuperblockError {
    match at {
        a if a < offset::VERSION => SuperblockError::BadMagic,
        a if a < offset::STATE => SuperblockError::UnsupportedVersion { version: 0 },
        _ => SuperblockError::BadChecksum {
            stored: 0,
            computed: 0,
        },
    }
}

/// What a superblock reads back as after [`encode`] dropped the compatible features it does not know.
fn without_unknown_compat(sb: Superblock) -> Superblock {
    Superblock {
        features_compat: sb.features_compat & FEATURES_COMPAT_KNOWN,
        ..sb
    }
}

fn same_kind(a: &SuperblockError, b: &SuperblockError) -> bool {
    std::mem::discriminant(a) == std::mem::discriminant(b)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn valid_superblocks_round_trip(sb in valid_superblock()) {
        let block = encoded(&sb);
        prop_assert_eq!(decode(&block), Ok(sb));
    }

    #[test]
    fn any_single_byte_corruption_is_rejected(
        sb in valid_superblock(),
        at in 0..SUPERBLOCK_SIZE,
        flip in 1u8..=255,
    ) {
        let mut block = encoded(&sb);
        block[at] ^= flip;
        let err = decode(&block).unwrap_err();
        prop_assert!(same_kind(&err, &expected_rejection(at)), "{err:?} at {at:#x}");
    }

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..5000)) {
        let _ = decode(&bytes);
    }

    #[test]
    fn random_blocks_that_pass_the_checksum_are_fully_validated(
        mut block in any::<[u8; 64]>().prop_map(|head| {
            let mut block = [0u8; SUPERBLOCK_SIZE];
            block[..64].copy_from_slice(&head);
            block
        }),
    ) {
        block[..8].copy_from_slice(b"GRAID-SB");
        block[8..12].copy_from_slice(&1u32.to_le_bytes());
        reseal(&mut block);
        // Almost always refused; whatever is accepted must be writable as is.
        if let Ok(sb) = decode(&block) {
            prop_assert_eq!(decode(&encoded(&sb)), Ok(without_unknown_compat(sb)));
        }
    }

    #[test]
    fn resealed_corruption_never_panics_and_accepted_blocks_re_encode(
        sb in valid_superblock(),
        edits in proptest::collection::vec((0..offset::CHECKSUM, any::<u8>()), 1..8),
    ) {
        let mut block = encoded(&sb);
        for (at, byte) in edits {
            block[at] = byte;
        }
        reseal(&mut block);
        if let Ok(decoded) = decode(&block) {
            prop_assert_eq!(decode(&encoded(&decoded)), Ok(without_unknown_compat(decoded)));
        }
    }
}

#[test]
fn for_member_fills_in_only_the_member_fields() {
    let sb = sample();
    let copy = sb.for_member(3, [0xc0; 16]);
    assert_eq!((copy.this_slot, copy.member_uuid), (3, [0xc0; 16]));
    // Everything else is the array's, unchanged.
    assert_eq!(copy.for_member(sb.this_slot, sb.member_uuid), sb);
}

// ---- a reshape in progress ----

/// `sample()` as a RAID 5 of three growing to four members, its data offset moving down from
/// 8192 to the end of the log area.
fn reshaping() -> Superblock {
    Superblock {
        level: Level::Raid5(ParityLayout::LeftSymmetric),
        data_offset: 8192,
        reshape: Some(Reshape {
            position: 3 * 128 * 40,
            new_level: Level::Raid5(ParityLayout::LeftSymmetric),
            new_chunk_sectors: 128,
            new_members: 4,
            new_data_offset: 4096,
            backwards: false,
        }),
        ..sample()
    }
}

#[test]
fn a_reshape_is_incompat_bit_0_and_its_fields_at_0x1c0() {
    let sb = reshaping();
    let block = encoded(&sb);
    assert_eq!(
        u64::from_le_bytes(block[offset::FEATURES_INCOMPAT..][..8].try_into().unwrap()),
        FEATURE_RESHAPE
    );
    let u64_at = |at: usize| u64::from_le_bytes(block[at..at + 8].try_into().unwrap());
    let u32_at = |at: usize| u32::from_le_bytes(block[at..at + 4].try_into().unwrap());
    assert_eq!(offset::RESHAPE_POSITION, 0x1c0);
    assert_eq!(u64_at(0x1c0), 3 * 128 * 40);
    assert_eq!((u32_at(0x1c8), u32_at(0x1cc)), (5, 2));
    assert_eq!((u32_at(0x1d0), u32_at(0x1d4)), (128, 4));
    assert_eq!(u64_at(0x1d8), 4096);
    assert_eq!(u32_at(0x1e0), 0);
    let decoded = decode(&block).unwrap();
    assert_eq!(decoded, sb);
    assert_eq!(decoded.features_incompat, 0, "the bit is the field's");
    assert_eq!(decoded.new_geometry().unwrap().members(), 4);
    // Backwards: flag bit 0, the offset moving up.
    let back = Superblock {
        reshape: sb.reshape.map(|r| Reshape {
            new_members: 3,
            new_data_offset: 12288,
            backwards: true,
            ..r
        }),
        members: 4,
        ..sb
    };
    let block = encoded(&back);
    assert_eq!(
        u32::from_le_bytes(block[0x1e0..0x1e4].try_into().unwrap()),
        1
    );
    assert_eq!(decode(&block), Ok(back));
    // Without the bit the bytes are reserved: ignored.
    let mut plain = encoded(&sample());
    patch(&mut plain, offset::RESHAPE_POSITION, &[0xff; 40]);
    assert_eq!(decode(&plain), Ok(sample()));
}

#[test]
fn rejects_reshapes_that_do_not_hold_together() {
    let bad = |what: &'static str, change: &dyn Fn(&mut Reshape)| {
        let mut sb = reshaping();
        change(sb.reshape.as_mut().unwrap());
        let mut block = [0; SUPERBLOCK_SIZE];
        assert_eq!(
            encode(&sb, &mut block),
            Err(SuperblockError::BadReshape { what }),
            "{what}"
        );
    };
    bad("the new geometry is impossible", &|r| r.new_members = 1);
    bad("the new geometry is impossible", &|r| {
        r.new_chunk_sectors = 3
    });
    bad(
        "the new data offset is not 4 KiB aligned after the superblock",
        &|r| r.new_data_offset = 4100,
    );
    bad("the new data area overlaps the bitmap or log area", &|r| {
        r.new_data_offset = 2048
    });
    bad("the data offset moves against the direction", &|r| {
        r.backwards = true
    });
    bad("the data offset moves against the direction", &|r| {
        r.new_data_offset = 8192
    });
    bad("the position is beyond the array", &|r| {
        r.position = 1 << 40
    });
    // On disk: an unknown new level, unknown flags.
    let block = encoded(&reshaping());
    let mut unknown = block;
    patch(&mut unknown, offset::NEW_LEVEL, &7u32.to_le_bytes());
    assert_eq!(
        decode(&unknown),
        Err(SuperblockError::BadReshape {
            what: "the new level or layout is unknown"
        })
    );
    let mut flags = block;
    patch(&mut flags, offset::RESHAPE_FLAGS, &2u32.to_le_bytes());
    assert_eq!(
        decode(&flags),
        Err(SuperblockError::BadReshape {
            what: "unknown reshape flags"
        })
    );
}

#[test]
fn a_missing_member_keeps_only_its_own_devices_entry() {
    use graid_engine::members::NO_SLOT;
    let mut sb = sample();
    sb.members = 4;
    sb.slots = [Slot::Empty; graid_engine::superblock::MAX_SLOTS];
    sb.slots[0] = Slot::Active { role: 0 };
    sb.slots[1] = Slot::Faulty;
    sb.slots[2] = Slot::Active { role: 3 };
    sb.slots[3] = Slot::Spare;
    // Its device's entry, which the start then marks faulty; no other (a spare's that has the
    // role's number, a free one, a faulty one).
    assert_eq!(sb.missing_member_slot(0), 0);
    assert_eq!(sb.missing_member_slot(1), NO_SLOT);
    assert_eq!(sb.missing_member_slot(2), NO_SLOT);
    assert_eq!(sb.missing_member_slot(3), 2);
}

#[test]
fn new_arrays_leave_reshape_headroom_before_the_data_on_members_of_a_gib_or_more() {
    use graid_engine::superblock::{new_array_layout, reshape_headroom};
    const MIB: u64 = 2048;
    const GIB: u64 = 1024 * MIB;
    // Small members keep the 2 MiB offset (the VM tests' md comparisons rely on it).
    assert_eq!(new_array_layout(256 * MIB, false).1, 2 * MIB);
    assert_eq!(new_array_layout(256 * MIB, true).1, 2 * MIB);
    assert_eq!(new_array_layout(GIB - 8, false).1, 2 * MIB);
    // From 1 GiB: a 1024th, a power of two, 1 MiB aligned, past the log's area.
    assert_eq!(reshape_headroom(GIB), MIB);
    assert_eq!(new_array_layout(GIB, false).1, 3 * MIB);
    assert_eq!(reshape_headroom(100 * GIB), 64 * MIB);
    let (log, offset) = new_array_layout(100 * GIB, true);
    assert_eq!(offset, log.offset + log.sectors + 64 * MIB);
    // At most 128 MiB, whatever the member.
    assert_eq!(reshape_headroom(30 * 1024 * GIB), 128 * MIB);
    assert_eq!(new_array_layout(30 * 1024 * GIB, false).1, 130 * MIB);
    for member in [GIB, 3 * GIB + 5, 777 * GIB, 64 * 1024 * GIB] {
        for ppl in [false, true] {
            let (log, offset) = new_array_layout(member, ppl);
            assert_eq!(offset % MIB, 0, "{member} {ppl}");
            assert!(offset >= log.offset + log.sectors + reshape_headroom(member));
        }
    }
}

#[test]
fn a_reshape_names_the_roles_of_both_geometries() {
    // The member that joined a grow from three to four holds role 3 while the old geometry's
    // count is still three.
    let mut sb = reshaping();
    sb.slots[3] = Slot::Active { role: 3 };
    let mut block = [0; SUPERBLOCK_SIZE];
    encode(&sb, &mut block).expect("role 3 of the new geometry");
    assert_eq!(
        decode(&block).map(|d| d.slots[3]),
        Ok(Slot::Active { role: 3 })
    );
    // Without the reshape, the role is past the count.
    sb.reshape = None;
    assert_eq!(
        encode(&sb, &mut block),
        Err(SuperblockError::RoleOutOfRange {
            slot: 3,
            role: 3,
            members: 3
        })
    );
}
