//! Reading and zeroing a member's superblock block (4 KiB at byte offset 4096) directly, without
//! the module. Block devices are accessed with `O_DIRECT` so what graidctl sees is what is on
//! the medium, not a stale page cache (the module writes superblocks with bios); files and
//! devices that refuse `O_DIRECT` are read through the cache.

use crate::error::CtlError;
use graid_engine::superblock::SUPERBLOCK_SIZE;
use graid_engine::superblock::{decode, Superblock, SuperblockError, MAGIC, SUPERBLOCK_SECTOR};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// Byte offset of the superblock block on a member.
pub const SUPERBLOCK_OFFSET: u64 = SUPERBLOCK_SECTOR * 512;

/// A block buffer aligned for `O_DIRECT`.
#[repr(C, align(4096))]
struct Aligned([u8; SUPERBLOCK_SIZE]);

/// Opens `path`, with `O_DIRECT` when the file allows it, and `O_EXCL` when asked and `path` is a
/// block device (the kernel then refuses a device that is mounted or held by an array).
fn open(path: &Path, write: bool, exclusive: bool) -> io::Result<File> {
    let is_block = std::fs::metadata(path)?.file_type().is_block_device();
    let mut flags = 0;
    if exclusive && is_block {
        flags |= libc::O_EXCL;
    }
    let open = |flags| {
        OpenOptions::new()
            .read(true)
            .write(write)
            .custom_flags(flags)
            .open(path)
    };
    match open(flags | libc::O_DIRECT) {
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => open(flags),
        other => other,
    }
}

fn read_block(file: &File) -> io::Result<Box<Aligned>> {
    let mut block = Box::new(Aligned([0; SUPERBLOCK_SIZE]));
    match file.read_exact_at(&mut block.0, SUPERBLOCK_OFFSET) {
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "too small to hold a graid superblock (needs 8 KiB)",
        )),
        Err(e) => Err(e),
        Ok(()) => Ok(block),
    }
}

/// The superblock block of `path`, undecoded.
pub fn read_superblock(path: &Path) -> io::Result<Box<[u8; SUPERBLOCK_SIZE]>> {
    let file = open(path, false, false)?;
    Ok(Box::new(read_block(&file)?.0))
}

/// What `zero-superblock` found before zeroing.
#[derive(Debug)]
pub enum Found {
    /// A valid graid superblock.
    Graid(Box<Superblock>),
    /// A graid superblock (the magic matches) that does not decode.
    Damaged(SuperblockError),
    /// Something else; only zeroed with `--force`.
    Other(SuperblockError),
}

/// Result of [`zero_superblock`].
#[derive(Debug)]
pub enum Zeroed {
    /// The block was zeroed; it held this.
    Zeroed(Found),
    /// The block was already all zeroes: nothing written.
    AlreadyZero,
}

/// Overwrites the superblock block of `path` with zeroes if it holds a graid superblock (valid
/// or damaged), or anything at all when `force` is set. The device is opened with `O_EXCL`, so a
/// member of a running array or a mounted device is refused.
pub fn zero_superblock(path: &Path, force: bool) -> Result<Zeroed, CtlError> {
    let shown = path.display();
    let file = open(path, true, true).map_err(|e| match e.raw_os_error() {
        Some(libc::EBUSY) => CtlError::Failed(format!(
            "{shown} is in use (mounted, held open exclusively, or a member of a running \
             array); stop the array first"
        )),
        _ => CtlError::io(format!("opening {shown}"), e),
    })?;
    let block = read_block(&file).map_err(|e| CtlError::io(format!("reading {shown}"), e))?;
    if block.0.iter().all(|&b| b == 0) {
        return Ok(Zeroed::AlreadyZero);
    }
    let found = match decode(&block.0) {
        Ok(sb) => Found::Graid(Box::new(sb)),
        Err(e) if block.0.starts_with(&MAGIC) => Found::Damaged(e),
        Err(e) if force => Found::Other(e),
        Err(_) => {
            return Err(CtlError::Failed(format!(
                "{shown}: the block at 4 KiB holds no graid superblock (bad magic) and is not \
                 empty; refusing to overwrite it (use --force to zero it anyway)"
            )))
        }
    };
    let zeroes = Aligned([0; SUPERBLOCK_SIZE]);
    file.write_all_at(&zeroes.0, SUPERBLOCK_OFFSET)
        .and_then(|()| file.sync_all())
        .map_err(|e| CtlError::io(format!("writing {shown}"), e))?;
    Ok(Zeroed::Zeroed(found))
}

#[cfg(test)]
pub mod testutil {
    //! Temporary member images and sample superblocks for tests.

