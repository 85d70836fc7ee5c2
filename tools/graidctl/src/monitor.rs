//! `graidctl monitor`: mdadm's `--monitor` for graid. It looks at every running array and the
//! parity helper, again whenever the module sends a uevent for an array and at least every
//! `--delay` seconds, and reports what changed between two looks as events: to standard output
//! (the journal, under systemd), to syslog with `--syslog`, and to `--program` (mdadm's contract:
//! `PROGRAM EVENT DEVICE [MEMBER]`, plus `GRAID_*` variables).
//!
//! Events come from comparing looks, not from the uevents alone, so none is lost when the
//! monitor was busy or started late, and the same code serves `--oneshot`.

use crate::control::ControlDevice;
use crate::error::{CtlError, EXIT_ARRAY_FAILED, EXIT_DEGRADED, EXIT_MODULE_MISSING};
use crate::helper::{self, HelperView};
use crate::kernel_module;
use crate::member::System;
use crate::output::{running_views, ArrayView, MemberView};
use std::collections::BTreeMap;
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// The arguments of `graidctl monitor`.
#[derive(clap::Args, Debug)]
pub struct MonitorArgs {
    /// Look once, report degraded and failed arrays, and exit: 0 when every array is optimal,
    /// 6 when one is degraded, 7 when one has failed, 8 when raid_gpu is not installed for the
    /// running kernel (module-missing), 3 when it is but is not loaded (for cron or a health
    /// check).
    #[arg(short = '1', long)]
    oneshot: bool,
    /// Run PROGRAM for each event, as `PROGRAM EVENT DEVICE [MEMBER]` (mdadm's contract), with
    /// GRAID_EVENT, GRAID_DEVICE, GRAID_MEMBER, GRAID_NAME, GRAID_UUID and GRAID_MESSAGE set
    /// [default: PROGRAM in /etc/graid/graid.conf].
    #[arg(short, long, value_name = "PROGRAM")]
    program: Option<PathBuf>,
    /// Also send the events to syslog (facility daemon).
    #[arg(short = 'y', long)]
    syslog: bool,
    /// Look at least every SECONDS (a uevent from an array makes it look at once).
    #[arg(short, long, value_name = "SECONDS", default_value_t = 5,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    delay: u64,
    /// Send a test-message event for each array at start (mdadm's --test), to check that the
    /// program and the log receive them.
    #[arg(short, long)]
    test: bool,
}

/// One thing that happened, as the program gets it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// `member-failed`, `rebuild-40`, `check-finished`, ... (see `Documentation/graidctl.rst`).
    pub name: String,
    /// `/dev/graidN`, `/dev/graid-helper` for the helper's events, `raid_gpu` (the module)
    /// for `module-missing`.
    pub device: String,
    /// The member's device (or `role N` when it has none), for member events.
    pub member: Option<String>,
    /// The array's name and UUID, empty for the helper's and the module's events.
    pub array_name: String,
    pub uuid: String,
    /// What people read: the numbers behind the event.
    pub message: String,
}

/// What one look saw.
#[derive(Debug, Default)]
pub struct Look {
    /// The running arrays by UUID (names and devices can change; the UUID does not).
    pub arrays: BTreeMap<String, ArrayView>,
    pub helper: Option<HelperView>,
}

impl Look {
    pub fn take(ctl: &dyn ControlDevice, sys: &dyn System) -> Result<Self, CtlError> {
        let arrays = running_views(ctl, sys)?
            .into_iter()
            .map(|view| (view.uuid.clone(), view))
            .collect();
        Ok(Self {
            arrays,
            helper: helper::status(ctl),
        })
    }
}

const HELPER_DEVICE: &str = "/dev/graid-helper";

/// Rebuild progress worth an event, in percent (mdadm's Rebuild20 ... Rebuild80).
const REBUILD_STEPS: [u32; 4] = [20, 40, 60, 80];

/// The events between look `before` (None: the monitor just started) and look `now`.
/// `scrubs`: whether to report checks', repairs' and resyncs' ends from the looks (a scrub
/// that starts and ends between two looks is missed there; with the module's uevents the
/// monitor takes them from those instead, see [`scrub_event`]).
pub fn events(before: Option<&Look>, now: &Look, scrubs: bool) -> Vec<Event> {
    let mut out = Vec::new();
    for (uuid, a) in &now.arrays {
        match before.map(|b| b.arrays.get(uuid)) {
            None => start_events(a, &mut out),
            Some(None) => {
                out.push(array_event(a, "new-array", None, a.state.clone()));
                start_events(a, &mut out);
            }
            Some(Some(was)) => array_changes(was, a, scrubs, &mut out),
        }
    }
    if let Some(before) = before {
        for (uuid, was) in &before.arrays {
            if !now.arrays.contains_key(uuid) {
                out.push(array_event(
                    was,
                    "device-disappeared",
                    None,
                    "stopped".to_owned(),
                ));
            }
        }
        helper_changes(before.helper.as_ref(), now.helper.as_ref(), &mut out);
    }
    out
}

/// What a monitor reports about an array it sees for the first time: trouble.
fn start_events(a: &ArrayView, out: &mut Vec<Event>) {
    match a.state.as_str() {
        "optimal" => {}
        "degraded" => out.push(array_event(a, "degraded-array", None, degraded_message(a))),
        state => out.push(array_event(a, "array-failed", None, state.to_owned())),
    }
}

fn degraded_message(a: &ArrayView) -> String {
    let down: Vec<String> = a
        .members
        .iter()
        .filter(|m| m.state != "active")
        .map(|m| format!("role {} {}", m.role, m.state))
        .collect();
    format!(
        "{} of {} members active ({})",
        a.members.len() - down.len(),
        a.members.len(),
        down.join(", ")
    )
}

