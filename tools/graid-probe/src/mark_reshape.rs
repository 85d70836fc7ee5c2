//! `graid-probe mark-reshape DEV...`: what an interrupted reshape leaves in each member's
//! superblock (`FEATURE_RESHAPE` and its fields; on-disk-format.rst, "Reshape"), written
//! over the superblocks of a stopped array, so a test can check that a graid that cannot
//! continue the reshape refuses to assemble the members with the reason, and changes nothing.
//! The reshape recorded: the same level and members, half the chunk (RAID 1: none), moving
//! backwards with the data offset 8 sectors up, nothing moved yet.

use graid_engine::superblock::{decode, encode, Reshape, SUPERBLOCK_SECTOR, SUPERBLOCK_SIZE};
use std::os::unix::fs::FileExt;
use std::process::ExitCode;

/// Where the superblock lives on each member.
const SUPERBLOCK_BYTE: u64 = SUPERBLOCK_SECTOR * 512;

pub fn run(devices: &[String]) -> ExitCode {
    if devices.is_empty() {
        eprintln!("usage: graid-probe mark-reshape DEV...");
        return ExitCode::from(2);
    }
    for dev in devices {
        if let Err(e) = mark(dev) {
            eprintln!("mark-reshape: {dev}: {e}");
            return ExitCode::FAILURE;
        }
        println!("ok - {dev}: a reshape recorded in its superblock");
    }
    ExitCode::SUCCESS
}

fn mark(dev: &str) -> Result<(), String> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(dev)
        .map_err(|e| e.to_string())?;
    let mut block = [0u8; SUPERBLOCK_SIZE];
    file.read_exact_at(&mut block, SUPERBLOCK_BYTE)
        .map_err(|e| e.to_string())?;
    let mut sb = decode(&block).map_err(|e| e.to_string())?;
    sb.reshape = Some(Reshape {
        position: 0,
        new_level: sb.level,
        // Half, down to the smallest chunk (RAID 1 has none).
        new_chunk_sectors: if sb.chunk_sectors > 8 {
            sb.chunk_sectors / 2
        } else {
            sb.chunk_sectors
        },
        new_members: sb.members,
        new_data_offset: sb.data_offset + 8,
        backwards: true,
    });
    encode(&sb, &mut block).map_err(|e| e.to_string())?;
    file.write_all_at(&block, SUPERBLOCK_BYTE)
        .and_then(|()| file.sync_all())
        .map_err(|e| e.to_string())
}
