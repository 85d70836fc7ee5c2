//! Where what an array holds ends: the size its own filesystem, volume or partition table
//! says it takes, read from that format's header. A shrink (`graidctl grow --size` smaller)
//! is allowed only where everything found ends within the new size, so nothing mapped is cut
//! off (the admin shrinks the filesystem first, as `resize2fs`, `pvresize` or a partition tool
//! do; md trusts the admin with `--array-size`, graid checks).
//!
//! libblkid names what is there (`signature.rs`); the sizes are read here because libblkid
//! reports a filesystem's size only from util-linux 2.39 (`FSSIZE`), and a volume's or a
//! partition table's never. Each format's fields are its own documented on-disk layout.

use std::io;

/// Reads `len` bytes at byte `offset` of the device (short only at its end).
pub type ReadAt<'a> = dyn Fn(u64, usize) -> io::Result<Vec<u8>> + 'a;

/// How far content of kind `kind` (libblkid's `TYPE` or `PTTYPE`) reaches, in bytes from the
/// device's start, on a device of `block`-byte logical blocks (what partition tables count
/// in): `Ok(None)` where graidctl cannot tell (an unknown kind, or a header that does not hold
/// what its kind says).
pub fn content_end(kind: &str, read: &ReadAt, block: u64) -> io::Result<Option<u64>> {
    match kind {
        "ext2" | "ext3" | "ext4" => ext_end(read),
        "xfs" => xfs_end(read),
        "btrfs" => btrfs_end(read),
        "swap" => swap_end(read),
        "LVM2_member" => lvm_end(read),
        "dos" => mbr_end(read, block),
        "gpt" => gpt_end(read, block),
        _ => Ok(None),
    }
}

fn le_u16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn le_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn le_u64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

fn be_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn be_u64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_be_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// ext2/3/4: the superblock at byte 1024 counts blocks (`s_blocks_count_lo`, and `_hi` with
/// the 64-bit feature) of `1024 << s_log_block_size` bytes.
fn ext_end(read: &ReadAt) -> io::Result<Option<u64>> {
    let sb = read(1024, 1024)?;
    let end = || {
        if le_u16(&sb, 0x38)? != 0xef53 {
            return None;
        }
        let lo = u64::from(le_u32(&sb, 0x04)?);
        let incompat_64bit = le_u32(&sb, 0x60)? & 0x80 != 0;
        let hi = if incompat_64bit {
            u64::from(le_u32(&sb, 0x150)?)
        } else {
            0
        };
        // ext4 blocks are 1 KiB to 64 KiB.
        let log = le_u32(&sb, 0x18).filter(|&l| l <= 6)?;
        let block = 1024u64 << log;
        (hi << 32 | lo).checked_mul(block)
    };
    Ok(end())
}

/// XFS: the big-endian superblock at byte 0 counts data blocks (`sb_dblocks`, which hold the
/// internal log too) of `sb_blocksize` bytes.
fn xfs_end(read: &ReadAt) -> io::Result<Option<u64>> {
    let sb = read(0, 512)?;
    let end = || {
        if sb.get(0..4)? != b"XFSB" {
            return None;
        }
        be_u64(&sb, 8)?.checked_mul(u64::from(be_u32(&sb, 4)?))
    };
    Ok(end())
}

/// Btrfs: the superblock at 64 KiB holds this device's item, whose `total_bytes` is what the
/// filesystem uses of the device (`btrfs filesystem resize` changes it).
fn btrfs_end(read: &ReadAt) -> io::Result<Option<u64>> {
    let sb = read(64 * 1024, 4096)?;
    let end = || {
        if sb.get(0x40..0x48)? != b"_BHRfS_M" {
            return None;
        }
        // dev_item at 0xc9: devid (8 bytes), then total_bytes.
        le_u64(&sb, 0xc9 + 8).filter(|&n| n != 0)
    };
    Ok(end())
}