fn array_changes(was: &ArrayView, a: &ArrayView, scrubs: bool, out: &mut Vec<Event>) {
    for m in &a.members {
        let Some(old) = was.members.iter().find(|o| o.role == m.role) else {
            continue;
        };
        let same_device = old.rdev() == m.rdev();
        match (old.state.as_str(), m.state.as_str()) {
            ("active" | "rebuilding", "faulty") if same_device => out.push(array_event(
                a,
                "member-failed",
                Some(member_name(m)),
                format!("role {} failed; array {}", m.role, a.state),
            )),
            (_, "rebuilding" | "active") if !same_device && was_spare(was, m) => {
                out.push(array_event(
                    a,
                    "spare-active",
                    Some(member_name(m)),
                    format!("the spare took role {}'s place", m.role),
                ))
            }
            _ => {}
        }
    }
    rebuild_changes(was, a, out);
    reshape_changes(was, a, out);
    if a.parity_heal && !was.parity_heal {
        out.push(array_event(
            a,
            "parity-heal-started",
            None,
            "a helper was caught lying: resyncing the parity it may have computed unchecked".into(),
        ));
    } else if was.parity_heal && !a.parity_heal {
        out.push(array_event(
            a,
            "parity-healed",
            None,
            "the parity a lying helper may have computed was rewritten".into(),
        ));
    }
    if scrubs {
        scrub_changes(was, a, out);
    }
    if was.state != a.state {
        match a.state.as_str() {
            "failed" | "broken" => out.push(array_event(a, "array-failed", None, a.state.clone())),
            "optimal" => out.push(array_event(
                a,
                "array-optimal",
                None,
                "every member active".into(),
            )),
            _ => {}
        }
    }
    if a.spares.len() < was.spares.len() && a.spares.is_empty() && a.state != "optimal" {
        // Nothing left to take the next failure.
        out.push(array_event(
            a,
            "spares-missing",
            None,
            "no spare left".into(),
        ));
    }
}

fn was_spare(was: &ArrayView, m: &MemberView) -> bool {
    was.spares
        .iter()
        .any(|s| s.major == m.major && s.minor == m.minor)
}

fn rebuild_changes(was: &ArrayView, a: &ArrayView, out: &mut Vec<Event>) {
    match (&was.rebuild, &a.rebuild) {
        (None, Some(r)) => out.push(array_event(
            a,
            "rebuild-started",
            role_member(a, r.role),
            format!("rebuilding role {}", r.role),
        )),
        (Some(old), Some(r)) if old.role == r.role => {
            // The highest step crossed since the last look, once.
            let from = old.percent as u32;
            let to = r.percent as u32;
            if let Some(step) = REBUILD_STEPS.iter().rev().find(|&&s| from < s && s <= to) {
                out.push(array_event(
                    a,
                    &format!("rebuild-{step}"),
                    role_member(a, r.role),
                    format!("rebuild of role {} at {:.1}%", r.role, r.percent),
                ));
            }
        }
        (Some(old), new) if new.as_ref().is_none_or(|r| r.role != old.role) => {
            let done = a
                .members
                .iter()
                .find(|m| m.role == old.role)
                .is_some_and(|m| m.state == "active");
            out.push(array_event(
                a,
                if done {
                    "rebuild-finished"
                } else {
                    "rebuild-stopped"
                },
                role_member(a, old.role),
                format!(
                    "role {} {}",
                    old.role,
                    if done { "in sync" } else { "not rebuilt" }
                ),
            ));
            if let Some(r) = new {
                out.push(array_event(
                    a,
                    "rebuild-started",
                    role_member(a, r.role),
                    format!("rebuilding role {}", r.role),
                ));
            }
        }
        _ => {}
    }
    if let (Some(old), Some(r)) = (&was.rebuild, &a.rebuild) {
        if r.stalled && !old.stalled {
            out.push(array_event(
                a,
                "rebuild-stalled",
                role_member(a, r.role),
                "some data has no readable copy".into(),
            ));
        }
    }
}

/// A restripe's start, steps (20 ... 80 %), standing still, and end: finished where the array
/// has the shape it went to, else stopped (the array was stopped: `device-disappeared` says
/// so instead).
fn reshape_changes(was: &ArrayView, a: &ArrayView, out: &mut Vec<Event>) {
    match (&was.reshape, &a.reshape) {
        (None, Some(r)) => out.push(array_event(a, "reshape-started", None, r.text())),
        (Some(old), Some(r)) => {
            let (from, to) = (old.percent as u32, r.percent as u32);
            if let Some(step) = REBUILD_STEPS.iter().rev().find(|&&s| from < s && s <= to) {
                out.push(array_event(
                    a,
                    &format!("reshape-{step}"),
                    None,
                    format!("reshape at {:.1}%", r.percent),
                ));
            }
            if r.state == "stalled" && old.state != "stalled" {
                out.push(array_event(
                    a,
                    "reshape-stalled",
                    None,
                    "standing still: data it needs cannot be read, even through the parity".into(),
                ));
            }
        }
        (Some(old), None) => {
            let done = a.raid_devices == old.raid_devices && a.chunk_bytes == old.chunk_bytes;
            out.push(array_event(
                a,
                if done {
                    "reshape-finished"
                } else {
                    "reshape-stopped"
                },
                None,
                format!(
                    "{} members, chunk {} KiB",
                    a.raid_devices,
                    a.chunk_bytes / 1024
                ),
            ));
        }
        (None, None) => {}
    }
}

