//! `graid-probe forge-ppl`: what a local user who owns some of an array's data could plant in
//! it: a partial parity log entry header, well formed in every field the user can know (magic,
//! version, the array's UUID, which udev publishes, the log's current epoch, checksums over
//! header and payload), followed by its payload. Written into data chunks so that a partial
//! write's partial parity (the chunks it leaves alone) carries it into the log, it must never be
//! taken for an entry at replay: it lacks the log's key, which only the superblocks hold. The
//! test writes it to the array and checks that a replay rewrote nothing from it.
//!
//! ```text
//! graid-probe forge-ppl UUID HEAD_DEV MEMBERS START SECTORS MEMBER > blocks
//! ```
//! UUID: the array's (hex, dashes allowed); HEAD_DEV: a member whose log head gives the epoch
//! (the default log area, 1 MiB in); the forged entry claims member MEMBER wrote `SECTORS` rows
//! from data-area sector `START` of an array of MEMBERS members, with a payload of 0xab bytes.

use graid_engine::crc32c::crc32c;
use graid_engine::geometry::MAX_MEMBERS;
use graid_engine::members::MemberSet;
use graid_engine::ppl::{
    decode_head, encode_entry, Entry, EntryKind, LogId, ParityKind, BLOCK_BYTES, DEFAULT_LOG_AREA,
};
use std::io::{Read, Seek, SeekFrom, Write};
use std::process::ExitCode;

pub fn run(args: &[String]) -> ExitCode {
    match forge(args) {
        Ok(blocks) => match std::io::stdout().write_all(&blocks) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("forge-ppl: {e}");
                ExitCode::FAILURE
            }
        },
        Err(e) => {
            eprintln!("forge-ppl: {e}");
            ExitCode::from(2)
        }
    }
}

fn forge(args: &[String]) -> Result<Vec<u8>, String> {
    let [uuid, head_dev, members, start, sectors, member] = args else {
        return Err("usage: forge-ppl UUID HEAD_DEV MEMBERS START SECTORS MEMBER".into());
    };
    let uuid = parse_uuid(uuid)?;
    let number = |s: &str| s.parse::<u64>().map_err(|e| format!("{s}: {e}"));
    let (members, start, sectors, member) = (
        number(members)?,
        number(start)?,
        number(sectors)?,
        number(member)?,
    );
    if sectors == 0 || sectors > 8 || member >= members || members > u64::from(MAX_MEMBERS) {
        return Err("rows 1..=8 of a member of the array".into());
    }
    let epoch = head_epoch(head_dev, &uuid)?;
    let payload = vec![0xabu8; BLOCK_BYTES];
    let mut written = [(0u32, 0u32); MAX_MEMBERS as usize];
    written[member as usize] = (0, sectors as u32);
    let entry = Entry {
        kind: EntryKind::Partial,
        parity: ParityKind::P,
        epoch,
        seq: u64::MAX,
        start,
        sectors,
        members: members as u32,
        written,
        payload_crc: crc32c(&payload[..sectors as usize * 512]),
        targets: MemberSet::of(member as u32),
    };
    // The user cannot read the superblock's key: the best guess is none.
    let guess = LogId { uuid, key: [0; 16] };
    let mut header = [0u8; BLOCK_BYTES];
    encode_entry(&guess, &entry, &mut header);
    Ok([&header[..], &payload[..]].concat())
}

/// The epoch the log head of `dev` holds.
fn head_epoch(dev: &str, uuid: &[u8; 16]) -> Result<u64, String> {
    let mut file = std::fs::File::open(dev).map_err(|e| format!("{dev}: {e}"))?;
    let mut block = [0u8; BLOCK_BYTES];
    file.seek(SeekFrom::Start(DEFAULT_LOG_AREA.offset * 512))
        .and_then(|_| file.read_exact(&mut block))
        .map_err(|e| format!("{dev}: {e}"))?;
    decode_head(uuid, &block).ok_or_else(|| format!("{dev}: no log head of this array"))
}

fn parse_uuid(text: &str) -> Result<[u8; 16], String> {
    let hex: String = text.chars().filter(|c| *c != '-').collect();
    if hex.len() != 32 {
        return Err(format!("{text}: not a UUID"));
    }
    let mut uuid = [0u8; 16];
    for (i, byte) in uuid.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16)
            .map_err(|_| format!("{text}: not a UUID"))?;
    }
    Ok(uuid)
}
