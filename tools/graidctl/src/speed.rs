//! `graidctl set-speed ARRAY [--min RATE] [--max RATE]`: a running array's rebuild speed limits
//! (GRAID_IOC_SPEED), as md's `sync_speed_min`/`sync_speed_max`: the floor is what the rebuild
//! keeps to while the array serves other I/O, the cap what it may reach while it is otherwise
//! idle (`--max 0`: none). Without options it prints them.

use crate::array_ref::{resolve, ArrayRef};
use crate::control::ControlDevice;
use crate::errno::{ioctl_error, Op};
use crate::error::CtlError;
use crate::member::System;
use crate::output::{json, ArrayView};
use crate::size::parse_size;
use graid_abi::{GraidSpeed, GRAID_SPEED_SET};
use serde::Serialize;

/// The arguments of `set-speed`.
#[derive(clap::Args, Debug)]
pub struct SpeedArgs {
    /// The array (see ARRAY below).
    array: String,
    /// Floor per second while the array serves other I/O, e.g. 200M (a bare number is KiB).
    #[arg(long)]
    min: Option<String>,
    /// Cap per second while it is otherwise idle, e.g. 2G; 0 for none.
    #[arg(long)]
    max: Option<String>,
}

impl SpeedArgs {
    pub fn array(&self) -> &str {
        &self.array
    }
}

#[derive(Debug, Serialize)]
struct Speeds {
    array: String,
    min_kib_per_sec: u32,
    /// 0: none.
    max_kib_per_sec: u32,
}

/// A rate in KiB/s from `200M`, `1G`, `512K` or a bare number of KiB.
fn parse_rate(text: &str, what: &str) -> Result<u32, CtlError> {
    let bytes = parse_size(text, 1024).map_err(|e| CtlError::Usage(format!("--{what}: {e}")))?;
    u32::try_from(bytes / 1024)
        .map_err(|_| CtlError::Usage(format!("--{what}: '{text}' is too large (at most 4 TiB/s)")))
}

fn rate_text(kibs: u32) -> String {
    match kibs {
        0 => "none".to_owned(),
        k if k % (1024 * 1024) == 0 => format!("{} GiB/s", k / (1024 * 1024)),
        k if k % 1024 == 0 => format!("{} MiB/s", k / 1024),
        k => format!("{k} KiB/s"),
    }
}

pub fn run(
    ctl: &dyn ControlDevice,
    sys: &dyn System,
    array: &ArrayRef,
    args: &SpeedArgs,
    json_out: bool,
) -> Result<String, CtlError> {
    let min = args
        .min
        .as_deref()
        .map(|t| parse_rate(t, "min"))
        .transpose()?;
    let max = args
        .max
        .as_deref()
        .map(|t| parse_rate(t, "max"))
        .transpose()?;
    if min == Some(0) {
        return Err(CtlError::Usage(
            "--min must be above 0 (the rebuild would never move under load)".to_owned(),
        ));
    }
    let detail = resolve(ctl, sys, array)?;
    let label = ArrayView::new(&detail, sys).label();
    let mut req = GraidSpeed {
        index: detail.index,
        flags: 0,
        min_kibs: min.unwrap_or(detail.speed_min_kibs),
        max_kibs: max.unwrap_or(detail.speed_max_kibs),
    };
    if min.is_some() || max.is_some() {
        if req.max_kibs != 0 && req.min_kibs > req.max_kibs {
            return Err(CtlError::Failed(format!(
                "cannot set the rebuild speed of {label}: the floor ({}) is above the cap ({}); \
                 nothing changed",
                rate_text(req.min_kibs),
                rate_text(req.max_kibs)
            )));
        }
        req.flags = GRAID_SPEED_SET;
    }
    ctl.speed(&mut req)
        .map_err(|e| ioctl_error(Op::Speed { array: &label }, &e))?;
    if json_out {
        return Ok(json(&Speeds {
            array: label,
            min_kib_per_sec: req.min_kibs,
            max_kib_per_sec: req.max_kibs,
        }));
    }
    Ok(format!(
        "graidctl: {label}: rebuild speed at least {} under load, at most {} idle\n",
        rate_text(req.min_kibs),
        rate_text(req.max_kibs)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::array_ref::parse;
    use crate::control::fake::{array, FakeControl};
    use crate::member::fake::FakeSystem;
    use graid_abi::GRAID_MEMBER_ACTIVE;

    fn go(ctl: &FakeControl, min: Option<&str>, max: Option<&str>) -> Result<String, CtlError> {
        let sys = FakeSystem::with_disks(&["vda", "vdb"]);
        let args = SpeedArgs {
            array: "m".to_owned(),
            min: min.map(str::to_owned),
            max: max.map(str::to_owned),
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
        a.speed_min_kibs = 100 * 1024;
        FakeControl::with(vec![a])
    }

    #[test]
    fn sets_and_shows_the_limits() {
        let ctl = setup();
        assert_eq!(
            go(&ctl, None, None).unwrap(),
            "graidctl: /dev/graid0 (m): rebuild speed at least 100 MiB/s under load, at most \
             none idle\n"
        );
        go(&ctl, Some("20M"), Some("1G")).unwrap();
        let a = ctl.arrays.borrow()[0];
        assert_eq!(
            (a.speed_min_kibs, a.speed_max_kibs),
            (20 * 1024, 1024 * 1024)
        );
        // One given, the other kept.
        go(&ctl, None, Some("40960")).unwrap();
        assert_eq!(ctl.arrays.borrow()[0].speed_max_kibs, 40 * 1024);
    }

    #[test]
    fn refuses_nonsense_and_changes_nothing() {
        let ctl = setup();
        assert!(matches!(go(&ctl, Some("0"), None), Err(CtlError::Usage(_))));
        assert!(matches!(
            go(&ctl, Some("fast"), None),
            Err(CtlError::Usage(_))
        ));
        let err = go(&ctl, Some("2G"), Some("1G")).unwrap_err();
        assert!(err.to_string().contains("above the cap"), "{err}");
        assert_eq!(ctl.arrays.borrow()[0].speed_min_kibs, 100 * 1024);
    }
}