fn scrub_changes(was: &ArrayView, a: &ArrayView, out: &mut Vec<Event>) {
    let Some(old) = &was.scrub else {
        return;
    };
    if a.scrub.as_ref().is_some_and(|s| s.action == old.action) {
        return;
    }
    let ended = if a.scrub_stopped_percent.is_some() {
        "stopped"
    } else {
        "finished"
    };
    scrub_end_events(a, &old.action, ended, a.mismatch_sectors, out);
}

/// `ACTION-ENDING` (`check-finished`, ...) with its counts, and `mismatches-found` after a
/// check or resync that found some.
fn scrub_end_events(
    a: &ArrayView,
    action: &str,
    ending: &str,
    mismatches: u64,
    out: &mut Vec<Event>,
) {
    out.push(array_event(
        a,
        &format!("{action}-{ending}"),
        None,
        format!(
            "mismatches={mismatches} read-errors={}",
            a.scrub_read_errors
        ),
    ));
    if mismatches > 0 && action != "repair" {
        out.push(array_event(
            a,
            "mismatches-found",
            None,
            format!("{mismatches} sectors differ (graidctl repair rewrites them)"),
        ));
    }
}

/// A scrub's end the module announced (`GRAID_EVENT=check-finished`, `GRAID_MISMATCHES`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScrubEnd {
    /// `/dev/graidN`.
    pub device: String,
    pub action: String,
    pub ending: String,
    pub mismatches: u64,
}

/// The events of a scrub's end the module announced, for the array as `now` sees it.
pub fn scrub_event(end: &ScrubEnd, now: &Look) -> Vec<Event> {
    let mut out = Vec::new();
    if let Some(a) = now.arrays.values().find(|a| a.device == end.device) {
        scrub_end_events(a, &end.action, &end.ending, end.mismatches, &mut out);
    }
    out
}

fn helper_changes(was: Option<&HelperView>, now: Option<&HelperView>, out: &mut Vec<Event>) {
    let state = |h: Option<&HelperView>| h.map_or("none", |h| h.state.as_str()).to_owned();
    let (old_state, new_state) = (state(was), state(now));
    let attached = |s: &str| s != "none";
    // A helper that came, or another in its place (a new pid).
    let new_helper = !attached(&old_state) || now.map(|h| h.pid) != was.map(|h| h.pid);
    if attached(&new_state) && new_helper {
        let h = now.map(|h| format!("pid {} engine {}", h.pid, h.engine));
        out.push(helper_event("helper-attached", h.unwrap_or_default()));
    } else if attached(&old_state) && !attached(&new_state) {
        out.push(helper_event(
            "helper-detached",
            "parity is computed in the kernel".into(),
        ));
    }
    if new_state == "degraded" && old_state != "degraded" {
        out.push(helper_event(
            "helper-degraded",
            "it missed a deadline: one job at a time".into(),
        ));
    }
    let errors = |h: Option<&HelperView>| h.map_or(0, |h| h.protocol_errors);
    if errors(now) > errors(was) {
        out.push(helper_event(
            "helper-lying",
            format!(
                "{} completions refused (malformed, late or wrong); the kernel computed them",
                errors(now) - errors(was)
            ),
        ));
    }
}

fn role_member(a: &ArrayView, role: u32) -> Option<String> {
    a.members.iter().find(|m| m.role == role).map(member_name)
}

fn member_name(m: &MemberView) -> String {
    m.device
        .clone()
        .unwrap_or_else(|| format!("role {}", m.role))
}

fn array_event(a: &ArrayView, name: &str, member: Option<String>, message: String) -> Event {
    Event {
        name: name.to_owned(),
        device: a.device.clone(),
        member,
        array_name: a.name.clone(),
        uuid: a.uuid.clone(),
        message,
    }
}

fn helper_event(name: &str, message: String) -> Event {
    Event {
        name: name.to_owned(),
        device: HELPER_DEVICE.to_owned(),
        member: None,
        array_name: String::new(),
        uuid: String::new(),
        message,
    }
}

/// `module-missing`, when the control device is absent: reported when raid_gpu is neither
/// loaded nor installed for the running kernel (no graid array can start under it); None when
/// it is merely not loaded yet (the monitor then waits for it quietly).
pub fn module_missing(status: &kernel_module::Status) -> Option<Event> {
    if status.installed {
        return None;
    }
    let release = if status.release.is_empty() {
        "(unknown)"
    } else {
        &status.release
    };
    let elsewhere = if status.others.is_empty() {
        "It is installed for no installed kernel (see \
         /usr/share/doc/graid-dkms/README.Debian)"
            .to_owned()
    } else {
        format!(
            "It is installed for: {} (boot one of those: \
             /usr/share/doc/graid-dkms/README.Debian)",
            status.others.join(", ")
        )
    };
    Some(Event {
        name: "module-missing".to_owned(),
        device: kernel_module::MODULE.to_owned(),
        member: None,
        array_name: String::new(),
        uuid: String::new(),
        message: format!(
            "{} is not installed for the running kernel {release}; no graid array can start \
             under it. {elsewhere}",
            kernel_module::MODULE
        ),
    })
}

impl Event {
    /// The line for the log: `member-failed /dev/graid0 /dev/nvme1n1: role 1 failed; ...`.
    pub fn line(&self) -> String {
        let mut line = format!("{} {}", self.name, self.device);
        if let Some(m) = &self.member {
            line.push(' ');
            line.push_str(m);
        }
        if !self.message.is_empty() {
            line.push_str(": ");
            line.push_str(&self.message);
        }
        line
    }
}

/// One look, with the control device opened for it.
fn look<C: ControlDevice>(
    open: &impl Fn() -> Result<C, CtlError>,
    sys: &dyn System,
) -> Result<Look, CtlError> {
    open().and_then(|ctl| Look::take(&ctl, sys))
}

