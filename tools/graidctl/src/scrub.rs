//! `graidctl check ARRAY` and `graidctl repair ARRAY` (GRAID_IOC_SCRUB): start a scrub of every
//! copy (RAID 1/10) or every stripe's parity (RAID 5/6) in the background, counting mismatches
//! (`check`) or also rewriting them (`repair`: the other copies from the first, the parity from
//! the data, as md does); `--wait` follows it to the end, `--stop` stops it.

use crate::array_ref::{resolve, ArrayRef};
use crate::control::ControlDevice;
use crate::errno::{ioctl_error, Op};
use crate::error::CtlError;
use crate::member::System;
use crate::output::{json, ArrayView};
use crate::wait;
use graid_abi::{GraidScrub, GRAID_SCRUB_CHECK, GRAID_SCRUB_IDLE, GRAID_SCRUB_REPAIR};

/// The arguments of `check` and `repair`.
#[derive(clap::Args, Debug)]
pub struct ScrubArgs {
    /// The array (see ARRAY below).
    #[arg(required_unless_present = "scheduled", conflicts_with = "scheduled")]
    array: Option<String>,
    /// Wait until it ends, showing progress, and print the mismatches found.
    #[arg(long, conflicts_with = "stop")]
    wait: bool,
    /// Stop the check or repair running instead (its counts stay in detail); a resync the
    /// array needs goes on.
    #[arg(long)]
    stop: bool,
    /// check only: start a check on every running array that graid.conf does not leave out
    /// (ARRAY ... check=no) and that is optimal and idle; what graid-check.timer runs.
    #[arg(long, conflicts_with_all = ["wait", "stop"])]
    pub scheduled: bool,
}

/// `graidctl check|repair ARRAY` on the real control device.
pub fn main(
    args: &ScrubArgs,
    which: Scrub,
    sys: &dyn System,
    json_out: bool,
) -> Result<String, CtlError> {
    if args.scheduled {
        if which != Scrub::Check {
            return Err(CtlError::Usage(
                "--scheduled starts checks; repairs are the admin's call".to_owned(),
            ));
        }
        let config = crate::config::load()?;
        return scheduled(&crate::control::Control::open_checked()?, sys, &config);
    }
    let array = crate::array_ref::parse(args.array.as_deref().unwrap_or_default())?;
    let mut pause = || std::thread::sleep(wait::POLL);
    run(
        &crate::control::Control::open_checked()?,
        sys,
        &array,
        which,
        args,
        json_out,
        &mut pause,
    )
}

/// Which scrub.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scrub {
    Check,
    Repair,
}

impl Scrub {
    pub fn name(self) -> &'static str {
        match self {
            Self::Check => "check",
            Self::Repair => "repair",
        }
    }
}

pub fn run(
    ctl: &dyn ControlDevice,
    sys: &dyn System,
    array: &ArrayRef,
    which: Scrub,
    args: &ScrubArgs,
    json_out: bool,
    pause: &mut dyn FnMut(),
) -> Result<String, CtlError> {
    let detail = resolve(ctl, sys, array)?;
    let label = ArrayView::new(&detail, sys).label();
    let action = match (args.stop, which) {
        (true, _) => GRAID_SCRUB_IDLE,
        (false, Scrub::Check) => GRAID_SCRUB_CHECK,
        (false, Scrub::Repair) => GRAID_SCRUB_REPAIR,
    };
    let req = GraidScrub {
        index: detail.index,
        action,
    };
    ctl.scrub(&req).map_err(|e| {
        ioctl_error(
            Op::Scrub {
                array: &label,
                what: which.name(),
            },
            &e,
        )
    })?;
    if args.wait && !args.stop {
        let progress = wait::Progress::for_output(json_out);
        return wait::wait_scrub(ctl, sys, array, which.name(), &progress, json_out, pause);
    }
    if json_out {
        let after = ctl.detail(detail.index).unwrap_or(detail);
        return Ok(json(&ArrayView::new(&after, sys)));
    }
    Ok(if args.stop {
        format!(
            "graidctl: {label}: check, repair or resync stopped (a resync goes on at the next \
             repair or assembly)\n"
        )
    } else {
        format!(
            "graidctl: {label}: {} started (graidctl wait follows it; graidctl detail shows \
             mismatches)\n",
            which.name()
        )
    })
}

