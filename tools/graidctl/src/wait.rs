//! `graidctl wait ARRAY`: blocks until the array's rebuild ends, showing its progress: a bar
//! on a terminal, a plain line per 10 % otherwise (logs, scripts). Fails if the rebuild
//! stops (no readable copy of some data) or the member being rebuilt fails.

use crate::array_ref::{resolve, ArrayRef};
use crate::control::ControlDevice;
use crate::error::CtlError;
use crate::member::System;
use crate::output::{json, ArrayView, RebuildView};
use crate::size::format_sectors;
use indicatif::{ProgressBar, ProgressStyle};
use std::time::{Duration, Instant};

/// How often DETAIL is asked.
pub const POLL: Duration = Duration::from_millis(500);

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

/// The rate and time left of a rebuild between two samples.
fn rate_text(before: (Instant, u64), now: (Instant, u64), left_sectors: u64) -> String {
    let secs = now.0.duration_since(before.0).as_secs_f64();
    let sectors = now.1.saturating_sub(before.1);
    if secs <= 0.0 || sectors == 0 {
        return String::new();
    }
    let per_sec = sectors as f64 / secs;
    let eta = (left_sectors as f64 / per_sec).ceil() as u64;
    format!(
        ", {}/s, {} left",
        format_sectors(per_sec as u64),
        if eta >= 60 {
            format!("{}m{:02}s", eta / 60, eta % 60)
        } else {
            format!("{eta}s")
        }
    )
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
    let mut sample = (Instant::now(), view.rebuilt_sectors);
    let mut lines = String::new();
    let mut show = |r: &RebuildView, rate: &str| match progress {
        Progress::Bar(bar) => {
            bar.set_length(r.total_sectors * 512);
            bar.set_position(r.done_sectors * 512);
            bar.set_message(format!("{label}: rebuild of role {}", r.role));
        }
        Progress::Lines => {
            if r.percent as u64 / 10 > last_tenth {
                last_tenth = r.percent as u64 / 10;
                println!(
                    "graidctl: {label}: rebuild of role {} at {:.1}%{rate}",
                    r.role, r.percent
                );
            }
        }
        Progress::Quiet => {}
    };
    show(&first, "");
    loop {
        pause();
        let detail = resolve(ctl, sys, array)?;
        view = ArrayView::new(&detail, sys);
        let now = (Instant::now(), view.rebuilt_sectors);
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
            Some(r) => {
                let rate = rate_text(sample, now, r.total_sectors.saturating_sub(r.done_sectors));
                show(r, &rate);
            }
            None => break,
        }
        sample = now;
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
        match progress {
            Progress::Bar(bar) => {
                bar.set_length(s.total_sectors * 512);
                bar.set_position(s.done_sectors * 512);
                bar.set_message(format!("{label}: {}", s.action));
            }
            Progress::Lines if s.percent as u64 / 10 > last_tenth => {
                last_tenth = s.percent as u64 / 10;
                println!(
                    "graidctl: {label}: {} at {:.1}%, {} mismatched sectors so far",
                    s.action, s.percent, view.mismatch_sectors
                );
            }
            _ => {}
        }
        pause();
        view = ArrayView::new(&resolve(ctl, sys, array)?, sys);
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
    fn rate_and_time_left() {
        let t = Instant::now();
        let later = t + Duration::from_secs(2);
        // 2048 sectors (1 MiB) in 2 s, 61440 left: 60 s.
        assert_eq!(
            rate_text((t, 0), (later, 2048), 61440),
            ", 512 KiB/s, 1m00s left"
        );
        assert_eq!(rate_text((t, 5), (later, 5), 100), "");
    }
}
