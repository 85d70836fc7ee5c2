//! `graidctl wait ARRAY`: blocks until the array's rebuild ends, showing its progress: a bar
//! on a terminal, a plain line per 10 % otherwise (logs, scripts). Fails if the rebuild
//! stops (no readable copy of some data) or the member being rebuilt fails.

use crate::array_ref::{resolve, ArrayRef};
use crate::control::ControlDevice;
use crate::error::CtlError;
use crate::member::System;
use crate::output::{json, speed_text, ArrayView, RebuildView, SCRUB_STOPPED};
use indicatif::{ProgressBar, ProgressStyle};
use std::time::Duration;

/// How often DETAIL is asked (an ioctl that copies a few KiB: cheap; often enough that a
/// script timing a rebuild of a second or two sees its end).
pub const POLL: Duration = Duration::from_millis(100);

/// Where progress goes.
pub enum Progress {
    /// A bar on the terminal (stderr).
    Bar(ProgressBar),
    /// Plain lines on stdout, one per 10 %.
    Lines,
    /// Nothing (`--json`: only the final state is printed).
    Quiet,
}

impl Progress {
    /// A bar when stderr is a terminal, lines otherwise; nothing with `--json`.
    pub fn for_output(json_out: bool) -> Self {
        use std::io::IsTerminal;
        if json_out {
            Self::Quiet
        } else if std::io::stderr().is_terminal() {
            let bar = ProgressBar::new(0);
            if let Ok(style) = ProgressStyle::with_template(
                "{msg} [{bar:40}] {percent:>3}% {binary_bytes_per_sec} ETA {eta}",
            ) {
                bar.set_style(style.progress_chars("=> "));
            }
            Self::Bar(bar)
        } else {
            Self::Lines
        }
    }
}

/// Where a background job stands, for [`Progress::show`].
struct Step<'a> {
    /// `/dev/graid0 (data): rebuild of role 1`.
    what: &'a str,
    done_sectors: u64,
    total_sectors: u64,
    percent: f64,
    /// What a plain line adds after the percentage (`, 96 MiB/s, 8s left`).
    tail: &'a str,
}

impl Progress {
    /// Shows `step`: moves the bar, or prints a line when another tenth is reached
    /// (`last_tenth` keeps the last one printed).
    fn show(&self, step: &Step<'_>, last_tenth: &mut u64) {
        match self {
            Progress::Bar(bar) => {
                bar.set_length(step.total_sectors * 512);
                bar.set_position(step.done_sectors * 512);
                bar.set_message(step.what.to_owned());
            }
            Progress::Lines if step.percent as u64 / 10 > *last_tenth => {
                *last_tenth = step.percent as u64 / 10;
                println!(
                    "graidctl: {} at {:.1}%{}",
                    step.what, step.percent, step.tail
                );
            }
            _ => {}
        }
    }
}

