//! `graidctl create`: validate locally, then GRAID_IOC_CREATE.

use crate::control::ControlDevice;
use crate::errno::{ioctl_error, Op};
use crate::error::CtlError;
use crate::member::{resolve_members, System};
use crate::output::{array_device, json, ArrayView};
use crate::signature;
use crate::size::{format_sectors, DEFAULT_CHUNK_BYTES, SECTOR_BYTES};
use crate::uuid;
use clap::Args;
use graid_abi::{
    GraidCreate, GraidMember, GRAID_CREATE_ASSUME_CLEAN, GRAID_CREATE_LAYOUT,
    GRAID_CREATE_NO_BITMAP, GRAID_CREATE_NO_PPL, GRAID_CREATE_WRITE_ZEROES, GRAID_LEVEL_RAID0,
    GRAID_LEVEL_RAID1, GRAID_LEVEL_RAID10, GRAID_LEVEL_RAID5, GRAID_LEVEL_RAID6, GRAID_MAX_ARRAYS,
    GRAID_MAX_MEMBERS, GRAID_NAME_LEN,
};
use graid_engine::geometry::ParityLayout;
use graid_engine::superblock::{decode, ArrayName, NameError};

/// Fewest members `create` accepts.
pub const MIN_MEMBERS: usize = 2;

#[derive(Args, Debug)]
pub struct CreateArgs {
    /// Array name (at most 31 bytes of UTF-8, no '/' or control characters); becomes
    /// /dev/graid/NAME.
    #[arg(value_parser = parse_name)]
    pub name: String,
    /// RAID level: 0 (raid0, stripe), 1 (raid1, mirror), 10 (raid10), 5 (raid5) or 6 (raid6);
    /// RAID 5/6 use md's default left-symmetric layout.
    #[arg(short, long, value_parser = parse_level)]
    pub level: u32,
    /// Parity layout for RAID 5/6, as mdadm names them: left-symmetric (ls, the default),
    /// left-asymmetric (la), right-symmetric (rs) or right-asymmetric (ra).
    #[arg(long, value_parser = parse_layout, value_name = "LAYOUT")]
    pub layout: Option<ParityLayout>,
    /// Chunk size for RAID 0/10/5/6: a power of two from 4K to 1M, K/M suffix, a bare number
    /// is in KiB [default: 512K]. Not valid for RAID 1.
    #[arg(short, long, value_parser = crate::size::parse_chunk, value_name = "SIZE")]
    pub chunk: Option<u32>,
    /// Array UUID (32 hex digits, dashes or colons allowed) [default: random, picked by the
    /// module].
    #[arg(long, value_parser = uuid::parse)]
    pub uuid: Option<[u8; 16]>,
    /// Create even if a member already carries a graid superblock (its array is destroyed) or
    /// another signature: a filesystem, a partition table, an LVM physical volume, an md
    /// member (what libblkid finds; all are destroyed). A device in use (mounted, a swap, held
    /// by md or dm) is refused even so.
    #[arg(short, long)]
    pub force: bool,
    /// Take the mirrors as in sync without a resync: only if they hold identical data (new
    /// drives that read back zeroes, say). Without this or --write-zeroes, mirrors start
    /// "resync pending" and reads use one copy until a resync.
    #[arg(long, conflicts_with = "write_zeroes")]
    pub assume_clean: bool,
    /// Zero every member's data area with the drives' own zeroing command (NVMe Write Zeroes),
    /// so the mirrors start in sync; refused by a member that has none.
    #[arg(long)]
    pub write_zeroes: bool,
    /// Write-intent bitmap (mdadm's --bitmap): "internal", in the members' reserved area (the
    /// default for RAID 1, 10, 5 and 6), or "none". With it, a crash resyncs only the regions
    /// being written, and a member that comes back (re-add) gets only what changed while it
    /// was away; it costs one bitmap write when a region is first written after a quiet spell.
    #[arg(long, value_enum, value_name = "KIND")]
    pub bitmap: Option<BitmapKind>,
    /// The part of the array one bitmap bit covers (mdadm's --bitmap-chunk): a power of two
    /// from 4K, K/M/G suffix, a bare number is in KiB [default: 64M, larger where the array
    /// needs]. On RAID 5/6 it counts member space: each stripe row of chunks.
    #[arg(long, value_parser = crate::size::parse_bitmap_chunk, value_name = "SIZE")]
    pub bitmap_chunk: Option<u64>,
    /// RAID 5/6 (mdadm's --consistency-policy): "ppl", a partial parity log in the members'
    /// reserved area (the default), so a crash while degraded loses nothing the writes in flight
    /// did not touch, at the cost of one small log write per partial-stripe write; or
    /// "resync", none: after a crash the array then does not start degraded.
    #[arg(long, value_enum, value_name = "POLICY")]
    pub consistency_policy: Option<ConsistencyPolicy>,
    /// The host the array belongs to, recorded in its superblocks: boot-time assembly
    /// (assemble --incremental, --scan) starts by itself only arrays of this host or of none.
    /// "<none>" records none [default: HOMEHOST in /etc/graid/graid.conf, else the system's
    /// host name].
    #[arg(long, value_parser = crate::homehost::parse_arg, value_name = "HOST")]
    pub homehost: Option<String>,
    /// Member block devices, in role order.
    #[arg(value_name = "MEMBER", required = true)]
    pub members: Vec<String>,
}