/// What the monitor finds when it starts.
enum Start {
    /// Its first look.
    Look(Look),
    /// No control device: the module is not loaded. `missing`: `module-missing`, when it is
    /// not installed for the running kernel either.
    NoModule {
        error: CtlError,
        missing: Option<Event>,
    },
}

/// The first look, or why there is none. `module`: where raid_gpu stands for the running
/// kernel, asked only when the control device is absent.
fn start<C: ControlDevice>(
    open: &impl Fn() -> Result<C, CtlError>,
    sys: &dyn System,
    module: impl FnOnce() -> kernel_module::Status,
) -> Result<Start, CtlError> {
    match look(open, sys) {
        Ok(first) => Ok(Start::Look(first)),
        Err(error @ CtlError::NoModule { .. }) => Ok(Start::NoModule {
            error,
            missing: module_missing(&module()),
        }),
        Err(e) => Err(e),
    }
}

/// `--oneshot`'s result without the control device: exit status 8 when the module is not
/// installed for the running kernel, 3 (not loaded) otherwise.
fn no_module_health(error: CtlError, missing: Option<&Event>) -> CtlError {
    match missing {
        Some(e) => CtlError::Unhealthy {
            stdout: String::new(),
            message: format!(
                "{}: {} is not installed for the running kernel",
                e.name,
                kernel_module::MODULE
            ),
            code: EXIT_MODULE_MISSING,
        },
        None => error,
    }
}

/// `graidctl monitor`. `open` opens the control device for one look: the monitor holds it
/// only while it looks, so the module can be unloaded while no array runs.
///
/// Without the module at start, it says `module-missing` when raid_gpu is not installed for
/// the running kernel, and in any case waits for the module (loaded by the first assembly, or
/// built and loaded by hand) rather than exit: its first look is then the first that succeeds.
pub fn run<C: ControlDevice>(
    args: &MonitorArgs,
    open: impl Fn() -> Result<C, CtlError>,
    sys: &dyn System,
) -> Result<String, CtlError> {
    let program = match &args.program {
        Some(p) => Some(p.clone()),
        None => crate::config::load()?.program,
    };
    let reporter = Reporter::new(args, program);
    let (first, state) = match start(&open, sys, kernel_module::Status::running)? {
        Start::Look(first) => {
            if args.test {
                test_events(&first, &reporter);
            }
            for e in events(None, &first, true) {
                reporter.report(&e);
            }
            if args.oneshot {
                return health(&first);
            }
            (Some(first), WATCHING)
        }
        Start::NoModule { error, missing } => {
            if args.test {
                test_events(&Look::default(), &reporter);
            }
            if let Some(e) = &missing {
                reporter.report(e);
            }
            if args.oneshot {
                return Err(no_module_health(error, missing.as_ref()));
            }
            let waiting = if missing.is_some() {
                "raid_gpu is not installed for the running kernel (module-missing); waiting for it"
            } else {
                "waiting for the raid_gpu module to be loaded"
            };
            (None, waiting)
        }
    };
    let uevents = UeventSocket::open();
    // Under systemd (Type=notify), the service is started once the first look is taken and the
    // uevent socket open: an array that starts after that is a new-array event, not part of
    // the first look. Without the module, once it is found absent (and said so when it is not
    // installed): neither `systemctl start` nor the boot waits for a module that may never
    // come, and the first look is the first once it is loaded. Outside systemd this does
    // nothing. The status line (systemctl status) says whether it watches or waits.
    notify(&[
        sd_notify::NotifyState::Ready,
        sd_notify::NotifyState::Status(state),
    ]);
    let mut before = first;
    loop {
        let ends = match &uevents {
            Some(s) => s.wait(Duration::from_secs(args.delay)),
            None => {
                std::thread::sleep(Duration::from_secs(args.delay));
                Vec::new()
            }
        };
        // A look that fails (the module not loaded yet, or unloaded) is retried at the next
        // wake-up (the control device's uevent is one).
        let Ok(now) = look(&open, sys) else {
            continue;
        };
        // With no look before (the module came after the start), this is the first look: only
        // trouble is reported, as at start.
        if before.is_none() {
            notify(&[sd_notify::NotifyState::Status(WATCHING)]);
        }
        for e in events(before.as_ref(), &now, uevents.is_none()) {
            reporter.report(&e);
        }
        for end in &ends {
            for e in scrub_event(end, &now) {
                reporter.report(&e);
            }
        }
        before = Some(now);
    }
}

/// The service's status line once a look is taken.
const WATCHING: &str = "watching the arrays";

/// Tells systemd (Type=notify) `states`; nothing outside systemd.
fn notify(states: &[sd_notify::NotifyState]) {
    if let Err(e) = sd_notify::notify(states) {
        eprintln!("graidctl monitor: could not notify systemd: {e}");
    }
}

fn test_events(look: &Look, reporter: &Reporter) {
    if look.arrays.is_empty() {
        reporter.report(&helper_event("test-message", "no array is running".into()));
    }
    for a in look.arrays.values() {
        reporter.report(&array_event(
            a,
            "test-message",
            None,
            format!("a test of graidctl monitor; the array is {}", a.state),
        ));
    }
}

/// `--oneshot`'s result: Ok when every array is optimal.
fn health(look: &Look) -> Result<String, CtlError> {
    let bad = |states: &[&str]| -> Vec<String> {
        look.arrays
            .values()
            .filter(|a| states.contains(&a.state.as_str()))
            .map(|a| a.label())
            .collect()
    };
    let failed = bad(&["failed", "broken"]);
    let degraded = bad(&["degraded"]);
    if !failed.is_empty() {
        return Err(CtlError::Unhealthy {
            stdout: String::new(),
            message: format!("failed: {}", failed.join(", ")),
            code: EXIT_ARRAY_FAILED,
        });
    }
    if !degraded.is_empty() {
        return Err(CtlError::Unhealthy {
            stdout: String::new(),
            message: format!("degraded: {}", degraded.join(", ")),
            code: EXIT_DEGRADED,
        });
    }
    Ok(String::new())
}