/// `check --scheduled`: a check of every running array `config` does not leave out, that is
/// optimal (a check needs every member) and not busy with a rebuild, check or replace. Each
/// array's outcome is a line; an array the module refuses makes the exit status 1, the others
/// are still started.
pub fn scheduled(
    ctl: &dyn ControlDevice,
    sys: &dyn System,
    config: &crate::config::Config,
) -> Result<String, CtlError> {
    let mut out = String::new();
    let mut refused = Vec::new();
    for d in crate::array_ref::running_arrays(ctl)? {
        let a = ArrayView::new(&d, sys);
        let label = a.label();
        let skip = if config.array(&d.uuid).is_some_and(|l| !l.check) {
            Some(format!("check=no in {}", crate::config::CONFIG_PATH))
        } else if a.level == "raid0" {
            Some("RAID 0 keeps no copy or parity to compare".to_owned())
        } else if a.state != "optimal" {
            Some(format!("it is {} (a check needs every member)", a.state))
        } else if a.rebuild.is_some() || a.scrub.is_some() || a.replace.is_some() {
            Some("busy with a rebuild, check, resync or replace".to_owned())
        } else {
            None
        };
        if let Some(why) = skip {
            out.push_str(&format!("graidctl: {label}: not checked: {why}\n"));
            continue;
        }
        let req = GraidScrub {
            index: d.index,
            action: GRAID_SCRUB_CHECK,
        };
        match ctl.scrub(&req) {
            Ok(()) => out.push_str(&format!("graidctl: {label}: check started\n")),
            Err(e) => refused.push(
                ioctl_error(
                    Op::Scrub {
                        array: &label,
                        what: "check",
                    },
                    &e,
                )
                .to_string(),
            ),
        }
    }
    if refused.is_empty() {
        Ok(out)
    } else {
        Err(CtlError::Partial {
            stdout: out,
            message: refused.join("; "),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::array_ref::parse;
    use crate::control::fake::{array, FakeControl};
    use crate::member::fake::FakeSystem;
    use graid_abi::GRAID_MEMBER_ACTIVE;

    fn setup() -> (FakeControl, FakeSystem) {
        let a = array(
            0,
            "m",
            1,
            &[(259, 0, GRAID_MEMBER_ACTIVE), (259, 1, GRAID_MEMBER_ACTIVE)],
        );
        (
            FakeControl::with(vec![a]),
            FakeSystem::with_disks(&["vda", "vdb"]),
        )
    }

    fn args(wait: bool, stop: bool) -> ScrubArgs {
        ScrubArgs {
            array: Some("m".to_owned()),
            wait,
            stop,
            scheduled: false,
        }
    }

    #[test]
    fn starts_waits_and_stops() {
        let (ctl, sys) = setup();
        let m = parse("m").unwrap();
        let out = run(
            &ctl,
            &sys,
            &m,
            Scrub::Check,
            &args(false, false),
            false,
            &mut || {},
        )
        .unwrap();
        assert_eq!(
            out,
            "graidctl: /dev/graid0 (m): check started (graidctl wait follows it; graidctl \
             detail shows mismatches)\n"
        );
        assert_eq!(ctl.scrubs.borrow()[0].action, GRAID_SCRUB_CHECK);
        // A repair waited for: the fake finishes it with 8 mismatched sectors.
        let mut pause = || {
            let mut arrays = ctl.arrays.borrow_mut();
            arrays[0].scrub_action = GRAID_SCRUB_IDLE;
            arrays[0].mismatch_sectors = 8;
        };
        let out = run(
            &ctl,
            &sys,
            &m,
            Scrub::Repair,
            &args(true, false),
            false,
            &mut pause,
        )
        .unwrap();
        assert_eq!(
            out,
            "graidctl: /dev/graid0 (m): repair finished: 8 mismatched sectors\n"
        );
        // One that stops before its end (a window it could not make consistent) is an error.
        let mut pause = || {
            let mut arrays = ctl.arrays.borrow_mut();
            arrays[0].scrub_action = GRAID_SCRUB_IDLE;
            arrays[0].flags |= graid_abi::GRAID_DETAIL_SCRUB_STALLED;
            arrays[0].scrub_done = arrays[0].scrub_total / 2;
        };
        let err = run(
            &ctl,
            &sys,
            &m,
            Scrub::Check,
            &args(true, false),
            false,
            &mut pause,
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("the check stopped at 50.0%: a window could not be made consistent"),
            "{err}"
        );
        ctl.arrays.borrow_mut()[0].flags = 0;
        run(
            &ctl,
            &sys,
            &m,
            Scrub::Check,
            &args(false, true),
            false,
            &mut || {},
        )
        .unwrap();
        assert_eq!(ctl.scrubs.borrow()[3].action, GRAID_SCRUB_IDLE);
    }

    #[test]
    fn scheduled_checks_skip_what_is_left_out_degraded_or_busy() {
        use crate::config::{ArrayLine, Config};
        use graid_abi::{GRAID_ARRAY_DEGRADED, GRAID_MEMBER_FAULTY};
        let two = [(259, 0, GRAID_MEMBER_ACTIVE), (259, 1, GRAID_MEMBER_ACTIVE)];
        let mut degraded = array(2, "d", 1, &[(259, 0, 0), (259, 1, GRAID_MEMBER_FAULTY)]);
        degraded.state = GRAID_ARRAY_DEGRADED;
        let mut busy = array(3, "b", 1, &two);
        busy.scrub_action = GRAID_SCRUB_CHECK;
        let ctl = FakeControl::with(vec![
            array(0, "m", 1, &two),
            array(1, "out", 5, &two),
            degraded,
            busy,
            array(4, "r0", 0, &two),
        ]);
        let sys = FakeSystem::with_disks(&["vda", "vdb"]);
        let config = Config {
            arrays: vec![ArrayLine {
                name: "out".to_owned(),
                uuid: [2; 16],
                check: false,
            }],
            ..Config::default()
        };
        let out = scheduled(&ctl, &sys, &config).unwrap();
        assert_eq!(
            out,
            "graidctl: /dev/graid0 (m): check started\n\
             graidctl: /dev/graid1 (out): not checked: check=no in /etc/graid/graid.conf\n\
             graidctl: /dev/graid2 (d): not checked: it is degraded (a check needs every \
             member)\n\
             graidctl: /dev/graid3 (b): not checked: busy with a rebuild, check, resync or \
             replace\n\
             graidctl: /dev/graid4 (r0): not checked: RAID 0 keeps no copy or parity to \
             compare\n"
        );
        assert_eq!(ctl.scrubs.borrow().len(), 1);
        assert_eq!(ctl.scrubs.borrow()[0].index, 0);
    }

    #[test]
    fn the_modules_refusal_is_explained() {
        let (ctl, sys) = setup();
        ctl.fail.borrow_mut().push(("scrub", libc::EBUSY));
        let err = run(
            &ctl,
            &sys,
            &parse("m").unwrap(),
            Scrub::Check,
            &args(false, false),
            false,
            &mut || {},
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("cannot check /dev/graid0 (m): the array is not optimal"),
            "{err}"
        );
    }
}