/// Waits for `array`'s rebuild: `pause` sleeps between looks (`std::thread::sleep(POLL)`).
pub fn run(
    ctl: &dyn ControlDevice,
    sys: &dyn System,
    array: &ArrayRef,
    progress: &Progress,
    json_out: bool,
    pause: &mut dyn FnMut(),
) -> Result<String, CtlError> {
    let mut view = ArrayView::new(&resolve(ctl, sys, array)?, sys);
    let label = view.label();
    if let Some(first) = crate::grow_members::reshape_view(ctl, view.index) {
        return wait_reshape(ctl, sys, array, first, progress, json_out, pause);
    }
    if let (None, Some(_)) = (&view.rebuild, &view.replace) {
        return wait_replace(ctl, sys, array, progress, json_out, pause);
    }
    if let (None, Some(scrub)) = (&view.rebuild, &view.scrub) {
        let action = scrub.action.clone();
        return wait_scrub(ctl, sys, array, &action, progress, json_out, pause);
    }
    let Some(first) = view.rebuild.clone() else {
        return Ok(finished(
            &view,
            json_out,
            format!("{label}: no rebuild, check or repair running\n"),
        ));
    };
    let role = first.role;
    let mut last_tenth = first.percent as u64 / 10;
    let mut lines = String::new();
    let mut show = |r: &RebuildView, tail: &str| {
        let what = format!("{label}: rebuild of role {}", r.role);
        let step = Step {
            what: &what,
            done_sectors: r.done_sectors,
            total_sectors: r.total_sectors,
            percent: r.percent,
            tail,
        };
        progress.show(&step, &mut last_tenth);
    };
    show(&first, "");
    loop {
        pause();
        let detail = resolve(ctl, sys, array)?;
        view = ArrayView::new(&detail, sys);
        match &view.rebuild {
            Some(r) if r.stalled => {
                if let Progress::Bar(bar) = progress {
                    bar.abandon();
                }
                return Err(CtlError::Failed(format!(
                    "{label}: the rebuild of role {} stopped at {:.1}%: some data has no \
                     readable copy (graidctl detail; the kernel log names the member)",
                    r.role, r.percent
                )));
            }
            // The module's own measure of the speed (DETAIL's `rate_kibs`).
            Some(r) => show(r, &speed_text(r.rate_kibs, r.seconds_left)),
            None => break,
        }
    }
    if let Progress::Bar(bar) = progress {
        bar.finish_and_clear();
    }
    let state = view
        .members
        .iter()
        .find(|m| m.role == role)
        .map_or("missing", |m| m.state.as_str());
    if state != "active" {
        return Err(CtlError::Failed(format!(
            "{label}: the member being rebuilt (role {role}) is {state} now: the rebuild did \
             not complete"
        )));
    }
    lines.push_str(&format!(
        "graidctl: {label}: rebuild of role {role} finished\n"
    ));
    Ok(finished(&view, json_out, lines))
}

/// Waits for a replace (the rebuild's counterpart of `run`); fails if the replacement did not
/// take the member's place (it failed, or the member did and it is a spare again).
fn wait_replace(
    ctl: &dyn ControlDevice,
    sys: &dyn System,
    array: &ArrayRef,
    progress: &Progress,
    json_out: bool,
    pause: &mut dyn FnMut(),
) -> Result<String, CtlError> {
    let mut view = ArrayView::new(&resolve(ctl, sys, array)?, sys);
    let label = view.label();
    // It ended since the caller looked: say so, as when nothing ran.
    let Some(first) = view.replace.clone() else {
        return Ok(finished(
            &view,
            json_out,
            format!("{label}: no rebuild, check or repair running\n"),
        ));
    };
    let (role, mut last) = (first.role, first.clone());
    let mut last_tenth = first.percent as u64 / 10;
    while let Some(r) = view.replace.clone() {
        let step = Step {
            what: &format!("{label}: replace of role {role}"),
            done_sectors: r.done_sectors,
            total_sectors: r.total_sectors,
            percent: r.percent,
            tail: &speed_text(r.rate_kibs, r.seconds_left),
        };
        progress.show(&step, &mut last_tenth);
        last = r;
        pause();
        view = ArrayView::new(&resolve(ctl, sys, array)?, sys);
    }
    if let Progress::Bar(bar) = progress {
        bar.finish_and_clear();
    }
    let now = view.members.iter().find(|m| m.role == role);
    let took = now.is_some_and(|m| (m.major, m.minor) == (last.major, last.minor));
    if !took {
        let why = match last.state.as_str() {
            "abandoned" => {
                format!("role {role} failed meanwhile: the replacement is a spare again")
            }
            _ => "the replacement failed (the kernel log says why); the member stays".to_owned(),
        };
        return Err(CtlError::Failed(format!(
            "{label}: the replace of role {role} did not complete: {why}"
        )));
    }
    let text = format!(
        "graidctl: {label}: replace of role {role} finished: {} took its place\n",
        last.device_text()
    );
    Ok(finished(&view, json_out, text))
}

