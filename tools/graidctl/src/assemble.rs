//! `graidctl assemble`: start an array from its members (GRAID_IOC_ASSEMBLE), either the members
//! given or, with `--scan`, every array whose members are found among the system's block
//! devices.

use crate::array_ref::{self, running_arrays, ArrayRef};
use crate::control::ControlDevice;
use crate::errno::{ioctl_error, Op};
use crate::error::CtlError;
use crate::homehost::Policy;
use crate::member::{describe, resolve_members, Rdev, System};
use crate::output::{array_device, json, present_members, ArrayView};
use crate::uuid;
use clap::Args;
use graid_abi::{
    GraidAssemble, GraidMember, GRAID_ASSEMBLE_INDEX, GRAID_ASSEMBLE_RUN, GRAID_MAX_ARRAYS,
    GRAID_MAX_MEMBERS,
};
use graid_engine::assembly::{member_status, pick_freshest, MemberStatus};
use graid_engine::superblock::{decode, ArrayName, Superblock};
use serde::Serialize;

#[derive(Args, Debug)]
pub struct AssembleArgs {
    /// Find the members of every graid array among the block devices in /sys/class/block and
    /// assemble each array that is not running yet.
    #[arg(short, long, conflicts_with = "members")]
    pub scan: bool,
    /// With --scan: only the array with this UUID (the last-resort timer's start of one
    /// array).
    #[arg(long, requires = "scan")]
    pub uuid: Option<String>,
    /// With --scan: also start arrays whose superblocks name another host (see create
    /// --homehost); without it they are left alone, as at boot.
    #[arg(long, requires = "scan")]
    pub any_host: bool,
    /// A member has appeared (udev runs this for each): start its array once every role has
    /// a current member; until then do nothing (graid-last-resort@UUID.timer starts it
    /// degraded later). Devices with no graid superblock are ignored.
    #[arg(short = 'I', long, value_name = "DEVICE", conflicts_with_all = ["scan", "members"])]
    pub incremental: Option<String>,
    /// With --incremental: print udev properties (GRAID_INCREMENTAL=STATUS and, for a member,
    /// GRAID_LAST_RESORT_TIMER=UNIT) for udev's IMPORT{program} instead of text.
    #[arg(long, requires = "incremental", conflicts_with = "json")]
    pub export: bool,
    /// The array's member block devices, in any order; first, optionally, the array as
    /// mdadm users type it (NAME or /dev/graid/NAME: the members must belong to that array;
    /// /dev/graidN: start it as that device).
    #[arg(value_name = "MEMBER", required_unless_present_any = ["scan", "incremental"])]
    pub members: Vec<String>,
    /// Start the array even if some members are missing, as long as no data is lost (degraded;
    /// mdadm's --run). Without it an array with missing members is refused and they are named.
    #[arg(short = 'R', long)]
    pub run: bool,
}

/// The array the members are to form, when given before them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// Its name: every member must carry it.
    Name(String),
    /// Start it as `/dev/graidN`.
    Index(u32),
}

/// What [`prepare`] checked: the member devices, their paths, and the target array.
#[derive(Debug, Default)]
pub struct Prepared {
    rdevs: Vec<Rdev>,
    paths: Vec<String>,
    target: Option<Target>,
}

/// Splits off a leading ARRAY: an argument that is no block device but names an array
/// (`NAME`, `/dev/graid/NAME`, `/dev/graidN`, `graidN`), followed by at least one member.
fn split_target<'a>(
    sys: &dyn System,
    args: &'a [String],
) -> Result<(Option<Target>, &'a [String]), CtlError> {
    let Some((first, rest)) = args.split_first() else {
        return Ok((None, args));
    };
    if rest.is_empty() || sys.block_rdev(first).is_ok() {
        return Ok((None, args));
    }
    let target = match array_ref::parse(first)? {
        ArrayRef::Device(index) | ArrayRef::Bare { index, .. } => Target::Index(index),
        ArrayRef::Name(name) => {
            ArrayName::new(&name).map_err(|e| {
                CtlError::Usage(format!(
                    "'{first}' is neither a member device nor an array name: {e}"
                ))
            })?;
            Target::Name(name)
        }
        // A path that is no block device: reported as a member.
        ArrayRef::Path(_) => return Ok((None, args)),
    };
    Ok((Some(target), rest))
}

/// Checks the members given on the command line without the module (none with `--scan`).
pub fn prepare(sys: &dyn System, args: &AssembleArgs) -> Result<Prepared, CtlError> {
    // clap lets `requires` pass when the required arg conflicts with one given (--scan, members).
    if args.export && args.incremental.is_none() {
        return Err(CtlError::Usage(
            "--export goes with --incremental DEVICE only".to_owned(),
        ));
    }
    if args.scan || args.incremental.is_some() {
        return Ok(Prepared::default());
    }
    let (target, members) = split_target(sys, &args.members)?;
    if members.len() > GRAID_MAX_MEMBERS {
        return Err(CtlError::Usage(format!(
            "an array has at most {GRAID_MAX_MEMBERS} members, {} given",
            members.len()
        )));
    }
    if let Some(Target::Index(index)) = target {
        if index as usize >= GRAID_MAX_ARRAYS {
            return Err(CtlError::Usage(format!(
                "/dev/graid{index}: array devices go up to /dev/graid{}",
                GRAID_MAX_ARRAYS - 1
            )));
        }
    }
    if let Some(Target::Name(name)) = &target {
        check_names(sys, members, name)?;
    }
    Ok(Prepared {
        rdevs: resolve_members(sys, members)?,
        paths: members.to_vec(),
        target,
    })
}

/// Refuses members whose superblock names another array than `name` (a member without a
/// readable superblock is left to the module, which says what is wrong with it).
fn check_names(sys: &dyn System, members: &[String], name: &str) -> Result<(), CtlError> {
    for path in members {
        let Some(sb) = sys
            .read_superblock(path)
            .ok()
            .and_then(|block| decode(&block[..]).ok())
        else {
            continue;
        };
        let theirs = sb.array_name.as_str();
        if theirs != name {
            return Err(CtlError::Failed(format!(
                "cannot assemble '{name}': member {path} belongs to array '{theirs}' ({}); \
                 nothing was assembled",
                uuid::format(&sb.array_uuid)
            )));
        }
    }
    Ok(())
}