/// `--consistency-policy`'s choices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ConsistencyPolicy {
    Ppl,
    Resync,
}

/// `--bitmap`'s choices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BitmapKind {
    Internal,
    None,
}

/// Parses `--level`: md's numbers and mdadm's names for them.
pub fn parse_level(text: &str) -> Result<u32, String> {
    match text.to_ascii_lowercase().as_str() {
        "0" | "raid0" | "stripe" => Ok(GRAID_LEVEL_RAID0),
        "1" | "raid1" | "mirror" => Ok(GRAID_LEVEL_RAID1),
        "10" | "raid10" => Ok(GRAID_LEVEL_RAID10),
        "5" | "raid5" => Ok(GRAID_LEVEL_RAID5),
        "6" | "raid6" => Ok(GRAID_LEVEL_RAID6),
        _ => Err(format!(
            "unsupported RAID level '{text}' (graid supports 0, 1, 10, 5 and 6)"
        )),
    }
}

/// Parses `--layout`: mdadm's names for md's RAID 5/6 layouts, long or short.
pub fn parse_layout(text: &str) -> Result<ParityLayout, String> {
    let text = text.to_ascii_lowercase();
    ParityLayout::ALL
        .into_iter()
        .find(|l| {
            let short: String = l
                .name()
                .split('-')
                .filter_map(|w| w.chars().next())
                .collect();
            text == l.name() || text == short
        })
        .ok_or_else(|| {
            format!(
                "unknown layout '{text}' (left-symmetric, left-asymmetric, right-symmetric, \
                 right-asymmetric, or ls, la, rs, ra)"
            )
        })
}

/// Checks an array name the way the module and the superblock codec will.
pub fn parse_name(name: &str) -> Result<String, String> {
    let max = GRAID_NAME_LEN - 1;
    if name.is_empty() {
        return Err("the array name must not be empty".to_owned());
    }
    if name.len() > max {
        return Err(format!(
            "the array name is {} bytes long, at most {max} fit",
            name.len()
        ));
    }
    match ArrayName::new(name) {
        Ok(_) => Ok(name.to_owned()),
        Err(NameError::ForbiddenChar) => {
            Err("the array name must not contain '/' or control characters".to_owned())
        }
        Err(e) => Err(format!("the array name {e}")),
    }
}

/// Cross-field checks clap cannot do: returns the chunk size in sectors to send.
pub fn check_shape(level: u32, chunk: Option<u32>, members: usize) -> Result<u32, CtlError> {
    let level_name = crate::output::level_name(level);
    let min = match level {
        GRAID_LEVEL_RAID5 => 3,
        GRAID_LEVEL_RAID6 => 4,
        _ => MIN_MEMBERS,
    };
    if !(min..=GRAID_MAX_MEMBERS).contains(&members) {
        return Err(CtlError::Usage(format!(
            "{level_name} needs {min} to {GRAID_MAX_MEMBERS} members, {members} given"
        )));
    }
    match (level, chunk) {
        (GRAID_LEVEL_RAID1, Some(_)) => Err(CtlError::Usage(
            "--chunk is not valid for raid1: mirrors have no chunks".to_owned(),
        )),
        (GRAID_LEVEL_RAID1, None) => Ok(0),
        (_, Some(chunk)) => Ok(chunk),
        (_, None) => Ok((DEFAULT_CHUNK_BYTES / SECTOR_BYTES) as u32),
    }
}