/// Waits for a restripe (the rebuild's counterpart of `run`); fails if it stands still (data
/// it cannot read even through the parity).
fn wait_reshape(
    ctl: &dyn ControlDevice,
    sys: &dyn System,
    array: &ArrayRef,
    first: crate::grow_members::ReshapeView,
    progress: &Progress,
    json_out: bool,
    pause: &mut dyn FnMut(),
) -> Result<String, CtlError> {
    let mut view = ArrayView::new(&resolve(ctl, sys, array)?, sys);
    let label = view.label();
    let what = format!("{label}: restripe");
    let mut last_tenth = 0;
    let mut now = Some(first);
    while let Some(r) = now {
        if r.state == "stalled" {
            if let Progress::Bar(bar) = progress {
                bar.abandon();
            }
            return Err(CtlError::Failed(format!(
                "{label}: the restripe stands still at {:.1}%: data it needs cannot be read, \
                 even through the parity (tried again every second; graidctl detail shows \
                 the members)",
                r.percent
            )));
        }
        let step = Step {
            what: &what,
            done_sectors: r.moved_bytes / 512,
            total_sectors: r.total_bytes / 512,
            percent: r.percent,
            tail: "",
        };
        progress.show(&step, &mut last_tenth);
        pause();
        view = ArrayView::new(&resolve(ctl, sys, array)?, sys);
        now = crate::grow_members::reshape_view(ctl, view.index);
    }
    if let Progress::Bar(bar) = progress {
        bar.finish_and_clear();
    }
    let text = format!(
        "graidctl: {label}: restripe finished: {} members, chunk {}, {}\n",
        view.raid_devices,
        crate::size::format_sectors(u64::from(view.chunk_sectors)),
        crate::size::format_sectors(view.size_sectors)
    );
    Ok(finished(&view, json_out, text))
}

/// Waits for a check or repair (the rebuild's counterpart of `run`); prints the mismatches
/// found at the end (at once if it already ended).
pub fn wait_scrub(
    ctl: &dyn ControlDevice,
    sys: &dyn System,
    array: &ArrayRef,
    action: &str,
    progress: &Progress,
    json_out: bool,
    pause: &mut dyn FnMut(),
) -> Result<String, CtlError> {
    let mut view = ArrayView::new(&resolve(ctl, sys, array)?, sys);
    let label = view.label();
    let mut last_tenth = 0;
    while let Some(s) = view.scrub.clone() {
        let step = Step {
            what: &format!("{label}: {}", s.action),
            done_sectors: s.done_sectors,
            total_sectors: s.total_sectors,
            percent: s.percent,
            tail: &format!(", {} mismatched sectors so far", view.mismatch_sectors),
        };
        progress.show(&step, &mut last_tenth);
        pause();
        view = ArrayView::new(&resolve(ctl, sys, array)?, sys);
    }
    if let Some(percent) = view.scrub_stopped_percent {
        if let Progress::Bar(bar) = progress {
            bar.abandon();
        }
        return Err(CtlError::Failed(format!(
            "{label}: the {action} stopped at {percent:.1}%: {SCRUB_STOPPED} ({} mismatched \
             sectors so far)",
            view.mismatch_sectors
        )));
    }
    if let Progress::Bar(bar) = progress {
        bar.finish_and_clear();
    }
    let text = format!(
        "graidctl: {label}: {action} finished: {} mismatched sectors\n",
        view.mismatch_sectors
    );
    Ok(finished(&view, json_out, text))
}