/// Where `--scan` and `--incremental` serialise: udev starts one `--incremental` per member
/// as members appear, often together, and the last-resort timer's `--scan` may run beside
/// them; each decides from what is running, so they must take turns.
const ASSEMBLE_LOCK: &str = "/run/graid/assemble.lock";

/// Takes [`ASSEMBLE_LOCK`] for `--scan` and `--incremental` (held until the file is dropped);
/// assembling named members needs no turn.
pub fn take_turn(args: &AssembleArgs) -> Result<Option<std::fs::File>, CtlError> {
    use std::os::fd::AsRawFd;
    if !args.scan && args.incremental.is_none() {
        return Ok(None);
    }
    let path = std::path::Path::new(ASSEMBLE_LOCK);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| CtlError::io(format!("creating {}", dir.display()), e))?;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| CtlError::io(format!("opening {ASSEMBLE_LOCK}"), e))?;
    // SAFETY: flock on a descriptor this function owns; no memory is passed.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(CtlError::io(
            format!("locking {ASSEMBLE_LOCK}"),
            std::io::Error::last_os_error(),
        ));
    }
    Ok(Some(file))
}

/// Whether `args` look for members themselves (and so obey this host's [`Policy`]).
pub fn scans(args: &AssembleArgs) -> bool {
    args.scan || args.incremental.is_some()
}

/// Assembles the members [`prepare`] checked, or scans, starting by itself only what `policy`
/// says is this host's.
pub fn submit(
    ctl: &dyn ControlDevice,
    sys: &dyn System,
    args: &AssembleArgs,
    prepared: &Prepared,
    policy: &Policy,
    json_out: bool,
) -> Result<String, CtlError> {
    let any = Policy::any_host();
    let policy = if args.any_host { &any } else { policy };
    if let Some(device) = &args.incremental {
        let format = match (args.export, json_out) {
            (true, true) => {
                return Err(CtlError::Usage(
                    "--export and --json are different output formats; pick one".to_owned(),
                ))
            }
            (true, false) => Format::Export,
            (false, true) => Format::Json,
            (false, false) => Format::Text,
        };
        return incremental(ctl, sys, device, policy, format);
    }
    if args.scan {
        let only = match &args.uuid {
            Some(text) => Some(uuid::parse(text).map_err(CtlError::Usage)?),
            None => None,
        };
        return scan(ctl, sys, args.run, only, policy, json_out);
    }
    let index = match prepared.target {
        Some(Target::Index(index)) => Some(index),
        _ => None,
    };
    let how = How {
        run: args.run,
        index,
    };
    let view = assemble(ctl, sys, &prepared.rdevs, &prepared.paths, how)?;
    Ok(if json_out {
        json(&view)
    } else {
        assembled_line(&view)
    })
}

/// [`prepare`] and [`submit`].
#[cfg(test)]
pub fn run(
    ctl: &dyn ControlDevice,
    sys: &dyn System,
    args: &AssembleArgs,
    json_out: bool,
) -> Result<String, CtlError> {
    let policy = Policy {
        host: Some("this-host".to_owned()),
        ..Policy::default()
    };
    submit(ctl, sys, args, &prepare(sys, args)?, &policy, json_out)
}

fn assembled_line(view: &ArrayView) -> String {
    let name = if view.name.is_empty() {
        String::new()
    } else {
        format!(" {}", view.name)
    };
    format!(
        "graidctl: array{name} assembled as {} ({}, {} members, {})\n",
        view.device,
        view.level,
        view.members_summary(),
        view.state
    )
}

/// How to start an array: degraded if need be, as a given `/dev/graidN`.
#[derive(Clone, Copy, Debug, Default)]
struct How {
    run: bool,
    index: Option<u32>,
}

/// Sends ASSEMBLE for `rdevs` (shown as `paths`) and describes the running array.
fn assemble(
    ctl: &dyn ControlDevice,
    sys: &dyn System,
    rdevs: &[Rdev],
    paths: &[String],
    how: How,
) -> Result<ArrayView, CtlError> {
    let run = how.run;
    let mut flags = if run { GRAID_ASSEMBLE_RUN } else { 0 };
    if how.index.is_some() {
        flags |= GRAID_ASSEMBLE_INDEX;
    }
    let mut req = GraidAssemble {
        nr_members: rdevs.len() as u32,
        flags,
        members: [GraidMember::default(); GRAID_MAX_MEMBERS],
        index: how.index.unwrap_or(0),
        bad_member: u32::MAX,
        missing: 0,
        reserved: 0,
    };
    for (slot, rdev) in req.members.iter_mut().zip(rdevs) {
        *slot = GraidMember {
            major: rdev.major,
            minor: rdev.minor,
        };
    }
    if let Err(e) = ctl.assemble(&mut req) {
        if req.missing != 0 && req.bad_member == u32::MAX {
            return Err(missing_error(req.missing, run, &e));
        }
        if let (Some(index), Some(libc::EBUSY), u32::MAX) =
            (how.index, e.raw_os_error(), req.bad_member)
        {
            return Err(CtlError::Failed(format!(
                "cannot assemble as /dev/graid{index}: another array is /dev/graid{index} (EBUSY)"
            )));
        }
        let bad = usize::try_from(req.bad_member).ok();
        let member = bad
            .and_then(|i| Some((paths.get(i)?, rdevs.get(i)?)))
            .map(|(path, rdev)| format!("{path} ({rdev})"));
        return Err(ioctl_error(
            Op::Assemble {
                member: member.as_deref(),
            },
            &e,
        ));
    }
    let device = array_device(req.index);
    let detail = ctl.detail(req.index).map_err(|e| {
        CtlError::Failed(format!(
            "the array was assembled as {device}, but describing it failed: {}",
            ioctl_error(Op::Detail { array: &device }, &e)
        ))
    })?;
    Ok(ArrayView::new(&detail, sys))
}