/// Swap (version 1): `SWAPSPACE2` ends the first page; the header after the 1024 boot bytes
/// gives the last page. Pages of 4 KiB (the magic's place says so).
fn swap_end(read: &ReadAt) -> io::Result<Option<u64>> {
    const PAGE: u64 = 4096;
    let head = read(0, PAGE as usize)?;
    let end = || {
        if head.get(PAGE as usize - 10..)? != b"SWAPSPACE2" || le_u32(&head, 1024)? != 1 {
            return None;
        }
        u64::from(le_u32(&head, 1028)?)
            .checked_add(1)?
            .checked_mul(PAGE)
    };
    Ok(end())
}

/// LVM2 physical volume: the label (`LABELONE`, in one of the first four sectors) points at
/// the PV header, whose `device_size_xl` is the size the PV takes (`pvresize
/// --setphysicalvolumesize` changes it).
fn lvm_end(read: &ReadAt) -> io::Result<Option<u64>> {
    let head = read(0, 4 * 512)?;
    let end = || {
        let label = (0..4usize)
            .map(|s| s * 512)
            .find(|&at| head.get(at..at + 8) == Some(b"LABELONE"))?;
        if head.get(label + 24..label + 32)? != b"LVM2 001" {
            return None;
        }
        let header = label + usize::try_from(le_u32(&head, label + 20)?).ok()?;
        // pv_header: the PV's UUID (32 bytes), then device_size_xl.
        le_u64(&head, header + 32).filter(|&n| n != 0)
    };
    Ok(end())
}

/// MBR: the end of the primary partition that ends last (logical partitions lie inside their
/// extended one), counted in the device's logical blocks.
fn mbr_end(read: &ReadAt, block: u64) -> io::Result<Option<u64>> {
    let mbr = read(0, 512)?;
    let end = || {
        if mbr.get(510..512)? != [0x55, 0xaa] {
            return None;
        }
        let mut end = 0u64;
        for entry in (0..4).map(|i| 446 + 16 * i) {
            let start = u64::from(le_u32(&mbr, entry + 8)?);
            let sectors = u64::from(le_u32(&mbr, entry + 12)?);
            if mbr.get(entry + 4) != Some(&0) && sectors != 0 {
                end = end.max((start + sectors).checked_mul(block)?);
            }
        }
        Some(end)
    };
    Ok(end())
}