/// Refuses members that already belong to a graid array, unless forced.
fn check_not_in_use(sys: &dyn System, members: &[String]) -> Result<(), CtlError> {
    for path in members {
        // Unreadable members are the module's to refuse, with its own reason.
        let Ok(block) = sys.read_superblock(path) else {
            continue;
        };
        if let Ok(sb) = decode(&block[..]) {
            return Err(CtlError::Failed(format!(
                "member {path} already belongs to array '{}' ({}); use --force to destroy \
                 that array, or graidctl zero-superblock {path} first",
                sb.array_name.as_str(),
                uuid::format(&sb.array_uuid)
            )));
        }
    }
    Ok(())
}

/// The human summary line of a new or assembled array, e.g. `RAID10, 4 members, chunk 512 KiB`.
pub fn shape_summary(view: &ArrayView) -> String {
    let mut text = format!(
        "{}, {} members",
        view.level.to_uppercase(),
        view.members.len()
    );
    if view.chunk_sectors != 0 {
        text.push_str(&format!(
            ", chunk {}",
            format_sectors(u64::from(view.chunk_sectors))
        ));
    }
    text
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Checks everything that can be checked without the module and builds the request.
pub fn prepare(sys: &dyn System, args: &CreateArgs) -> Result<GraidCreate, CtlError> {
    let chunk_sectors = check_shape(args.level, args.chunk, args.members.len())?;
    let parity = matches!(args.level, GRAID_LEVEL_RAID5 | GRAID_LEVEL_RAID6);
    if args.layout.is_some() && !parity {
        return Err(CtlError::Usage(format!(
            "--layout is for raid5 and raid6, not {}",
            crate::output::level_name(args.level)
        )));
    }
    let (bitmap_flag, bitmap_region_sectors) = bitmap_request(args)?;
    let ppl_flag = match args.consistency_policy {
        Some(ConsistencyPolicy::Ppl) if !parity => {
            return Err(CtlError::Usage(format!(
                "--consistency-policy ppl is for raid5 and raid6, not {}",
                crate::output::level_name(args.level)
            )))
        }
        Some(ConsistencyPolicy::Resync) if parity => GRAID_CREATE_NO_PPL,
        _ => 0,
    };
    let rdevs = resolve_members(sys, &args.members)?;
    if !args.force {
        check_not_in_use(sys, &args.members)?;
    }
    let mut req = GraidCreate {
        level: args.level,
        chunk_sectors,
        nr_members: rdevs.len() as u32,
        flags: if args.assume_clean {
            GRAID_CREATE_ASSUME_CLEAN
        } else if args.write_zeroes {
            GRAID_CREATE_WRITE_ZEROES
        } else {
            0
        } | if args.layout.is_some() {
            GRAID_CREATE_LAYOUT
        } else {
            0
        } | bitmap_flag
            | ppl_flag,
        name: [0; GRAID_NAME_LEN],
        uuid: args.uuid.unwrap_or([0; 16]),
        ctime: now(),
        members: [GraidMember::default(); GRAID_MAX_MEMBERS],
        index: 0,
        layout: args.layout.map_or(0, ParityLayout::code),
        bitmap_region_sectors,
        homehost: crate::homehost::field(args.homehost.as_deref()),
    };
    req.name[..args.name.len()].copy_from_slice(args.name.as_bytes());
    for (slot, rdev) in req.members.iter_mut().zip(&rdevs) {
        *slot = GraidMember {
            major: rdev.major,
            minor: rdev.minor,
        };
    }
    Ok(req)
}

/// The bitmap flag and region size CREATE sends for `--bitmap` and `--bitmap-chunk`.
fn bitmap_request(args: &CreateArgs) -> Result<(u32, u64), CtlError> {
    let raid0 = args.level == GRAID_LEVEL_RAID0;
    match (args.bitmap, args.bitmap_chunk) {
        (Some(BitmapKind::None), Some(_)) => Err(CtlError::Usage(
            "--bitmap-chunk needs a bitmap, not --bitmap none".into(),
        )),
        (Some(BitmapKind::Internal), _) | (_, Some(_)) if raid0 => Err(CtlError::Usage(
            "raid0 has no write-intent bitmap (nothing to resync)".into(),
        )),
        (Some(BitmapKind::None), None) => Ok((GRAID_CREATE_NO_BITMAP, 0)),
        (_, chunk) => Ok((0, chunk.unwrap_or(0))),
    }
}

/// Sends a request made by [`prepare`] and describes the new array.
pub fn submit(
    ctl: &dyn ControlDevice,
    sys: &dyn System,
    args: &CreateArgs,
    mut req: GraidCreate,
    json_out: bool,
) -> Result<String, CtlError> {
    signature::check_devices(
        sys,
        &args.members,
        &signature::held_by_arrays(ctl),
        args.force,
        "creating an array on",
    )?;
    ctl.create(&mut req).map_err(|e| {
        // The module also answers ENOSPC when every array index is taken.
        let full = e.raw_os_error() == Some(libc::ENOSPC)
            && ctl
                .list()
                .is_ok_and(|l| l.count as usize >= GRAID_MAX_ARRAYS);
        if full {
            CtlError::Failed(format!(
                "cannot create array '{}': {GRAID_MAX_ARRAYS} arrays are running, the most \
                 graid supports (ENOSPC)",
                args.name
            ))
        } else {
            ioctl_error(Op::Create { name: &args.name }, &e)
        }
    })?;
    let device = array_device(req.index);
    let detail = ctl.detail(req.index).map_err(|e| {
        CtlError::Failed(format!(
            "array '{}' was created as {device}, but describing it failed: {}",
            args.name,
            ioctl_error(Op::Detail { array: &device }, &e)
        ))
    })?;
    let view = ArrayView::new(&detail, sys);
    Ok(if json_out {
        json(&view)
    } else {
        format!(
            "graidctl: array {} created as {} ({}){}\n",
            args.name,
            view.device,
            shape_summary(&view),
            mirror_sync_note(args, &view)
        )
    })
}

/// How a new array's mirrors start, for the create message (nothing for RAID 0).
fn mirror_sync_note(args: &CreateArgs, view: &ArrayView) -> &'static str {
    if view.level == "raid0" {
        ""
    } else if args.write_zeroes {
        "; mirrors in sync (zeroed)"
    } else if args.assume_clean {
        "; mirrors taken as in sync (--assume-clean)"
    } else if view.resync_pending {
        "; copies not in sync yet: resyncing"
    } else {
        ""
    }
}