/// Why an array with roles `missing` (a bit per role) was not started.
fn missing_error(missing: u32, run: bool, e: &std::io::Error) -> CtlError {
    let roles: Vec<String> = (0..32)
        .filter(|r| missing & (1 << r) != 0)
        .map(|r| r.to_string())
        .collect();
    let roles = format!(
        "role{} {} ha{} no member",
        if roles.len() > 1 { "s" } else { "" },
        roles.join(", "),
        if roles.len() > 1 { "ve" } else { "s" }
    );
    let errno = e.raw_os_error();
    let why = match errno {
        Some(libc::EUCLEAN) => format!(
            "{roles}, and the array was not stopped cleanly: its parity may not match its data, \
             so what it rebuilds for the missing members could be wrong (md refuses this too); \
             nothing was started"
        ),
        _ if run => {
            format!("{roles}: too many are missing to start without losing data (even with --run)")
        }
        _ => format!(
            "{roles} (not given, or not found); --run starts the array degraded without them"
        ),
    };
    let name = errno
        .and_then(crate::errno::errno_name)
        .map_or(String::new(), |n| format!(" ({n})"));
    CtlError::Failed(format!("cannot assemble: {why}{name}"))
}

/// A device with a graid superblock, found by `--scan`.
struct Found {
    path: String,
    rdev: Rdev,
    sb: Superblock,
}

/// A device `--scan` leaves out of its array, and why.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct LeftOut {
    pub device: String,
    pub reason: String,
}

/// What `--scan` did with one array.
#[derive(Debug, Serialize)]
pub struct ScanResult {
    pub uuid: String,
    pub name: String,
    /// `assembled`, `running` (already was), `foreign` (another host's: left alone) or
    /// `failed`.
    pub status: &'static str,
    /// Members sent to the module.
    pub members: Vec<String>,
    pub left_out: Vec<LeftOut>,
    /// The running array (after assembly, or the one that was already running).
    pub array: Option<ArrayView>,
    pub error: Option<String>,
}

#[derive(Debug, Serialize)]
struct ScanReport {
    arrays: Vec<ScanResult>,
}

fn status_text(status: &MemberStatus, found: &[Found]) -> String {
    match *status {
        MemberStatus::Stale {
            events,
            freshest_events,
        } => format!("stale (events {events}, the freshest member has {freshest_events})"),
        MemberStatus::Faulty => "marked faulty by the other members".to_owned(),
        MemberStatus::Removed => "no longer listed by the other members".to_owned(),
        MemberStatus::Duplicate { of } => format!(
            "duplicate of {}",
            found.get(of).map_or("another device", |f| f.path.as_str())
        ),
        MemberStatus::Mismatch => {
            "its level, member count, chunk or size differ from the freshest member".to_owned()
        }
        MemberStatus::Foreign => "belongs to another array".to_owned(),
        MemberStatus::Active { .. } | MemberStatus::Recovering { .. } | MemberStatus::Spare => {
            "joins".to_owned()
        }
    }
}

/// Every block device holding a graid superblock.
fn found_devices(sys: &dyn System) -> Vec<Found> {
    sys.block_devices()
        .into_iter()
        .filter_map(|dev| {
            let block = sys.read_superblock(&dev.path).ok()?;
            let sb = decode(&block[..]).ok()?;
            Some(Found {
                path: dev.path,
                rdev: dev.rdev,
                sb,
            })
        })
        .collect()
}

/// Picks the members of array `array_uuid` among `found` (by their freshest superblock) and
/// assembles them, unless the array runs already; `None` if no device belongs to it.
fn assemble_found(
    ctl: &dyn ControlDevice,
    sys: &dyn System,
    found: &[Found],
    running: &[graid_abi::GraidDetail],
    array_uuid: [u8; 16],
    run: bool,
    policy: &Policy,
) -> Option<ScanResult> {
    let sbs: Vec<Superblock> = found.iter().map(|f| f.sb).collect();
    let freshest = pick_freshest(&sbs, &array_uuid)?;
    let mut result = ScanResult {
        uuid: uuid::format(&array_uuid),
        name: sbs[freshest].array_name.as_str().to_owned(),
        status: "failed",
        members: Vec::new(),
        left_out: Vec::new(),
        array: None,
        error: None,
    };
    if let Some(a) = running.iter().find(|a| a.uuid == array_uuid) {
        result.status = "running";
        result.array = Some(ArrayView::new(a, sys));
        return Some(result);
    }
    if let Some(why) = policy.refuses(&array_uuid, &sbs[freshest].homehost) {
        result.status = "foreign";
        result.error = Some(why);
        return Some(result);
    }
    let mut rdevs = Vec::new();
    for (i, f) in found.iter().enumerate() {
        if f.sb.array_uuid != array_uuid {
            continue;
        }
        match member_status(&sbs, freshest, i) {
            Some(status) if status.joins() => {
                rdevs.push(f.rdev);
                result.members.push(f.path.clone());
            }
            Some(status) => result.left_out.push(LeftOut {
                device: describe(sys, f.rdev),
                reason: status_text(&status, found),
            }),
            None => {}
        }
    }
    rdevs.truncate(GRAID_MAX_MEMBERS);
    result.members.truncate(GRAID_MAX_MEMBERS);
    let how = How { run, index: None };
    match assemble(ctl, sys, &rdevs, &result.members, how) {
        Ok(view) => {
            result.status = "assembled";
            result.array = Some(view);
        }
        Err(e) => result.error = Some(e.to_string()),
    }
    Some(result)
}