/// GPT: the end of the partition that ends last (`last_lba` + 1 logical blocks; the header is
/// in block 1). The backup header at the device's end is not counted: a shrink leaves it
/// behind (`sfdisk --relocate gpt-bak-std` writes a new one), as any resize of a GPT device
/// does.
fn gpt_end(read: &ReadAt, block: u64) -> io::Result<Option<u64>> {
    let header = read(block, 512)?;
    if header.get(0..8) != Some(b"EFI PART") {
        return Ok(None);
    }
    // Entries of 128 bytes times a power of two, at most 1024 of them.
    let fields = || {
        let at = le_u64(&header, 72)?.checked_mul(block)?;
        let count = le_u32(&header, 80)?;
        let size = le_u32(&header, 84)?;
        let sane = (128..=4096).contains(&size) && size.is_power_of_two() && count <= 1024;
        sane.then_some((at, count as usize, size as usize))
    };
    let Some((at, count, size)) = fields() else {
        return Ok(None);
    };
    let table = read(at, count * size)?;
    let mut end = 0u64;
    for entry in table.chunks_exact(size) {
        // An unused entry's type GUID is zero.
        if entry.get(..16).is_some_and(|t| t.iter().all(|&b| b == 0)) {
            continue;
        }
        let last_end = le_u64(entry, 40).and_then(|last| last.checked_add(1)?.checked_mul(block));
        let Some(last_end) = last_end else {
            return Ok(None);
        };
        end = end.max(last_end);
    }
    Ok(Some(end))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A device of `len` bytes with `parts` written at their offsets.
    fn device(len: usize, parts: &[(usize, &[u8])]) -> Vec<u8> {
        let mut dev = vec![0u8; len];
        for (at, bytes) in parts {
            dev[*at..*at + bytes.len()].copy_from_slice(bytes);
        }
        dev
    }

    fn end_of(kind: &str, dev: &[u8]) -> Option<u64> {
        end_in_blocks_of(kind, dev, 512)
    }

    fn end_in_blocks_of(kind: &str, dev: &[u8], block: u64) -> Option<u64> {
        let read = |offset: u64, len: usize| -> io::Result<Vec<u8>> {
            let start = (offset as usize).min(dev.len());
            Ok(dev[start..(start + len).min(dev.len())].to_vec())
        };
        content_end(kind, &read, block).unwrap()
    }

    #[test]
    fn ext4_blocks_times_block_size_with_the_high_word_when_64_bit() {
        let mut sb = vec![0u8; 1024];
        sb[0x38..0x3a].copy_from_slice(&0xef53u16.to_le_bytes());
        sb[0x04..0x08].copy_from_slice(&1000u32.to_le_bytes());
        sb[0x18..0x1c].copy_from_slice(&2u32.to_le_bytes()); // 4 KiB blocks
        sb[0x150..0x154].copy_from_slice(&1u32.to_le_bytes());
        let dev = device(4096, &[(1024, &sb)]);
        assert_eq!(end_of("ext4", &dev), Some(1000 * 4096));
        sb[0x60] = 0x80; // 64bit: the high word counts
        let dev = device(4096, &[(1024, &sb)]);
        assert_eq!(end_of("ext4", &dev), Some(((1u64 << 32) + 1000) * 4096));
        // A block size no ext4 has: not guessed (1024 << 54 would wrap to 0).
        sb[0x18..0x1c].copy_from_slice(&54u32.to_le_bytes());
        assert_eq!(end_of("ext4", &device(4096, &[(1024, &sb)])), None);
        sb[0x18..0x1c].copy_from_slice(&2u32.to_le_bytes());
        // Another magic: not an ext superblock.
        sb[0x38] = 0;
        assert_eq!(end_of("ext2", &device(4096, &[(1024, &sb)])), None);
    }

    #[test]
    fn xfs_data_blocks_times_block_size() {
        let mut sb = b"XFSB".to_vec();
        sb.extend_from_slice(&4096u32.to_be_bytes());
        sb.extend_from_slice(&25_000u64.to_be_bytes());
        assert_eq!(
            end_of("xfs", &device(512, &[(0, &sb)])),
            Some(25_000 * 4096)
        );
        assert_eq!(end_of("xfs", &device(512, &[(4, &sb[4..])])), None);
    }

    #[test]
    fn btrfs_this_devices_total_bytes() {
        let mut sb = vec![0u8; 4096];
        sb[0x40..0x48].copy_from_slice(b"_BHRfS_M");
        sb[0xc9 + 8..0xc9 + 16].copy_from_slice(&(3u64 << 30).to_le_bytes());
        let dev = device(68 * 1024, &[(64 * 1024, &sb)]);
        assert_eq!(end_of("btrfs", &dev), Some(3 << 30));
    }

    #[test]
    fn swap_last_page_plus_one() {
        let mut head = vec![0u8; 4096];
        head[4086..].copy_from_slice(b"SWAPSPACE2");
        head[1024..1028].copy_from_slice(&1u32.to_le_bytes());
        head[1028..1032].copy_from_slice(&255u32.to_le_bytes());
        assert_eq!(end_of("swap", &head), Some(256 * 4096));
    }

    #[test]
    fn lvm_the_pv_headers_device_size() {
        let mut label = b"LABELONE".to_vec();
        label.extend_from_slice(&1u64.to_le_bytes()); // sector_xl
        label.extend_from_slice(&0u32.to_le_bytes()); // crc
        label.extend_from_slice(&32u32.to_le_bytes()); // offset_xl
        label.extend_from_slice(b"LVM2 001");
        label.extend_from_slice(&[b'u'; 32]); // pv_uuid
        label.extend_from_slice(&(5u64 << 30).to_le_bytes());
        let dev = device(2048, &[(512, &label)]);
        assert_eq!(end_of("LVM2_member", &dev), Some(5 << 30));
        assert_eq!(end_of("LVM2_member", &device(2048, &[])), None);
    }

    #[test]
    fn mbr_the_primary_partition_that_ends_last() {
        let mut mbr = vec![0u8; 512];
        mbr[510..].copy_from_slice(&[0x55, 0xaa]);
        let entry = |mbr: &mut Vec<u8>, i: usize, kind: u8, start: u32, sectors: u32| {
            let e = 446 + 16 * i;
            mbr[e + 4] = kind;
            mbr[e + 8..e + 12].copy_from_slice(&start.to_le_bytes());
            mbr[e + 12..e + 16].copy_from_slice(&sectors.to_le_bytes());
        };
        entry(&mut mbr, 0, 0x83, 2048, 10_000);
        entry(&mut mbr, 2, 0x05, 20_000, 5_000);
        // An empty entry's numbers do not count.
        entry(&mut mbr, 3, 0, 90_000, 5_000);
        assert_eq!(end_of("dos", &mbr), Some(25_000 * 512));
        // On 4 KiB logical blocks the same numbers reach eight times as far.
        assert_eq!(end_in_blocks_of("dos", &mbr, 4096), Some(25_000 * 4096));
        mbr[511] = 0;
        assert_eq!(end_of("dos", &mbr), None);
    }

    #[test]
    fn gpt_the_partition_that_ends_last_in_either_block_size() {
        for block in [512usize, 4096] {
            let mut header = b"EFI PART".to_vec();
            header.resize(512, 0);
            header[72..80].copy_from_slice(&2u64.to_le_bytes());
            header[80..84].copy_from_slice(&128u32.to_le_bytes());
            header[84..88].copy_from_slice(&128u32.to_le_bytes());
            let mut table = vec![0u8; 128 * 128];
            for (i, last) in [(0usize, 999u64), (5, 4999)] {
                let e = &mut table[i * 128..(i + 1) * 128];
                e[0] = 0xaf; // a type GUID
                e[32..40].copy_from_slice(&34u64.to_le_bytes());
                e[40..48].copy_from_slice(&last.to_le_bytes());
            }
            // An unused entry with numbers in it does not count.
            table[7 * 128 + 40..7 * 128 + 48].copy_from_slice(&9_999_999u64.to_le_bytes());
            let dev = device(
                2 * block + table.len(),
                &[(block, &header), (2 * block, &table)],
            );
            assert_eq!(
                end_in_blocks_of("gpt", &dev, block as u64),
                Some(5000 * block as u64),
                "{block}"
            );
            // An entry size no GPT has: not read.
            let mut odd = header.clone();
            odd[84..88].copy_from_slice(&u32::MAX.to_le_bytes());
            let dev = device(
                2 * block + table.len(),
                &[(block, &odd), (2 * block, &table)],
            );
            assert_eq!(end_in_blocks_of("gpt", &dev, block as u64), None);
        }
        assert_eq!(end_of("gpt", &device(8192, &[])), None);
    }

    /// Headers the real tools wrote (`testdata/README.md`).
    #[test]
    fn golden_headers_from_the_real_tools() {
        let cases: [(&str, &[u8], u64); 5] = [
            (
                "ext4",
                include_bytes!("../testdata/ext4-40M.head"),
                40 << 20,
            ),
            (
                "gpt",
                include_bytes!("../testdata/gpt-2-parts.head"),
                63_488 * 512,
            ),
            (
                "dos",
                include_bytes!("../testdata/mbr-2-parts.head"),
                51_200 * 512,
            ),
            (
                "swap",
                include_bytes!("../testdata/swap-30M.head"),
                30 << 20,
            ),
            (
                "LVM2_member",
                include_bytes!("../testdata/lvm-48M.head"),
                48 << 20,
            ),
        ];
        for (kind, head, end) in cases {
            assert_eq!(end_of(kind, head), Some(end), "{kind}");
        }
    }

    #[test]
    fn an_unknown_kind_is_not_guessed() {
        assert_eq!(end_of("crypto_LUKS", &device(8192, &[])), None);
    }
}