/// Where events go.
struct Reporter {
    program: Option<PathBuf>,
    syslog: bool,
}

impl Reporter {
    fn new(args: &MonitorArgs, program: Option<PathBuf>) -> Self {
        if args.syslog {
            // SAFETY: the identity is a static NUL-terminated string, as openlog keeps the
            // pointer.
            unsafe {
                libc::openlog(
                    c"graidctl-monitor".as_ptr(),
                    libc::LOG_PID,
                    libc::LOG_DAEMON,
                )
            };
        }
        Self {
            program,
            syslog: args.syslog,
        }
    }

    fn report(&self, e: &Event) {
        let line = e.line();
        println!("{line}");
        if self.syslog {
            let priority = priority(&e.name);
            if let Ok(text) = CString::new(line.replace('\0', " ")) {
                // SAFETY: both strings are NUL-terminated; "%s" takes exactly the one argument.
                unsafe { libc::syslog(priority, c"%s".as_ptr(), text.as_ptr()) };
            }
        }
        if let Some(program) = &self.program {
            let mut cmd = Command::new(program);
            cmd.arg(&e.name).arg(&e.device);
            if let Some(m) = &e.member {
                cmd.arg(m);
            }
            cmd.env("GRAID_EVENT", &e.name)
                .env("GRAID_DEVICE", &e.device)
                .env("GRAID_MEMBER", e.member.as_deref().unwrap_or(""))
                .env("GRAID_NAME", &e.array_name)
                .env("GRAID_UUID", &e.uuid)
                .env("GRAID_MESSAGE", &e.message);
            // The monitor waits: events reach the program in order, one at a time (mdadm's way).
            match cmd.status() {
                Ok(status) if !status.success() => {
                    eprintln!(
                        "graidctl: monitor: {} {}: {status}",
                        program.display(),
                        e.name
                    )
                }
                Err(err) => eprintln!("graidctl: monitor: cannot run {}: {err}", program.display()),
                Ok(_) => {}
            }
        }
    }
}

/// The syslog priority of event `name`: error when no array can start, warning for trouble,
/// info otherwise.
fn priority(name: &str) -> libc::c_int {
    if name == "module-missing" {
        libc::LOG_ERR
    } else if is_trouble(name) {
        libc::LOG_WARNING
    } else {
        libc::LOG_INFO
    }
}

/// Events that mean redundancy or data is at risk.
fn is_trouble(name: &str) -> bool {
    matches!(
        name,
        "module-missing"
            | "member-failed"
            | "degraded-array"
            | "array-failed"
            | "rebuild-stalled"
            | "reshape-stalled"
            | "mismatches-found"
            | "spares-missing"
            | "helper-lying"
            | "helper-degraded"
            | "parity-heal-started"
    ) || name.ends_with("-stopped")
}

/// The kernel's uevents (netlink), to look as soon as an array changes.
struct UeventSocket(OwnedFd);

impl UeventSocket {
    /// None where the socket cannot be had (not root, no netlink): the monitor then only polls.
    fn open() -> Option<Self> {
        // SAFETY: plain socket(2); the result is checked before it is owned.
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_DGRAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                libc::NETLINK_KOBJECT_UEVENT,
            )
        };
        if fd < 0 {
            return None;
        }
        // SAFETY: fd is a new descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: sockaddr_nl is plain data; all zeroes is a valid value.
        let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        addr.nl_groups = 1; // the kernel's broadcast group
                            // SAFETY: addr is a sockaddr_nl of the length given.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        (rc == 0).then_some(Self(fd))
    }

    /// Returns when a uevent about a graid array arrives, or after `timeout`, with the ends of
    /// scrubs the uevents announced.
    fn wait(&self, timeout: Duration) -> Vec<ScrubEnd> {
        let deadline = std::time::Instant::now() + timeout;
        let mut buf = [0u8; 8192];
        let mut ends = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return ends;
            }
            let mut pfd = libc::pollfd {
                fd: self.0.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            let n =
                unsafe { libc::poll(&mut pfd, 1, left.as_millis().min(i32::MAX as u128) as i32) };
            if n <= 0 {
                // Timeout, or a signal: look anyway.
                return ends;
            }
            let mut any_array = false;
            loop {
                // SAFETY: buf is writable for its length.
                let len = unsafe {
                    libc::recv(self.0.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0)
                };
                if len <= 0 {
                    break;
                }
                let msg = &buf[..len as usize];
                any_array |= is_array_uevent(msg);
                ends.extend(parse_scrub_end(msg));
            }
            if any_array {
                // Let the change settle (a failure is followed by its superblock update).
                std::thread::sleep(Duration::from_millis(50));
                return ends;
            }
        }
    }
}

/// The scrub's end a uevent announces, if it does (`GRAID_EVENT=check-finished` and
/// `GRAID_MISMATCHES=N` on `DEVNAME=graidN`).
fn parse_scrub_end(msg: &[u8]) -> Option<ScrubEnd> {
    let text = String::from_utf8_lossy(msg);
    let field = |key: &str| {
        text.split('\0')
            .find_map(|f| f.strip_prefix(key).and_then(|f| f.strip_prefix('=')))
            .map(str::to_owned)
    };
    let event = field("GRAID_EVENT")?;
    let (action, ending) = event.split_once('-')?;
    if !matches!(action, "check" | "repair" | "resync") || !matches!(ending, "finished" | "stopped")
    {
        return None;
    }
    Some(ScrubEnd {
        device: format!("/dev/{}", field("DEVNAME")?),
        action: action.to_owned(),
        ending: ending.to_owned(),
        mismatches: field("GRAID_MISMATCHES")?.parse().ok()?,
    })
}