fn scan(
    ctl: &dyn ControlDevice,
    sys: &dyn System,
    run: bool,
    only: Option<[u8; 16]>,
    policy: &Policy,
    json_out: bool,
) -> Result<String, CtlError> {
    let found = found_devices(sys);
    let running = running_arrays(ctl)?;
    // Array UUIDs in the order their first member was found.
    let mut uuids: Vec<[u8; 16]> = Vec::new();
    for f in &found {
        if !uuids.contains(&f.sb.array_uuid) && only.is_none_or(|u| u == f.sb.array_uuid) {
            uuids.push(f.sb.array_uuid);
        }
    }
    if let (Some(u), true) = (only, uuids.is_empty()) {
        return Err(CtlError::Failed(format!(
            "no member of array {} found",
            uuid::format(&u)
        )));
    }
    let results: Vec<ScanResult> = uuids
        .into_iter()
        .filter_map(|u| assemble_found(ctl, sys, &found, &running, u, run, policy))
        .collect();
    let failed = results.iter().filter(|r| r.status == "failed").count();
    let total = results.len();
    let stdout = if json_out {
        json(&ScanReport { arrays: results })
    } else {
        scan_text(&results)
    };
    if failed > 0 {
        return Err(CtlError::Partial {
            stdout,
            message: format!("{failed} of {total} arrays could not be assembled"),
        });
    }
    Ok(stdout)
}

/// What `--incremental` did with the device that appeared.
#[derive(Debug, Serialize)]
struct IncrementalReport {
    device: String,
    /// `ignored` (no graid superblock), `member` (already in its running array), `not-member`
    /// (its array runs without it), `foreign` (another host's array: left alone), `waiting`
    /// (roles still missing), or the scan's status.
    status: &'static str,
    uuid: Option<String>,
    name: Option<String>,
    /// Roles no present member fills yet (`waiting`).
    missing_roles: Vec<u32>,
    array: Option<ScanResult>,
}

/// How `--incremental` reports what it did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    /// A line for a person.
    Text,
    /// `--json`: the [`IncrementalReport`].
    Json,
    /// `--export`: KEY=VALUE lines for udev's `IMPORT{program}` ([`udev_properties`]).
    Export,
}

/// The report as udev properties: `GRAID_INCREMENTAL=STATUS` and, for a device that holds a
/// graid superblock, `GRAID_LAST_RESORT_TIMER=` the unit that starts its array degraded, which
/// 64-graid-assembly.rules wants only while the array waits for members (md's `MD_STARTED`
/// and `mdadm-last-resort@.timer`).
fn udev_properties(report: &IncrementalReport) -> String {
    let mut out = format!("GRAID_INCREMENTAL={}\n", report.status);
    if let Some(uuid) = &report.uuid {
        out.push_str(&format!(
            "GRAID_LAST_RESORT_TIMER={}\n",
            last_resort_timer(uuid)
        ));
    }
    out
}

/// `graid-last-resort@INSTANCE.timer` of the array with UUID `uuid`: the instance is the UUID
/// as 32 hex digits ([`crate::uuid::hex`]), which needs no escaping in a unit name (systemd
/// before 258 drops the backslashes of an escaped name in `SYSTEMD_WANTS`). The timer's
/// `Conflicts=` names the array's device unit by the same digits: 65-graid.rules gives the
/// array the alias `/sys/subsystem/graid/arrays/HEX` (`GRAID_UUID_HEX`).
fn last_resort_timer(uuid: &str) -> String {
    format!("graid-last-resort@{}.timer", crate::uuid::hex(uuid))
}

/// `assemble --incremental DEVICE`: md's `mdadm --incremental`, in user space. The module
/// starts an array from all its members at once, so each call looks at every member present
/// and starts the array when each role has a current one; the calls are serialised by the
/// caller (a lock in /run), so two members appearing together start it once.
fn incremental(
    ctl: &dyn ControlDevice,
    sys: &dyn System,
    device: &str,
    policy: &Policy,
    format: Format,
) -> Result<String, CtlError> {
    let mut report = IncrementalReport {
        device: device.to_owned(),
        status: "ignored",
        uuid: None,
        name: None,
        missing_roles: Vec::new(),
        array: None,
    };
    let output = |report: &IncrementalReport, text: String| match format {
        Format::Text => text,
        Format::Json => json(report),
        Format::Export => udev_properties(report),
    };
    let rdev = sys.block_rdev(device)?;
    let Some(sb) = sys
        .read_superblock(device)
        .ok()
        .and_then(|block| decode(&block[..]).ok())
    else {
        let text = format!("graidctl: {device} holds no graid superblock; nothing to do\n");
        return Ok(output(&report, text));
    };
    let uuid_text = uuid::format(&sb.array_uuid);
    let label = format!("array {} ({uuid_text})", sb.array_name.as_str());
    report.uuid = Some(uuid_text.clone());
    report.name = Some(sb.array_name.as_str().to_owned());

    let running = running_arrays(ctl)?;
    if let Some(a) = running.iter().find(|a| a.uuid == sb.array_uuid) {
        let array = array_device(a.index);
        let text = if present_members(a).iter().any(|m| Rdev::from(m.dev) == rdev) {
            report.status = "member";
            format!("graidctl: {device} is already in {label}, running as {array}\n")
        } else {
            report.status = "not-member";
            format!(
                "graidctl: {label} is running as {array} without {device}; \
                 'graidctl re-add {array} {device}' adds it back\n"
            )
        };
        return Ok(output(&report, text));
    }
    if let Some(why) = policy.refuses(&sb.array_uuid, &sb.homehost) {
        report.status = "foreign";
        let text = format!(
            "graidctl: {label} {why}: not started by itself; \
             'graidctl assemble --scan --any-host --uuid {uuid_text}' starts it\n"
        );
        return Ok(output(&report, text));
    }

    let found = found_devices(sys);
    let sbs: Vec<Superblock> = found.iter().map(|f| f.sb).collect();
    let missing = pick_freshest(&sbs, &sb.array_uuid)
        .map(|freshest| missing_roles(&sbs, freshest))
        .unwrap_or_default();
    if !missing.is_empty() {
        report.status = "waiting";
        let roles: Vec<String> = missing.iter().map(u32::to_string).collect();
        report.missing_roles = missing;
        let text = format!(
            "graidctl: {label}: {device} is here, waiting for role(s) {}; \
             {} starts it degraded if they do not come\n",
            roles.join(", "),
            last_resort_timer(&uuid_text)
        );
        return Ok(output(&report, text));
    }

    let result = assemble_found(ctl, sys, &found, &running, sb.array_uuid, false, policy);
    let text = result
        .as_ref()
        .map_or(String::new(), |r| scan_text(std::slice::from_ref(r)));
    report.status = result.as_ref().map_or("failed", |r| r.status);
    report.array = result;
    if report.status == "failed" {
        return Err(CtlError::Partial {
            stdout: output(&report, text),
            message: format!("{label} could not be assembled"),
        });
    }
    Ok(output(&report, text))
}