fn finished(view: &ArrayView, json_out: bool, text: String) -> String {
    if json_out {
        json(view)
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::array_ref::parse;
    use crate::control::fake::{array, FakeControl};
    use crate::member::fake::FakeSystem;
    use graid_abi::{
        GRAID_DETAIL_REBUILD_STALLED, GRAID_MEMBER_ACTIVE, GRAID_MEMBER_FAULTY,
        GRAID_MEMBER_REBUILDING,
    };

    fn wait_quietly(
        ctl: &FakeControl,
        sys: &FakeSystem,
        pause: &mut dyn FnMut(),
    ) -> Result<String, CtlError> {
        run(
            ctl,
            sys,
            &parse("m").unwrap(),
            &Progress::Quiet,
            false,
            pause,
        )
    }

    fn rebuilding() -> (FakeControl, FakeSystem) {
        let sys = FakeSystem::with_disks(&["vda", "vdb"]);
        let mut a = array(
            0,
            "m",
            1,
            &[
                (259, 0, GRAID_MEMBER_ACTIVE),
                (259, 1, GRAID_MEMBER_REBUILDING),
            ],
        );
        a.member_data_sectors = 1000;
        a.members[1].recovery_offset = 0;
        (FakeControl::with(vec![a]), sys)
    }

    #[test]
    fn waits_until_the_rebuild_ends() {
        let (ctl, sys) = rebuilding();
        let mut looks = 0;
        let mut pause = || {
            looks += 1;
            let mut arrays = ctl.arrays.borrow_mut();
            let a = &mut arrays[0];
            a.rebuilt_sectors += 250;
            if looks < 4 {
                a.members[1].recovery_offset = 250 * looks;
            } else {
                a.members[1].state = GRAID_MEMBER_ACTIVE;
                a.members[1].recovery_offset = u64::MAX;
            }
        };
        let out = wait_quietly(&ctl, &sys, &mut pause);
        assert_eq!(
            out.unwrap(),
            "graidctl: /dev/graid0 (m): rebuild of role 1 finished\n"
        );
        assert_eq!(looks, 4);
    }

    #[test]
    fn nothing_to_wait_for() {
        let (ctl, sys) = rebuilding();
        ctl.arrays.borrow_mut()[0].members[1].state = GRAID_MEMBER_ACTIVE;
        let out = wait_quietly(&ctl, &sys, &mut || panic!("waited"));
        assert_eq!(
            out.unwrap(),
            "/dev/graid0 (m): no rebuild, check or repair running\n"
        );
    }

    #[test]
    fn a_stalled_or_failed_rebuild_is_an_error() {
        let (ctl, sys) = rebuilding();
        let mut pause = || ctl.arrays.borrow_mut()[0].flags |= GRAID_DETAIL_REBUILD_STALLED;
        let err = wait_quietly(&ctl, &sys, &mut pause).unwrap_err();
        assert!(err.to_string().contains("no readable copy"), "{err}");

        let (ctl, sys) = rebuilding();
        let mut pause = || ctl.arrays.borrow_mut()[0].members[1].state = GRAID_MEMBER_FAULTY;
        let err = wait_quietly(&ctl, &sys, &mut pause).unwrap_err();
        assert!(err.to_string().contains("role 1) is faulty"), "{err}");
    }

    #[test]
    fn waits_for_a_replace_and_says_whether_it_took_the_place() {
        for (ends_well, want) in [
            (true, "replace of role 1 finished: /dev/vdc took its place"),
            (false, "did not complete: the replacement failed"),
        ] {
            let sys = FakeSystem::with_disks(&["vda", "vdb", "vdc"]);
            let mut a = array(
                0,
                "m",
                1,
                &[(259, 0, GRAID_MEMBER_ACTIVE), (259, 1, GRAID_MEMBER_ACTIVE)],
            );
            a.member_data_sectors = 1000;
            a.replace_role = 1;
            a.replace_state = graid_abi::GRAID_REPLACE_COPYING;
            a.replace_dev = graid_abi::GraidMember {
                major: 259,
                minor: 2,
            };
            let ctl = FakeControl::with(vec![a]);
            let mut looks = 0;
            let mut pause = || {
                looks += 1;
                let mut arrays = ctl.arrays.borrow_mut();
                let a = &mut arrays[0];
                a.replace_copied += 400;
                if looks == 3 {
                    a.replace_role = graid_abi::GRAID_ROLE_NONE;
                    if ends_well {
                        a.members[1].dev = a.replace_dev;
                    }
                }
            };
            let out = wait_quietly(&ctl, &sys, &mut pause);
            let text = match out {
                Ok(text) => text,
                Err(e) => e.to_string(),
            };
            assert!(text.contains(want), "{text}");
            assert_eq!(looks, 3);
        }
    }
}