/// Whether a uevent (`ACTION@DEVPATH\0KEY=VALUE\0...`) is about a graid array.
fn is_array_uevent(msg: &[u8]) -> bool {
    msg.split(|&b| b == 0)
        .any(|field| field.starts_with(b"DEVNAME=graid") || field.starts_with(b"GRAID_"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::fake::{array, FakeControl};
    use crate::error::EXIT_NO_MODULE;
    use crate::member::fake::FakeSystem;
    use graid_abi::{
        GraidDetail, GRAID_ARRAY_DEGRADED, GRAID_ARRAY_FAILED, GRAID_MEMBER_FAULTY,
        GRAID_MEMBER_REBUILDING, GRAID_SCRUB_CHECK,
    };

    fn sys() -> FakeSystem {
        FakeSystem::with_disks(&["nvme0n1", "nvme1n1", "nvme2n1", "nvme3n1"])
    }

    fn raid5() -> GraidDetail {
        let mut d = array(0, "vault", 5, &[(259, 0, 0), (259, 1, 0), (259, 2, 0)]);
        d.member_data_sectors = 1000;
        d
    }

    fn look(details: &[GraidDetail], helper: Option<HelperView>) -> Look {
        let sys = sys();
        Look {
            arrays: details
                .iter()
                .map(|d| {
                    let v = ArrayView::new(d, &sys);
                    (v.uuid.clone(), v)
                })
                .collect(),
            helper,
        }
    }

    fn events_(before: Option<&Look>, now: &Look) -> Vec<Event> {
        events(before, now, true)
    }

    fn names(events: &[Event]) -> Vec<String> {
        events.iter().map(|e| e.name.clone()).collect()
    }

    fn helper(pid: u32, protocol_errors: u64) -> HelperView {
        HelperView {
            state: if pid == 0 { "none" } else { "healthy" }.to_owned(),
            pid,
            engine: "cpu-avx2".to_owned(),
            pool_bytes: 0,
            slots: 0,
            queued: 0,
            attaches: 0,
            jobs: 0,
            bytes: 0,
            background_jobs: 0,
            recover_jobs: 0,
            verified_jobs: 0,
            completed: 0,
            batches: 0,
            latency_avg_us: 0,
            latency_max_us: 0,
            protocol_errors,
            fallbacks: BTreeMap::new(),
        }
    }

    #[test]
    fn at_start_only_trouble_is_reported() {
        let mut degraded = raid5();
        degraded.state = GRAID_ARRAY_DEGRADED;
        degraded.members[2].state = GRAID_MEMBER_FAULTY;
        let mut failed = array(1, "gone", 0, &[(259, 3, 0)]);
        failed.state = GRAID_ARRAY_FAILED;
        let e = events_(None, &look(&[raid5()], None));
        assert!(e.is_empty(), "{e:?}");
        let e = events_(None, &look(&[degraded, failed], None));
        assert_eq!(names(&e), ["degraded-array", "array-failed"]);
        assert_eq!(
            e[0].line(),
            "degraded-array /dev/graid0: 2 of 3 members active (role 2 faulty)"
        );
        assert_eq!(e[0].array_name, "vault");
    }

    #[test]
    fn a_restripe_its_steps_and_its_end_each_come_once() {
        let d = raid5();
        let with = |reshape: Option<(f64, &'static str)>, raid_devices: u32| {
            let mut l = look(std::slice::from_ref(&d), None);
            for a in l.arrays.values_mut() {
                a.raid_devices = raid_devices;
                a.reshape = reshape.map(|(percent, state)| crate::grow_members::ReshapeView {
                    state,
                    raid_devices_from: 4,
                    raid_devices: 5,
                    chunk_bytes_from: a.chunk_bytes,
                    chunk_bytes: a.chunk_bytes,
                    layout_from: 2,
                    layout: 2,
                    total_bytes: 1000,
                    moved_bytes: (percent * 10.0) as u64,
                    recorded_bytes: 0,
                    percent,
                    data_offset_bytes: 0,
                    new_data_offset_bytes: 0,
                });
            }
            l
        };
        let idle = with(None, 4);
        let e = events_(Some(&idle), &with(Some((3.0, "running")), 5));
        assert_eq!(names(&e), ["reshape-started"]);
        assert!(e[0].message.contains("4 -> 5 members"), "{}", e[0].message);
        let e = events_(
            Some(&with(Some((3.0, "running")), 5)),
            &with(Some((45.0, "running")), 5),
        );
        assert_eq!(names(&e), ["reshape-40"]);
        let e = events_(
            Some(&with(Some((45.0, "running")), 5)),
            &with(Some((46.0, "stalled")), 5),
        );
        assert_eq!(names(&e), ["reshape-stalled"]);
        assert!(is_trouble("reshape-stalled"));
        let e = events_(Some(&with(Some((46.0, "running")), 5)), &with(None, 5));
        assert_eq!(names(&e), ["reshape-finished"]);
        // Gone without the shape it went to.
        let e = events_(Some(&with(Some((46.0, "running")), 5)), &with(None, 4));
        assert_eq!(names(&e), ["reshape-stopped"]);
    }

    #[test]
    fn a_failure_a_rebuild_and_its_steps_each_come_once() {
        let healthy = raid5();
        let mut failed = raid5();
        failed.state = GRAID_ARRAY_DEGRADED;
        failed.members[1].state = GRAID_MEMBER_FAULTY;
        let e = events_(Some(&look(&[healthy], None)), &look(&[failed], None));
        assert_eq!(names(&e), ["member-failed"]);
        assert_eq!(e[0].member.as_deref(), Some("/dev/nvme1n1"));
        assert_eq!(
            e[0].line(),
            "member-failed /dev/graid0 /dev/nvme1n1: role 1 failed; array degraded"
        );

        // A spare (nvme3n1) takes role 1 and is rebuilt.
        failed.nr_spares = 1;
        failed.spares[0] = graid_abi::GraidMember {
            major: 259,
            minor: 3,
        };
        let rebuilding = |done: u64| {
            let mut d = raid5();
            d.state = GRAID_ARRAY_DEGRADED;
            d.members[1].dev = graid_abi::GraidMember {
                major: 259,
                minor: 3,
            };
            d.members[1].state = GRAID_MEMBER_REBUILDING;
            d.members[1].recovery_offset = done;
            d
        };
        let e = events_(Some(&look(&[failed], None)), &look(&[rebuilding(50)], None));
        assert_eq!(
            names(&e),
            ["spare-active", "rebuild-started", "spares-missing"]
        );
        assert_eq!(e[0].member.as_deref(), Some("/dev/nvme3n1"));
        // 5% to 45%: one event, the highest step crossed.
        let e = events_(
            Some(&look(&[rebuilding(50)], None)),
            &look(&[rebuilding(450)], None),
        );
        assert_eq!(names(&e), ["rebuild-40"]);
        let e = events_(
            Some(&look(&[rebuilding(450)], None)),
            &look(&[rebuilding(460)], None),
        );
        assert!(e.is_empty(), "{e:?}");
        let mut done = raid5();
        done.members[1].dev = graid_abi::GraidMember {
            major: 259,
            minor: 3,
        };
        let e = events_(Some(&look(&[rebuilding(900)], None)), &look(&[done], None));
        assert_eq!(names(&e), ["rebuild-finished", "array-optimal"]);
        assert_eq!(e[0].member.as_deref(), Some("/dev/nvme3n1"));
    }

    #[test]
    fn a_check_that_ends_reports_its_mismatches() {
        let mut checking = raid5();
        checking.scrub_action = GRAID_SCRUB_CHECK;
        checking.scrub_total = 1000;
        checking.scrub_done = 500;
        let mut clean = raid5();
        let e = events_(Some(&look(&[checking], None)), &look(&[clean], None));
        assert_eq!(names(&e), ["check-finished"]);
        assert_eq!(e[0].message, "mismatches=0 read-errors=0");
        clean.mismatch_sectors = 24;
        let e = events_(Some(&look(&[checking], None)), &look(&[clean], None));
        assert_eq!(names(&e), ["check-finished", "mismatches-found"]);
        assert_eq!(e[0].message, "mismatches=24 read-errors=0");
    }

    #[test]
    fn a_heal_after_a_lying_helper_is_reported_as_it_starts_and_ends() {
        let quiet = raid5();
        let mut healing = raid5();
        healing.flags |=
            graid_abi::GRAID_DETAIL_PARITY_HEAL | graid_abi::GRAID_DETAIL_RESYNC_PENDING;
        let e = events_(Some(&look(&[quiet], None)), &look(&[healing], None));
        assert_eq!(names(&e), ["parity-heal-started"]);
        assert_eq!(priority(&e[0].name), libc::LOG_WARNING);
        let e = events_(Some(&look(&[healing], None)), &look(&[quiet], None));
        assert_eq!(names(&e), ["parity-healed"]);
    }

    #[test]
    fn arrays_coming_and_going_and_the_helper() {
        let before = look(&[], Some(helper(0, 0)));
        let now = look(&[raid5()], Some(helper(42, 0)));
        let e = events_(Some(&before), &now);
        assert_eq!(names(&e), ["new-array", "helper-attached"]);
        assert_eq!(e[1].device, "/dev/graid-helper");
        assert_eq!(e[1].message, "pid 42 engine cpu-avx2");
        let lying = look(&[raid5()], Some(helper(42, 3)));
        let e = events_(Some(&now), &lying);
        assert_eq!(names(&e), ["helper-lying"]);
        let gone = look(&[], Some(helper(0, 3)));
        assert_eq!(
            names(&events_(Some(&lying), &gone)),
            ["device-disappeared", "helper-detached"]
        );
    }

    #[test]
    fn oneshot_exit_status_says_how_bad() {
        assert!(health(&look(&[raid5()], None)).is_ok());
        assert!(health(&look(&[], None)).is_ok());
        let mut degraded = raid5();
        degraded.state = GRAID_ARRAY_DEGRADED;
        let err = health(&look(&[raid5(), degraded], None)).unwrap_err();
        assert_eq!(err.exit_code(), EXIT_DEGRADED);
        assert_eq!(err.to_string(), "degraded: /dev/graid0 (vault)");
        let mut failed = array(1, "gone", 0, &[(259, 3, 0)]);
        failed.state = GRAID_ARRAY_FAILED;
        let err = health(&look(&[degraded, failed], None)).unwrap_err();
        assert_eq!(err.exit_code(), EXIT_ARRAY_FAILED);
    }

    #[test]
    fn a_scrub_end_the_module_announces_is_reported_with_its_count() {
        let msg = b"change@/devices/virtual/block/graid0\0ACTION=change\0DEVNAME=graid0\0\
GRAID_NAME=vault\0GRAID_EVENT=check-finished\0GRAID_MISMATCHES=16\0";
        let end = parse_scrub_end(msg).unwrap();
        assert_eq!(
            end,
            ScrubEnd {
                device: "/dev/graid0".into(),
                action: "check".into(),
                ending: "finished".into(),
                mismatches: 16
            }
        );
        let e = scrub_event(&end, &look(&[raid5()], None));
        assert_eq!(names(&e), ["check-finished", "mismatches-found"]);
        assert_eq!(e[0].message, "mismatches=16 read-errors=0");
        // A member's event is no scrub's end; an array not running gets none.
        assert_eq!(
            parse_scrub_end(b"DEVNAME=graid0\0GRAID_EVENT=member-failed\0GRAID_MEMBER=1\0"),
            None
        );
        assert!(scrub_event(&end, &look(&[], None)).is_empty());
        // From the looks, the scrub's end is reported only when asked.
        let mut checking = raid5();
        checking.scrub_action = GRAID_SCRUB_CHECK;
        assert!(events(
            Some(&look(&[checking], None)),
            &look(&[raid5()], None),
            false
        )
        .is_empty());
    }

    fn no_control() -> Result<FakeControl, CtlError> {
        Err(CtlError::NoModule {
            path: "/dev/graid-control".into(),
        })
    }

    fn status(installed: bool, others: &[&str]) -> kernel_module::Status {
        kernel_module::Status {
            release: "7.4.1+deb13-amd64".into(),
            installed,
            others: others.iter().map(|&r| r.to_owned()).collect(),
        }
    }

    #[test]
    fn a_module_not_installed_for_the_running_kernel_is_said_loudly() {
        let others = ["7.3.4+deb13-amd64", "7.2.12+deb13-amd64"];
        let Start::NoModule {
            error,
            missing: Some(e),
        } = start(&no_control, &sys(), || status(false, &others)).unwrap()
        else {
            panic!("no module-missing")
        };
        assert_eq!(
            e.line(),
            "module-missing raid_gpu: raid_gpu is not installed for the running kernel \
             7.4.1+deb13-amd64; no graid array can start under it. It is installed for: \
             7.3.4+deb13-amd64, 7.2.12+deb13-amd64 (boot one of those: \
             /usr/share/doc/graid-dkms/README.Debian)"
        );
        assert_eq!((e.member.as_deref(), e.uuid.as_str()), (None, ""));
        assert!(is_trouble(&e.name));
        assert_eq!(priority(&e.name), libc::LOG_ERR);
        assert_eq!(priority("degraded-array"), libc::LOG_WARNING);
        assert_eq!(priority("new-array"), libc::LOG_INFO);
        // --oneshot's exit status.
        let err = no_module_health(error, Some(&e));
        assert_eq!(err.exit_code(), EXIT_MODULE_MISSING);
        assert_eq!(
            err.to_string(),
            "module-missing: raid_gpu is not installed for the running kernel"
        );
        // Installed for no kernel at all.
        let e = module_missing(&status(false, &[])).unwrap();
        assert!(
            e.message.ends_with(
                "It is installed for no installed kernel (see \
                 /usr/share/doc/graid-dkms/README.Debian)"
            ),
            "{}",
            e.message
        );
    }

    #[test]
    fn a_module_installed_but_not_loaded_is_waited_for_quietly() {
        let Start::NoModule {
            error,
            missing: None,
        } = start(&no_control, &sys(), || status(true, &[])).unwrap()
        else {
            panic!("module-missing for an installed module")
        };
        // --oneshot: "not loaded", as before.
        assert_eq!(no_module_health(error, None).exit_code(), EXIT_NO_MODULE);
    }

    #[test]
    fn the_decision_reads_the_modules_root_it_is_given() {
        let root = std::env::temp_dir().join(format!("graidctl-monitor-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for (release, dep) in [
            ("7.4.1+deb13-amd64", "kernel/fs/ext4/ext4.ko.xz:\n"),
            ("7.3.4+deb13-amd64", "updates/dkms/raid_gpu.ko.xz:\n"),
        ] {
            std::fs::create_dir_all(root.join(release)).unwrap();
            std::fs::write(root.join(release).join("modules.dep"), dep).unwrap();
        }
        let of = |release: &str, loaded| kernel_module::Status::of(&root, release, loaded);
        let e = module_missing(&of("7.4.1+deb13-amd64", false)).unwrap();
        assert!(
            e.message
                .contains("It is installed for: 7.3.4+deb13-amd64 (boot"),
            "{}",
            e.message
        );
        assert_eq!(module_missing(&of("7.4.1+deb13-amd64", true)), None);
        assert_eq!(module_missing(&of("7.3.4+deb13-amd64", false)), None);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn with_the_module_the_start_is_a_look_and_other_errors_stop_it() {
        let ctl = || -> Result<FakeControl, CtlError> {
            let ctl = FakeControl::default();
            ctl.arrays.borrow_mut().push(raid5());
            Ok(ctl)
        };
        let not_asked = || -> kernel_module::Status { panic!("module status asked") };
        let Start::Look(first) = start(&ctl, &sys(), not_asked).unwrap() else {
            panic!("no look")
        };
        assert_eq!(first.arrays.len(), 1);
        let denied = || -> Result<FakeControl, CtlError> {
            Err(CtlError::Permission {
                path: "/dev/graid-control".into(),
            })
        };
        let err = start(&denied, &sys(), not_asked).err().unwrap();
        assert_eq!(err.exit_code(), crate::error::EXIT_PERMISSION);
    }

    #[test]
    fn uevents_of_arrays_wake_the_monitor() {
        assert!(is_array_uevent(
            b"change@/devices/virtual/block/graid0\0ACTION=change\0DEVNAME=graid0\0GRAID_EVENT=member-failed\0"
        ));
        assert!(!is_array_uevent(
            b"add@/devices/pci/nvme/nvme0n1\0ACTION=add\0DEVNAME=nvme0n1\0"
        ));
    }
}