/// Roles of the array (by its freshest superblock among `sbs`) that no present, current
/// member fills: while a reshape runs, the roles of both geometries (a grow's new members
/// hold data already).
fn missing_roles(sbs: &[Superblock], freshest: usize) -> Vec<u32> {
    let sb = &sbs[freshest];
    let members = sb
        .reshape
        .map_or(sb.members, |r| r.new_members.max(sb.members));
    let mut filled = vec![false; members as usize];
    for i in 0..sbs.len() {
        if let Some(MemberStatus::Active { role }) = member_status(sbs, freshest, i) {
            if let Some(f) = filled.get_mut(usize::from(role)) {
                *f = true;
            }
        }
    }
    (0..members).filter(|&r| !filled[r as usize]).collect()
}

fn scan_text(results: &[ScanResult]) -> String {
    if results.is_empty() {
        return "graidctl: no graid superblocks found\n".to_owned();
    }
    let mut out = String::new();
    for r in results {
        let label = format!("array {} ({})", r.name, r.uuid);
        for l in &r.left_out {
            out.push_str(&format!(
                "graidctl: {label}: leaving out {}: {}\n",
                l.device, l.reason
            ));
        }
        match (r.status, &r.array, &r.error) {
            ("running", Some(a), _) => out.push_str(&format!(
                "graidctl: {label} is already running as {}\n",
                a.device
            )),
            ("foreign", _, Some(why)) => out.push_str(&format!(
                "graidctl: {label} {why}: not started; --any-host starts it\n"
            )),
            (_, Some(a), _) => out.push_str(&assembled_line(a)),
            (_, _, Some(e)) => out.push_str(&format!("graidctl: {label}: {e}\n")),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::fake::{array, FakeControl};
    use crate::error::{EXIT_FAILURE, EXIT_USAGE};
    use crate::member::fake::FakeSystem;
    use crate::sbio::testutil::{block, sample};

    /// The policy of a host named `this-host`.
    fn here() -> Policy {
        Policy {
            host: Some("this-host".to_owned()),
            ..Policy::default()
        }
    }

    fn args_with(array: &str, members: &[&str]) -> AssembleArgs {
        let mut a = args(members);
        a.members.insert(0, array.to_owned());
        a
    }

    fn args(members: &[&str]) -> AssembleArgs {
        AssembleArgs {
            scan: false,
            uuid: None,
            any_host: false,
            incremental: None,
            export: false,
            members: members.iter().map(|m| format!("/dev/{m}")).collect(),
            run: false,
        }
    }

    #[test]
    fn assembles_the_given_members() {
        let ctl = FakeControl::with(vec![]);
        let sys = FakeSystem::with_disks(&["a", "b"]);
        let out = run(&ctl, &sys, &args(&["b", "a"]), false).unwrap();
        assert_eq!(
            out,
            "graidctl: array found assembled as /dev/graid0 (raid10, 2/2 members, optimal)\n"
        );
        let sent = ctl.assembled.borrow()[0];
        assert_eq!(sent.nr_members, 2);
        assert_eq!((sent.members[0].minor, sent.members[1].minor), (1, 0));
        assert_eq!(sent.flags, 0);
        assert_eq!(sent.bad_member, u32::MAX);
    }

    #[test]
    fn refused_member_is_named() {
        let mut ctl = FakeControl::with(vec![]);
        ctl.bad_member = 1;
        ctl.fail.borrow_mut().push(("assemble", libc::ESTALE));
        let sys = FakeSystem::with_disks(&["a", "b"]);
        let err = run(&ctl, &sys, &args(&["a", "b"]), false).unwrap_err();
        assert_eq!(err.exit_code(), EXIT_FAILURE);
        assert!(
            err.to_string()
                .starts_with("cannot assemble: member /dev/b (259:1): stale"),
            "{err}"
        );
        // Out-of-range or absent bad_member: no member named.
        ctl.bad_member = 7;
        let err = run(&ctl, &sys, &args(&["a", "b"]), false).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("cannot assemble: a member is stale"),
            "{err}"
        );
    }

    #[test]
    fn missing_roles_are_named_and_run_is_sent() {
        let mut ctl = FakeControl::with(vec![]);
        ctl.missing = 0b1010;
        ctl.fail.borrow_mut().push(("assemble", libc::ENODEV));
        let sys = FakeSystem::with_disks(&["a", "b"]);
        let err = run(&ctl, &sys, &args(&["a", "b"]), false).unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot assemble: roles 1, 3 have no member (not given, or not found); --run \
             starts the array degraded without them (ENODEV)"
        );
        let mut with_run = args(&["a", "b"]);
        with_run.run = true;
        let err = run(&ctl, &sys, &with_run, false).unwrap_err();
        assert!(err.to_string().contains("too many are missing"), "{err}");
        assert_eq!(ctl.assembled.borrow()[1].flags, GRAID_ASSEMBLE_RUN);
        ctl.missing = 0b100;
        ctl.fail.borrow_mut()[0].1 = libc::EUCLEAN;
        let err = run(&ctl, &sys, &with_run, false).unwrap_err();
        assert!(
            err.to_string().starts_with(
                "cannot assemble: role 2 has no member, and the array was not stopped cleanly"
            ),
            "{err}"
        );
        // Started degraded: the fake reports success.
        ctl.fail.borrow_mut().clear();
        let out = run(&ctl, &sys, &with_run, false).unwrap();
        assert!(out.contains("assembled as /dev/graid0"), "{out}");
    }

    #[test]
    fn array_given_first_is_checked_against_the_members() {
        let ctl = FakeControl::with(vec![]);
        let mut sys = FakeSystem::with_disks(&["a", "b"]);
        sys.devices[0].2 = Some(block(&sample("x", [1; 16], 0, 9)));
        sys.devices[1].2 = Some(block(&sample("x", [1; 16], 1, 9)));
        // By name: the members must carry it.
        run(&ctl, &sys, &args_with("x", &["a", "b"]), false).unwrap();
        assert_eq!(ctl.assembled.borrow()[0].nr_members, 2);
        assert_eq!(ctl.assembled.borrow()[0].flags, 0);
        let err = run(
            &ctl,
            &sys,
            &args_with("/dev/graid/data", &["a", "b"]),
            false,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot assemble 'data': member /dev/a belongs to array 'x' \
             (01010101-0101-0101-0101-010101010101); nothing was assembled"
        );
        assert_eq!(
            ctl.assembled.borrow().len(),
            1,
            "nothing sent for a wrong name"
        );
        // By device: started as that index.
        run(&ctl, &sys, &args_with("/dev/graid5", &["b", "a"]), false).unwrap();
        let sent = ctl.assembled.borrow()[1];
        assert_eq!(
            (sent.flags, sent.index, sent.nr_members),
            (GRAID_ASSEMBLE_INDEX, 5, 2)
        );
        let err = run(&ctl, &sys, &args_with("/dev/graid64", &["a"]), false).unwrap_err();
        assert_eq!(err.exit_code(), EXIT_USAGE);
        // A lone argument, or a first one that is a device, is a member.
        run(&ctl, &sys, &args(&["a", "b"]), false).unwrap();
        assert_eq!(ctl.assembled.borrow()[2].flags, 0);
        assert!(run(&ctl, &sys, &args_with("x", &[]), false).is_err());
    }

    #[test]
    fn too_many_members_is_a_usage_error() {
        let names: Vec<String> = (0..33).map(|i| format!("d{i}")).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let sys = FakeSystem::with_disks(&refs);
        let err = run(&FakeControl::with(vec![]), &sys, &args(&refs), false).unwrap_err();
        assert_eq!(err.exit_code(), EXIT_USAGE);
    }

    /// Disks a, b (array X, current), c (array X, stale), d (array Y), e (nothing).
    fn scan_system() -> FakeSystem {
        let mut sys = FakeSystem::with_disks(&["a", "b", "c", "d", "e"]);
        let mut stale = sample("x", [1; 16], 1, 2);
        stale.member_uuid = [0x77; 16];
        stale.this_slot = 2;
        stale.slots[2] = graid_engine::superblock::Slot::Spare;
        sys.devices[0].2 = Some(block(&sample("x", [1; 16], 0, 9)));
        sys.devices[1].2 = Some(block(&sample("x", [1; 16], 1, 9)));
        sys.devices[2].2 = Some(block(&stale));
        sys.devices[3].2 = Some(block(&sample("y", [2; 16], 0, 1)));
        sys
    }

    #[test]
    fn scan_groups_by_uuid_and_leaves_out_stale_members() {
        let ctl = FakeControl::with(vec![]);
        let sys = scan_system();
        let out = scan(&ctl, &sys, false, None, &here(), false).unwrap();
        assert_eq!(
            out,
            "graidctl: array x (01010101-0101-0101-0101-010101010101): leaving out \
             /dev/c (259:2): stale (events 2, the freshest member has 9)\n\
             graidctl: array found assembled as /dev/graid0 (raid10, 2/2 members, optimal)\n\
             graidctl: array found assembled as /dev/graid1 (raid10, 1/1 members, optimal)\n"
        );
        let sent = ctl.assembled.borrow();
        assert_eq!(sent.len(), 2);
        assert_eq!(sent[0].nr_members, 2);
        assert_eq!((sent[0].members[0].minor, sent[0].members[1].minor), (0, 1));
        assert_eq!((sent[1].nr_members, sent[1].members[0].minor), (1, 3));
    }

    #[test]
    fn scan_skips_running_arrays_and_reports_failures_in_json() {
        let mut running = array(4, "x", 1, &[(259, 0, 0), (259, 1, 0)]);
        running.uuid = [1; 16];
        let ctl = FakeControl::with(vec![running]);
        ctl.fail.borrow_mut().push(("assemble", libc::EUCLEAN));
        let err = scan(&ctl, &scan_system(), false, None, &here(), true).unwrap_err();
        assert_eq!(err.exit_code(), EXIT_FAILURE);
        assert_eq!(err.to_string(), "1 of 2 arrays could not be assembled");
        let CtlError::Partial { stdout, .. } = err else {
            panic!("partial")
        };
        let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        let arrays = v["arrays"].as_array().unwrap();
        assert_eq!(arrays[0]["status"], "running");
        assert_eq!(arrays[0]["array"]["device"], "/dev/graid4");
        assert_eq!(arrays[1]["status"], "failed");
        assert_eq!(arrays[1]["name"], "y");
        assert_eq!(arrays[1]["members"][0], "/dev/d");
        assert!(arrays[1]["error"]
            .as_str()
            .unwrap()
            .contains("corrupt graid superblock"));
        assert_eq!(ctl.assembled.borrow().len(), 1, "only y was sent");
    }

    #[test]
    fn scan_with_nothing_found_succeeds() {
        let ctl = FakeControl::with(vec![]);
        let sys = FakeSystem::with_disks(&["a"]);
        assert_eq!(
            scan(&ctl, &sys, false, None, &here(), false).unwrap(),
            "graidctl: no graid superblocks found\n"
        );
        assert_eq!(
            scan(&ctl, &sys, false, None, &here(), true).unwrap(),
            "{\n  \"arrays\": []\n}\n"
        );
    }

    #[test]
    fn scan_with_uuid_assembles_only_that_array() {
        let ctl = FakeControl::with(vec![]);
        let out = scan(&ctl, &scan_system(), true, Some([2; 16]), &here(), false).unwrap();
        assert_eq!(
            out,
            "graidctl: array found assembled as /dev/graid0 (raid10, 1/1 members, optimal)\n"
        );
        let sent = ctl.assembled.borrow();
        assert_eq!(sent.len(), 1);
        assert_eq!(
            (sent[0].members[0].minor, sent[0].flags),
            (3, GRAID_ASSEMBLE_RUN)
        );
        drop(sent);
        let err = scan(&ctl, &scan_system(), true, Some([3; 16]), &here(), false).unwrap_err();
        assert_eq!(
            err.to_string(),
            "no member of array 03030303-0303-0303-0303-030303030303 found"
        );
    }

    /// [`scan_system`] with array y recorded as another host's.
    fn system_with_a_foreign_array() -> FakeSystem {
        let mut sys = scan_system();
        let mut foreign = sample("y", [2; 16], 0, 1);
        foreign.homehost = graid_engine::superblock::HomeHost::new("other-host").unwrap();
        sys.devices[3].2 = Some(block(&foreign));
        sys
    }

    #[test]
    fn scan_leaves_other_hosts_arrays_alone_unless_any_host() {
        let ctl = FakeControl::with(vec![]);
        let sys = system_with_a_foreign_array();
        let out = scan(&ctl, &sys, true, None, &here(), false).unwrap();
        assert!(
            out.ends_with(
                "graidctl: array y (02020202-0202-0202-0202-020202020202) belongs to host \
                 'other-host' (this is 'this-host'): not started; --any-host starts it\n"
            ),
            "{out}"
        );
        assert_eq!(ctl.assembled.borrow().len(), 1, "only x was sent");
        // The last-resort timer's --scan --uuid obeys the host too.
        let out = scan(&ctl, &sys, true, Some([2; 16]), &here(), true).unwrap();
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["arrays"][0]["status"], "foreign");
        assert_eq!(ctl.assembled.borrow().len(), 1);
        // --any-host, or HOMEHOST <ignore>: started.
        let mut any = args(&[]);
        any.scan = true;
        any.any_host = true;
        any.uuid = Some("02020202-0202-0202-0202-020202020202".to_owned());
        let out = submit(&ctl, &sys, &any, &Prepared::default(), &here(), false).unwrap();
        assert!(out.contains("assembled as /dev/graid"), "{out}");
        assert_eq!(ctl.assembled.borrow()[1].members[0].minor, 3);
    }

    #[test]
    fn incremental_leaves_other_hosts_arrays_alone() {
        let ctl = FakeControl::with(vec![]);
        let sys = system_with_a_foreign_array();
        let out = incremental(&ctl, &sys, "/dev/d", &here(), Format::Text).unwrap();
        assert_eq!(
            out,
            "graidctl: array y (02020202-0202-0202-0202-020202020202) belongs to host \
             'other-host' (this is 'this-host'): not started by itself; 'graidctl assemble \
             --scan --any-host --uuid 02020202-0202-0202-0202-020202020202' starts it\n"
        );
        assert!(ctl.assembled.borrow().is_empty());
        // A host without a name starts only arrays of no host.
        let nameless = Policy {
            host: None,
            ..Policy::default()
        };
        let out = incremental(&ctl, &sys, "/dev/d", &nameless, Format::Json).unwrap();
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["status"], "foreign");
        let out = incremental(&ctl, &sys, "/dev/a", &nameless, Format::Json).unwrap();
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["status"], "assembled");
    }

    #[test]
    fn incremental_waits_for_every_role_then_assembles_once() {
        let ctl = FakeControl::with(vec![]);
        let mut sys = scan_system();
        // Only a of array x (two roles) is here yet.
        sys.devices[1].2 = None;
        let out = incremental(&ctl, &sys, "/dev/a", &here(), Format::Text).unwrap();
        assert_eq!(
            out,
            "graidctl: array x (01010101-0101-0101-0101-010101010101): /dev/a is here, \
             waiting for role(s) 1; graid-last-resort@01010101010101010101010101010101.timer \
             starts it degraded if they do not come\n"
        );
        assert!(
            ctl.assembled.borrow().is_empty(),
            "nothing sent while a role is missing"
        );
        // The stale c fills no role.
        let out = incremental(&ctl, &sys, "/dev/c", &here(), Format::Json).unwrap();
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["status"], "waiting");
        assert_eq!(v["missing_roles"], serde_json::json!([1]));
        // b appears: the array starts, with a and b, not degraded (no RUN).
        let sys = scan_system();
        let out = incremental(&ctl, &sys, "/dev/b", &here(), Format::Text).unwrap();
        assert!(
            out.ends_with("assembled as /dev/graid0 (raid10, 2/2 members, optimal)\n"),
            "{out}"
        );
        let sent = ctl.assembled.borrow();
        assert_eq!(sent.len(), 1);
        assert_eq!((sent[0].nr_members, sent[0].flags), (2, 0));
    }

    #[test]
    fn a_grows_new_member_is_a_role_to_wait_for() {
        use graid_engine::superblock::{Reshape, Slot};
        let uuid = [7; 16];
        let mut sbs: Vec<Superblock> = (0..3).map(|r| sample("g", uuid, r, 9)).collect();
        for sb in &mut sbs {
            sb.members = 2;
            sb.slots[2] = Slot::Active { role: 2 };
            sb.reshape = Some(Reshape {
                position: 128,
                new_level: sb.level,
                new_chunk_sectors: 128,
                new_members: 3,
                new_data_offset: 2048,
                backwards: false,
            });
        }
        assert_eq!(missing_roles(&sbs, 0), Vec::<u32>::new());
        assert_eq!(missing_roles(&sbs[..2], 0), vec![2]);
    }

    #[test]
    fn incremental_leaves_running_arrays_and_other_devices_alone() {
        let mut running = array(4, "x", 1, &[(259, 0, 0)]);
        running.uuid = [1; 16];
        let ctl = FakeControl::with(vec![running]);
        let sys = scan_system();
        assert_eq!(
            incremental(&ctl, &sys, "/dev/a", &here(), Format::Text).unwrap(),
            "graidctl: /dev/a is already in array x (01010101-0101-0101-0101-010101010101), \
             running as /dev/graid4\n"
        );
        assert_eq!(
            incremental(&ctl, &sys, "/dev/b", &here(), Format::Text).unwrap(),
            "graidctl: array x (01010101-0101-0101-0101-010101010101) is running as \
             /dev/graid4 without /dev/b; 'graidctl re-add /dev/graid4 /dev/b' adds it back\n"
        );
        assert_eq!(
            incremental(&ctl, &sys, "/dev/e", &here(), Format::Text).unwrap(),
            "graidctl: /dev/e holds no graid superblock; nothing to do\n"
        );
        assert!(ctl.assembled.borrow().is_empty());
        // A failed start is a failure, with what was tried.
        let ctl = FakeControl::with(vec![]);
        ctl.fail.borrow_mut().push(("assemble", libc::EUCLEAN));
        let err = incremental(&ctl, &sys, "/dev/a", &here(), Format::Text).unwrap_err();
        assert_eq!(err.exit_code(), EXIT_FAILURE);
    }

    #[test]
    fn the_last_resort_timer_is_named_by_the_uuid_digits() {
        assert_eq!(
            last_resort_timer("ffffffff-0000-abcd-0000-0123456789ab"),
            "graid-last-resort@ffffffff0000abcd00000123456789ab.timer"
        );
    }

    /// The timer that `--export` names for array x of [`scan_system`].
    const X_TIMER: &str = "graid-last-resort@01010101010101010101010101010101.timer";

    #[test]
    fn incremental_export_prints_udev_properties() {
        let ctl = FakeControl::with(vec![]);
        let mut sys = scan_system();
        // A member of x alone: waiting, and the array's last-resort timer (udev wants it).
        sys.devices[1].2 = None;
        let out = incremental(&ctl, &sys, "/dev/a", &here(), Format::Export).unwrap();
        assert_eq!(
            out,
            format!("GRAID_INCREMENTAL=waiting\nGRAID_LAST_RESORT_TIMER={X_TIMER}\n")
        );
        assert!(ctl.assembled.borrow().is_empty());
        // No superblock: nothing to name.
        let out = incremental(&ctl, &sys, "/dev/e", &here(), Format::Export).unwrap();
        assert_eq!(out, "GRAID_INCREMENTAL=ignored\n");
        // Another host's array: left alone, and not waiting.
        let foreign = system_with_a_foreign_array();
        let out = incremental(&ctl, &foreign, "/dev/d", &here(), Format::Export).unwrap();
        assert!(out.starts_with("GRAID_INCREMENTAL=foreign\n"), "{out}");
        // The last member: started complete (udev wants no timer).
        let sys = scan_system();
        let out = incremental(&ctl, &sys, "/dev/b", &here(), Format::Export).unwrap();
        assert_eq!(
            out,
            format!("GRAID_INCREMENTAL=assembled\nGRAID_LAST_RESORT_TIMER={X_TIMER}\n")
        );
        assert_eq!(ctl.assembled.borrow().len(), 1);
        // A failed start exits non-zero, the properties printed first.
        let ctl = FakeControl::with(vec![]);
        ctl.fail.borrow_mut().push(("assemble", libc::EUCLEAN));
        let err = incremental(&ctl, &sys, "/dev/a", &here(), Format::Export).unwrap_err();
        assert_eq!(err.exit_code(), EXIT_FAILURE);
        let CtlError::Partial { stdout, .. } = err else {
            panic!("partial")
        };
        assert_eq!(
            stdout,
            format!("GRAID_INCREMENTAL=failed\nGRAID_LAST_RESORT_TIMER={X_TIMER}\n")
        );
        // Already running with it.
        let mut running = array(4, "x", 1, &[(259, 0, 0)]);
        running.uuid = [1; 16];
        let ctl = FakeControl::with(vec![running]);
        let out = incremental(&ctl, &sys, "/dev/a", &here(), Format::Export).unwrap();
        assert!(out.starts_with("GRAID_INCREMENTAL=member\n"), "{out}");
    }

    #[test]
    fn export_goes_with_incremental_only_and_not_with_json() {
        #[derive(clap::Parser)]
        struct Cli {
            #[arg(long, global = true)]
            json: bool,
            #[command(subcommand)]
            command: Command,
        }
        #[derive(clap::Subcommand)]
        enum Command {
            Assemble(AssembleArgs),
        }
        let parse = |argv: &[&str]| {
            <Cli as clap::Parser>::try_parse_from(
                ["graidctl", "assemble"].iter().chain(argv).copied(),
            )
        };
        // The rule's order: --export before --incremental DEVICE, or after it.
        for argv in [
            &["--export", "--incremental", "/dev/a"][..],
            &["-I", "/dev/a", "--export"],
        ] {
            let Command::Assemble(a) = parse(argv).unwrap().command;
            assert!(a.export, "{argv:?}");
            assert_eq!(a.incremental.as_deref(), Some("/dev/a"));
        }
        // Not without --incremental (clap's `requires` lets these through: prepare refuses).
        for argv in [
            &["--export", "/dev/a", "/dev/b"][..],
            &["--scan", "--export"],
        ] {
            let Command::Assemble(a) = parse(argv).unwrap().command;
            let err = prepare(&scan_system(), &a).unwrap_err();
            assert_eq!(err.exit_code(), EXIT_USAGE, "{argv:?}");
        }
        assert!(parse(&["--export", "-I", "/dev/a", "--json"]).is_err());
        // --json before the verb: refused when the output is chosen, before anything is done.
        let ctl = FakeControl::with(vec![]);
        let sys = scan_system();
        let mut both = args(&[]);
        both.members.clear();
        both.incremental = Some("/dev/a".to_owned());
        both.export = true;
        let err = run(&ctl, &sys, &both, true).unwrap_err();
        assert_eq!(err.exit_code(), EXIT_USAGE);
        assert!(ctl.assembled.borrow().is_empty());
    }
}
