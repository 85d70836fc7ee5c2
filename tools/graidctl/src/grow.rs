//! `graidctl grow ARRAY --size max|SIZE` (GRAID_IOC_RESIZE): after every member was replaced
//! by a larger device, each member's data area takes the room (md's `--grow --size`), online;
//! the array's capacity follows (so `lsblk`, `resize2fs` and `xfs_growfs` see it at once) and
//! the new room is resynced in the background (`graidctl wait`). SIZE is each member's data
//! area, as md's `--size`; `max` is all the room the smallest member (or spare) has. Growing
//! only: shrinking is refused.

use crate::array_ref::{resolve, ArrayRef};
use crate::control::ControlDevice;
use crate::errno::{ioctl_error, Op};
use crate::error::CtlError;
use crate::member::System;
use crate::nvmet::{Nvmet, NVMET_ROOT};
use crate::output::{json, ArrayView};
use crate::size::{format_sectors, parse_size};
use graid_abi::GraidResize;
use serde::Serialize;

/// The arguments of `grow`.
#[derive(clap::Args, Debug)]
pub struct GrowArgs {
    /// The array (see ARRAY below).
    array: String,
    /// Each member's data area: `max` for all the room the smallest member has past the data
    /// offset, or a size such as 900G (a bare number is KiB, as mdadm's --size); rounded down
    /// to whole chunks. Not smaller than now.
    #[arg(long)]
    size: String,
}

impl GrowArgs {
    pub fn array(&self) -> &str {
        &self.array
    }
}

#[derive(Debug, Serialize)]
struct Grown {
    array: String,
    /// Bytes, before and after.
    size_before: u64,
    size: u64,
    member_data_bytes: u64,
    resync: bool,
}

/// `--size` in sectors; 0 for `max`.
fn parse_member_size(text: &str) -> Result<u64, CtlError> {
    if text == "max" {
        return Ok(0);
    }
    let bytes = parse_size(text, 1024).map_err(|e| CtlError::Usage(format!("--size: {e}")))?;
    match bytes / 512 {
        0 => Err(CtlError::Usage(format!(
            "--size: '{text}' is less than a sector"
        ))),
        sectors => Ok(sectors),
    }
}

pub fn run(
    ctl: &dyn ControlDevice,
    sys: &dyn System,
    array: &ArrayRef,
    args: &GrowArgs,
    json_out: bool,
) -> Result<String, CtlError> {
    let wanted = parse_member_size(&args.size)?;
    let detail = resolve(ctl, sys, array)?;
    let view = ArrayView::new(&detail, sys);
    let label = view.label();
    if wanted != 0 && wanted < detail.member_data_sectors {
        return Err(CtlError::Failed(format!(
            "cannot grow {label}: --size {} is less than each member's {} in use; shrinking \
             is not supported (nothing changed)",
            format_sectors(wanted),
            format_sectors(detail.member_data_sectors)
        )));
    }
    let mut req = GraidResize {
        index: detail.index,
        flags: 0,
        member_data_sectors: wanted,
        array_sectors: 0,
        room_sectors: 0,
    };
    if let Err(e) = ctl.resize(&mut req) {
        if e.raw_os_error() == Some(libc::ENOSPC) {
            return Err(CtlError::Failed(format!(
                "cannot grow {label}: the smallest member or spare has room for {} of data \
                 (replace the smaller ones first; nothing changed)",
                format_sectors(req.room_sectors)
            )));
        }
        return Err(ioctl_error(Op::Resize { array: &label }, &e));
    }
    let resync = req.array_sectors > detail.size_sectors && detail.level != 0;
    // An NVMe-oF export's hosts hear of the new size (nvmet's namespace-changed notice).
    let exports = view.exports;
    if req.array_sectors != detail.size_sectors {
        for e in &exports {
            Nvmet::new(NVMET_ROOT).revalidate(&e.nqn).map_err(|err| {
                CtlError::Failed(format!(
                    "{label} grew, but its NVMe-oF export {} was not told: {err}",
                    e.nqn
                ))
            })?;
        }
    }
    if json_out {
        return Ok(json(&Grown {
            array: label,
            size_before: detail.size_sectors * 512,
            size: req.array_sectors * 512,
            member_data_bytes: req.member_data_sectors * 512,
            resync,
        }));
    }
    if req.array_sectors == detail.size_sectors {
        return Ok(format!(
            "graidctl: {label}: already {} ({} per member); nothing to grow\n",
            format_sectors(req.array_sectors),
            format_sectors(req.member_data_sectors)
        ));
    }
    let then = if resync {
        "; the new room resyncs in the background (graidctl wait)"
    } else {
        ""
    };
    let told = match exports.len() {
        0 => String::new(),
        _ => format!(
            "; NVMe-oF hosts told ({})",
            exports
                .iter()
                .map(|e| e.nqn.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    Ok(format!(
        "graidctl: {label}: grown from {} to {} ({} per member){then}{told}\n",
        format_sectors(detail.size_sectors),
        format_sectors(req.array_sectors),
        format_sectors(req.member_data_sectors)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::array_ref::parse;
    use crate::control::fake::{array, FakeControl};
    use crate::member::fake::FakeSystem;
    use graid_abi::GRAID_MEMBER_ACTIVE;

    fn go(ctl: &FakeControl, size: &str) -> Result<String, CtlError> {
        let sys = FakeSystem::with_disks(&["vda", "vdb"]);
        let args = GrowArgs {
            array: "m".to_owned(),
            size: size.to_owned(),
        };
        run(ctl, &sys, &parse("m").unwrap(), &args, false)
    }

    fn setup() -> FakeControl {
        let mut a = array(
            0,
            "m",
            1,
            &[(259, 0, GRAID_MEMBER_ACTIVE), (259, 1, GRAID_MEMBER_ACTIVE)],
        );
        a.member_data_sectors = 2048 * 1024;
        a.size_sectors = 2048 * 1024;
        let ctl = FakeControl::with(vec![a]);
        *ctl.room.borrow_mut() = 4 * 2048 * 1024;
        ctl
    }

    #[test]
    fn grows_to_the_room_or_a_size_and_says_what_follows() {
        let ctl = setup();
        assert_eq!(
            go(&ctl, "max").unwrap(),
            "graidctl: /dev/graid0 (m): grown from 1 GiB to 4 GiB (4 GiB per member); the new \
             room resyncs in the background (graidctl wait)\n"
        );
        assert_eq!(ctl.resizes.borrow()[0].member_data_sectors, 0);
        assert_eq!(
            go(&ctl, "4G").unwrap(),
            "graidctl: /dev/graid0 (m): already 4 GiB (4 GiB per member); nothing to grow\n"
        );
    }

    #[test]
    fn refuses_to_shrink_and_more_than_the_room_with_the_reason() {
        let ctl = setup();
        let e = go(&ctl, "512M").unwrap_err().to_string();
        assert!(e.contains("shrinking is not supported"), "{e}");
        assert!(ctl.resizes.borrow().is_empty(), "asked the module anyway");
        let e = go(&ctl, "8G").unwrap_err().to_string();
        assert!(e.contains("has room for 4 GiB"), "{e}");
        assert!(go(&ctl, "1x").unwrap_err().to_string().contains("--size"));
    }
}