/// [`prepare`] and [`submit`].
#[cfg(test)]
pub fn run(
    ctl: &dyn ControlDevice,
    sys: &dyn System,
    args: &CreateArgs,
    json_out: bool,
) -> Result<String, CtlError> {
    submit(ctl, sys, args, prepare(sys, args)?, json_out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::fake::{array, FakeControl};
    use crate::error::{EXIT_FAILURE, EXIT_USAGE};
    use crate::member::fake::FakeSystem;
    use crate::sbio::testutil::{block, sample};

    fn args(level: u32, chunk: Option<u32>, members: &[&str]) -> CreateArgs {
        CreateArgs {
            name: "data".into(),
            level,
            chunk,
            layout: None,
            uuid: None,
            force: false,
            assume_clean: false,
            write_zeroes: false,
            bitmap: None,
            bitmap_chunk: None,
            consistency_policy: None,
            homehost: None,
            members: members.iter().map(|m| format!("/dev/{m}")).collect(),
        }
    }

    fn disks() -> FakeSystem {
        FakeSystem::with_disks(&["nvme0n1", "nvme1n1", "nvme2n1", "nvme3n1"])
    }

    #[test]
    fn levels_have_md_numbers_and_mdadm_names() {
        assert_eq!(parse_level("0"), Ok(0));
        assert_eq!(parse_level("stripe"), Ok(0));
        assert_eq!(parse_level("RAID1"), Ok(1));
        assert_eq!(parse_level("mirror"), Ok(1));
        assert_eq!(parse_level("raid10"), Ok(10));
        assert_eq!(parse_level("5"), Ok(5));
        assert_eq!(parse_level("RAID6"), Ok(6));
        let err = parse_level("4").unwrap_err();
        assert!(err.contains("0, 1, 10, 5 and 6"), "{err}");
    }

    #[test]
    fn the_home_host_is_sent_nul_padded() {
        let sys = FakeSystem::with_disks(&["nvme0n1", "nvme1n1"]);
        let mut a = args(1, None, &["nvme0n1", "nvme1n1"]);
        a.homehost = Some("node-9".to_owned());
        let req = prepare(&sys, &a).unwrap();
        assert_eq!(&req.homehost[..7], b"node-9\0");
        a.homehost = Some("<none>".to_owned());
        assert_eq!(prepare(&sys, &a).unwrap().homehost, [0; 64]);
    }

    #[test]
    fn a_layout_is_sent_with_its_flag_and_only_for_parity_levels() {
        let sys = FakeSystem::with_disks(&["nvme0n1", "nvme1n1", "nvme2n1", "nvme3n1"]);
        let mut a = args(6, None, &["nvme0n1", "nvme1n1", "nvme2n1", "nvme3n1"]);
        a.layout = Some(ParityLayout::LeftAsymmetric);
        a.write_zeroes = true;
        let req = prepare(&sys, &a).unwrap();
        assert_eq!(req.flags, GRAID_CREATE_WRITE_ZEROES | GRAID_CREATE_LAYOUT);
        assert_eq!(req.layout, 0);
        a.layout = Some(ParityLayout::RightSymmetric);
        assert_eq!(prepare(&sys, &a).unwrap().layout, 3);
        a.level = 10;
        let err = prepare(&sys, &a).unwrap_err();
        assert!(
            err.to_string().contains("--layout is for raid5 and raid6"),
            "{err}"
        );
    }

    #[test]
    fn parity_arrays_get_a_partial_parity_log_unless_asked_not_to() {
        let sys = disks();
        let mut a = args(5, None, &["nvme0n1", "nvme1n1", "nvme2n1"]);
        assert_eq!(prepare(&sys, &a).unwrap().flags & GRAID_CREATE_NO_PPL, 0);
        a.consistency_policy = Some(ConsistencyPolicy::Resync);
        assert_eq!(prepare(&sys, &a).unwrap().flags, GRAID_CREATE_NO_PPL);
        a.consistency_policy = Some(ConsistencyPolicy::Ppl);
        assert_eq!(prepare(&sys, &a).unwrap().flags, 0);
        let mut mirror = args(1, None, &["nvme0n1", "nvme1n1"]);
        mirror.consistency_policy = Some(ConsistencyPolicy::Resync);
        assert_eq!(
            prepare(&sys, &mirror).unwrap().flags,
            0,
            "nothing to turn off"
        );
        mirror.consistency_policy = Some(ConsistencyPolicy::Ppl);
        let err = prepare(&sys, &mirror).unwrap_err();
        assert_eq!(err.exit_code(), EXIT_USAGE);
        assert!(
            err.to_string()
                .contains("ppl is for raid5 and raid6, not raid1"),
            "{err}"
        );
    }

    #[test]
    fn the_bitmap_is_internal_by_default_and_none_on_request() {
        let sys = disks();
        let mut a = args(1, None, &["nvme0n1", "nvme1n1"]);
        let req = prepare(&sys, &a).unwrap();
        assert_eq!((req.flags, req.bitmap_region_sectors), (0, 0));
        a.bitmap_chunk = Some(1 << 14);
        assert_eq!(prepare(&sys, &a).unwrap().bitmap_region_sectors, 1 << 14);
        a.bitmap = Some(BitmapKind::None);
        let err = prepare(&sys, &a).unwrap_err();
        assert_eq!(err.exit_code(), EXIT_USAGE);
        assert!(
            err.to_string().contains("--bitmap-chunk needs a bitmap"),
            "{err}"
        );
        a.bitmap_chunk = None;
        let req = prepare(&sys, &a).unwrap();
        assert_eq!(
            (req.flags, req.bitmap_region_sectors),
            (GRAID_CREATE_NO_BITMAP, 0)
        );
        let mut stripe = args(0, None, &["nvme0n1", "nvme1n1"]);
        assert_eq!(prepare(&sys, &stripe).unwrap().flags, 0);
        stripe.bitmap = Some(BitmapKind::Internal);
        let err = prepare(&sys, &stripe).unwrap_err();
        assert!(
            err.to_string().contains("raid0 has no write-intent bitmap"),
            "{err}"
        );
        assert_eq!(crate::size::parse_bitmap_chunk("64M"), Ok(1 << 17));
        assert_eq!(crate::size::parse_bitmap_chunk("128"), Ok(256));
        assert!(crate::size::parse_bitmap_chunk("2K").is_err());
        assert!(crate::size::parse_bitmap_chunk("3M").is_err());
    }

    #[test]
    fn layouts_have_mdadm_names() {
        assert_eq!(
            parse_layout("left-symmetric"),
            Ok(ParityLayout::LeftSymmetric)
        );
        assert_eq!(parse_layout("LA"), Ok(ParityLayout::LeftAsymmetric));
        assert_eq!(parse_layout("rs"), Ok(ParityLayout::RightSymmetric));
        assert_eq!(
            parse_layout("right-asymmetric"),
            Ok(ParityLayout::RightAsymmetric)
        );
        assert!(parse_layout("parity-first")
            .unwrap_err()
            .contains("unknown layout"));
    }

    #[test]
    fn names_are_checked_like_the_module_does() {
        assert_eq!(parse_name("data-1"), Ok("data-1".into()));
        assert_eq!(parse_name(&"x".repeat(31)), Ok("x".repeat(31)));
        assert!(parse_name(&"x".repeat(32))
            .unwrap_err()
            .contains("32 bytes"));
        // 30 ASCII + a 2-byte character = 32 bytes.
        let long = format!("{}é", "x".repeat(30));
        assert!(parse_name(&long).unwrap_err().contains("at most 31"));
        assert!(parse_name("").unwrap_err().contains("empty"));
        for bad in ["a/b", "tab\there", "del\u{7f}", "c1\u{85}"] {
            assert!(parse_name(bad).unwrap_err().contains("'/'"), "{bad:?}");
        }
    }

    #[test]
    fn shape_checks_count_and_chunk() {
        assert_eq!(check_shape(0, None, 2).unwrap(), 1024);
        assert_eq!(check_shape(10, Some(128), 4).unwrap(), 128);
        assert_eq!(check_shape(1, None, 32).unwrap(), 0);
        let err = check_shape(1, Some(128), 2).unwrap_err();
        assert_eq!(err.exit_code(), EXIT_USAGE);
        assert!(err.to_string().contains("--chunk is not valid for raid1"));
        let err = check_shape(10, None, 1).unwrap_err();
        assert_eq!(err.to_string(), "raid10 needs 2 to 32 members, 1 given");
        assert!(check_shape(0, None, 33).is_err());
        let err = check_shape(5, None, 2).unwrap_err();
        assert!(
            err.to_string().contains("raid5 needs 3 to 32 members"),
            "{err}"
        );
        let err = check_shape(6, Some(128), 3).unwrap_err();
        assert!(
            err.to_string().contains("raid6 needs 4 to 32 members"),
            "{err}"
        );
        assert_eq!(check_shape(6, Some(128), 4).unwrap(), 128);
    }

    #[test]
    fn sends_members_in_role_order_and_reports_the_new_array() {
        let ctl = FakeControl::with(vec![array(0, "old", 1, &[(8, 0, 0), (8, 16, 0)])]);
        let sys = disks();
        let a = args(10, None, &["nvme2n1", "nvme0n1", "nvme1n1", "nvme3n1"]);
        let out = run(&ctl, &sys, &a, false).unwrap();
        assert_eq!(
            out,
            "graidctl: array data created as /dev/graid1 (RAID10, 4 members, chunk 512 KiB)\n"
        );
        let sent = ctl.created.borrow()[0];
        assert_eq!(sent.level, 10);
        assert_eq!(sent.chunk_sectors, 1024);
        assert_eq!(sent.nr_members, 4);
        assert_eq!(&sent.name[..5], b"data\0");
        assert_eq!(sent.uuid, [0; 16], "the module picks the UUID");
        assert!(sent.ctime > 1_700_000_000);
        let minors: Vec<u32> = sent.members[..4].iter().map(|m| m.minor).collect();
        assert_eq!(minors, [2, 0, 1, 3]);
        assert!(sent.members[4..]
            .iter()
            .all(|m| *m == GraidMember::default()));
        assert_eq!((sent.flags, sent.layout), (0, 0));
    }

    #[test]
    fn raid1_has_no_chunk_and_json_is_the_detail() {
        let ctl = FakeControl::with(vec![]);
        let mut a = args(1, None, &["nvme0n1", "nvme1n1"]);
        a.uuid = Some([0xab; 16]);
        let out = run(&ctl, &disks(), &a, true).unwrap();
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["device"], "/dev/graid0");
        assert_eq!(v["level"], "raid1");
        assert_eq!(v["chunk_sectors"], 0);
        assert_eq!(v["uuid"], "abababab-abab-abab-abab-abababababab");
        assert_eq!(v["members"][1]["device"], "/dev/nvme1n1");
        let human = run(
            &FakeControl::with(vec![]),
            &disks(),
            &args(1, None, &["nvme0n1", "nvme1n1"]),
            false,
        )
        .unwrap();
        assert_eq!(
            human,
            "graidctl: array data created as /dev/graid0 (RAID1, 2 members)\n"
        );
    }

    #[test]
    fn local_errors_name_the_member_and_send_nothing() {
        let ctl = FakeControl::with(vec![]);
        let err = run(&ctl, &disks(), &args(0, None, &["nvme0n1", "sdq"]), false).unwrap_err();
        assert_eq!(err.to_string(), "member /dev/sdq: no such device");
        let err = run(
            &ctl,
            &disks(),
            &args(0, None, &["nvme0n1", "nvme0n1"]),
            false,
        )
        .unwrap_err();
        assert_eq!(err.exit_code(), EXIT_USAGE);
        assert!(ctl.created.borrow().is_empty());
    }

    #[test]
    fn members_of_another_array_need_force() {
        let ctl = FakeControl::with(vec![]);
        let mut sys = disks();
        sys.devices[1].2 = Some(block(&sample("old", [7; 16], 1, 4)));
        let mut a = args(0, None, &["nvme0n1", "nvme1n1"]);
        let err = run(&ctl, &sys, &a, false).unwrap_err();
        assert_eq!(err.exit_code(), EXIT_FAILURE);
        assert_eq!(
            err.to_string(),
            "member /dev/nvme1n1 already belongs to array 'old' \
             (07070707-0707-0707-0707-070707070707); use --force to destroy that array, or \
             graidctl zero-superblock /dev/nvme1n1 first"
        );
        assert!(ctl.created.borrow().is_empty());
        a.force = true;
        run(&ctl, &sys, &a, false).unwrap();
        assert_eq!(ctl.created.borrow().len(), 1);
    }

    #[test]
    fn enospc_is_a_full_array_table_or_a_small_member() {
        let ctl = FakeControl::with(vec![]);
        ctl.fail.borrow_mut().push(("create", libc::ENOSPC));
        let a = args(0, None, &["nvme0n1", "nvme1n1"]);
        let err = run(&ctl, &disks(), &a, false).unwrap_err();
        assert!(err.to_string().contains("a member is too small"), "{err}");
        let full: Vec<_> = (0..GRAID_MAX_ARRAYS as u32)
            .map(|i| array(i, &format!("a{i}"), 1, &[(8, 0, 0), (8, 16, 0)]))
            .collect();
        *ctl.arrays.borrow_mut() = full;
        let err = run(&ctl, &disks(), &a, false).unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot create array 'data': 64 arrays are running, the most graid supports (ENOSPC)"
        );
    }

    #[test]
    fn module_errors_are_explained() {
        let ctl = FakeControl::with(vec![]);
        ctl.fail.borrow_mut().push(("create", libc::EEXIST));
        let err = run(
            &ctl,
            &disks(),
            &args(0, None, &["nvme0n1", "nvme1n1"]),
            false,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot create array 'data': an array named 'data' (or with this UUID) exists \
             (EEXIST)"
        );
    }
}