    use graid_engine::geometry::Level;
    use graid_engine::superblock::{
        encode, Area, ArrayName, HomeHost, Slot, Superblock, DEFAULT_DATA_OFFSET_SECTORS,
        MAX_SLOTS, RECOVERY_COMPLETE, SUPERBLOCK_SIZE,
    };
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicU32, Ordering};

    /// A file under the temp directory, removed on drop.
    pub struct TempFile(PathBuf);

    impl TempFile {
        pub fn new(contents: &[u8]) -> Self {
            static NEXT: AtomicU32 = AtomicU32::new(0);
            let path = std::env::temp_dir().join(format!(
                "graidctl-test-{}-{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::write(&path, contents).unwrap();
            Self(path)
        }

        pub fn path(&self) -> &Path {
            &self.0
        }

        pub fn str(&self) -> &str {
            self.0.to_str().unwrap()
        }
    }

    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    /// Member `role` of a 2-way RAID 1 named `name`, with `events` events.
    pub fn sample(name: &str, array_uuid: [u8; 16], role: u8, events: u64) -> Superblock {
        let mut slots = [Slot::Empty; MAX_SLOTS];
        slots[0] = Slot::Active { role: 0 };
        slots[1] = Slot::Active { role: 1 };
        Superblock {
            features_compat: 0,
            features_incompat: 0,
            array_uuid,
            array_name: ArrayName::new(name).unwrap(),
            homehost: HomeHost::EMPTY,
            created: 1_767_225_600,
            events,
            clean: true,
            resync_offset: RECOVERY_COMPLETE,
            level: Level::Raid1,
            chunk_sectors: 0,
            members: 2,
            member_uuid: [0x40 + role; 16],
            this_slot: u32::from(role),
            data_offset: DEFAULT_DATA_OFFSET_SECTORS,
            data_size: 1 << 20,
            recovery_offset: RECOVERY_COMPLETE,
            bitmap: Area::NONE,
            bitmap_region: 0,
            bitmap_events: 0,
            journal: Area::NONE,
            ppl: false,
            log_key: [0; 16],
            slots,
            reshape: None,
        }
    }

    pub fn block(sb: &Superblock) -> Box<[u8; SUPERBLOCK_SIZE]> {
        let mut block = Box::new([0u8; SUPERBLOCK_SIZE]);
        encode(sb, &mut block).unwrap();
        block
    }

    /// A 16 KiB member image with `block` at 4 KiB and `0xAA` in the first 4 KiB.
    pub fn image(block: &[u8; SUPERBLOCK_SIZE]) -> TempFile {
        let mut bytes = vec![0xAA; 4096];
        bytes.extend_from_slice(block);
        bytes.extend_from_slice(&[0x55; 8192]);
        TempFile::new(&bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::testutil::*;
    use super::*;

    #[test]
    fn reads_the_block_at_4k() {
        let sb = sample("r", [1; 16], 0, 3);
        let file = image(&block(&sb));
        let read = read_superblock(file.path()).unwrap();
        assert_eq!(decode(&read[..]), Ok(sb));
    }

    #[test]
    fn short_files_are_too_small() {
        let file = TempFile::new(&[0; 6000]);
        let err = read_superblock(file.path()).unwrap_err();
        assert!(err.to_string().contains("too small"), "{err}");
    }

    fn contents(file: &TempFile) -> Vec<u8> {
        std::fs::read(file.path()).unwrap()
    }

    #[test]
    fn zeroes_a_graid_superblock_and_nothing_else() {
        let file = image(&block(&sample("z", [2; 16], 1, 9)));
        match zero_superblock(file.path(), false).unwrap() {
            Zeroed::Zeroed(Found::Graid(sb)) => assert_eq!(sb.array_name.as_str(), "z"),
            other => panic!("{other:?}"),
        }
        let bytes = contents(&file);
        assert!(bytes[..4096].iter().all(|&b| b == 0xAA));
        assert!(bytes[4096..8192].iter().all(|&b| b == 0));
        assert!(bytes[8192..].iter().all(|&b| b == 0x55));
        // Second time round there is nothing left to do.
        assert!(matches!(
            zero_superblock(file.path(), false).unwrap(),
            Zeroed::AlreadyZero
        ));
    }

    #[test]
    fn damaged_graid_superblocks_are_zeroed() {
        let mut damaged = block(&sample("d", [3; 16], 0, 1));
        damaged[0x200] ^= 1;
        let file = image(&damaged);
        match zero_superblock(file.path(), false).unwrap() {
            Zeroed::Zeroed(Found::Damaged(SuperblockError::BadChecksum { .. })) => {}
            other => panic!("{other:?}"),
        }
        assert!(contents(&file)[4096..8192].iter().all(|&b| b == 0));
    }

    #[test]
    fn foreign_data_needs_force() {
        let file = image(&[0x33; SUPERBLOCK_SIZE]);
        let err = zero_superblock(file.path(), false).unwrap_err();
        assert!(err.to_string().contains("use --force"), "{err}");
        assert_eq!(err.exit_code(), crate::error::EXIT_FAILURE);
        assert!(contents(&file)[4096..8192].iter().all(|&b| b == 0x33));
        match zero_superblock(file.path(), true).unwrap() {
            Zeroed::Zeroed(Found::Other(SuperblockError::BadMagic)) => {}
            other => panic!("{other:?}"),
        }
        assert!(contents(&file)[4096..8192].iter().all(|&b| b == 0));
    }

    #[test]
    fn missing_files_fail_with_the_path() {
        let err = zero_superblock(Path::new("/nonexistent/member"), true).unwrap_err();
        assert!(
            err.to_string().starts_with("opening /nonexistent/member"),
            "{err}"
        );
    }
}
