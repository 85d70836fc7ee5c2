//! `graidctl metrics`: the running arrays and the parity helper in Prometheus' text format
//! (version 0.0.4), for node_exporter's textfile collector or a scrape through a wrapper.
//!
//! Names follow Prometheus' conventions: a `graid_` prefix, base units (bytes, seconds), `_total`
//! on counters, one family per quantity with the array as the `device` label (`graid0`, as
//! node_exporter's md collector labels `md0`), and a state as a 0/1 gauge per possible state so
//! an alert can say `graid_array_state{state="degraded"} == 1`.

use crate::control::ControlDevice;
use crate::error::CtlError;
use crate::helper::{self, HelperView};
use crate::member::System;
use crate::output::{running_views, ArrayView, BitmapView, MemberView, PplView};
use std::fmt::Write as _;
use std::fs;
use std::io::Write as _;
use std::path::Path;

/// The states an array can be in, as `detail` names them.
const ARRAY_STATES: [&str; 4] = ["optimal", "degraded", "failed", "broken"];
/// The states a member can be in.
const MEMBER_STATES: [&str; 4] = ["active", "rebuilding", "faulty", "missing"];
/// What the array is doing in the background (md's `sync_action`, plus `replace`).
const SYNC_ACTIONS: [&str; 7] = [
    "idle", "resync", "recover", "check", "repair", "replace", "reshape",
];
/// The helper's states.
const HELPER_STATES: [&str; 4] = ["none", "healthy", "degraded", "no-pool"];

const SECTOR_BYTES: u64 = 512;

/// `graidctl metrics [--output FILE]`: prints the metrics, or writes them to FILE by a rename
/// (node_exporter's textfile collector must never read half a file).
pub fn run(
    ctl: &dyn ControlDevice,
    sys: &dyn System,
    output: Option<&Path>,
) -> Result<String, CtlError> {
    let arrays = running_views(ctl, sys)?;
    let text = render(&arrays, helper::status(ctl).as_ref());
    let Some(path) = output else {
        return Ok(text);
    };
    write_atomically(path, &text).map_err(|e| {
        CtlError::Failed(format!(
            "cannot write the metrics to {}: {e}",
            path.display()
        ))
    })?;
    Ok(String::new())
}

/// Writes `text` to a temporary file beside `path`, then renames it over `path`.
fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".{}.tmp", std::process::id()));
    let tmp = Path::new(&tmp);
    let result = fs::File::create(tmp)
        .and_then(|mut f| f.write_all(text.as_bytes()).and_then(|()| f.sync_all()))
        .and_then(|()| fs::rename(tmp, path));
    if result.is_err() {
        let _ = fs::remove_file(tmp);
    }
    result
}

/// The exposition text for these arrays and helper (`None`: the module did not say).
pub fn render(arrays: &[ArrayView], helper: Option<&HelperView>) -> String {
    let mut out = Exposition::default();
    array_metrics(&mut out, arrays);
    member_metrics(&mut out, arrays);
    sync_metrics(&mut out, arrays);
    log_metrics(&mut out, arrays);
    if let Some(h) = helper {
        helper_metrics(&mut out, h);
    }
    out.text
}

fn array_metrics(out: &mut Exposition, arrays: &[ArrayView]) {
    out.family(
        "graid_array_info",
        Kind::Gauge,
        "A running array (always 1); its labels describe it.",
    );
    for a in arrays {
        out.sample(
            &[
                ("device", dev(a).as_str()),
                ("name", &a.name),
                ("uuid", &a.uuid),
                ("level", &a.level),
                ("homehost", &a.homehost),
            ],
            1,
        );
    }
    out.family(
        "graid_array_state",
        Kind::Gauge,
        "1 for the state the array is in: optimal, degraded (redundancy lost), failed (I/O \
         fails), broken.",
    );
    for a in arrays {
        for state in ARRAY_STATES {
            out.sample(
                &[("device", dev(a).as_str()), ("state", state)],
                u64::from(a.state == state),
            );
        }
    }
    per_array(
        out,
        arrays,
        "graid_array_size_bytes",
        Kind::Gauge,
        "Usable size.",
        |a| a.size_bytes,
    );
    per_array(
        out,
        arrays,
        "graid_array_chunk_bytes",
        Kind::Gauge,
        "Chunk size (0 on RAID 1).",
        |a| a.chunk_bytes,
    );
    per_array(
        out,
        arrays,
        "graid_array_degraded",
        Kind::Gauge,
        "Members not active (md's degraded): failed, missing or rebuilding.",
        |a| a.members.iter().filter(|m| m.state != "active").count() as u64,
    );
    per_array(
        out,
        arrays,
        "graid_array_spares",
        Kind::Gauge,
        "Spare devices waiting to take a failed member's place.",
        |a| a.spares.len() as u64,
    );
    per_array(
        out,
        arrays,
        "graid_array_dirty",
        Kind::Gauge,
        "1 while the superblocks say not clean (writes may be in flight).",
        |a| u64::from(a.dirty),
    );
    per_array(
        out,
        arrays,
        "graid_array_parity_heal",
        Kind::Gauge,
        "1 while a resync rewrites the parity a helper caught lying may have computed.",
        |a| u64::from(a.parity_heal),
    );
    per_array(
        out,
        arrays,
        "graid_array_open",
        Kind::Gauge,
        "Openers of the array's block device.",
        |a| u64::from(a.open_count),
    );
    per_array(
        out,
        arrays,
        "graid_array_events_total",
        Kind::Counter,
        "The superblocks' event count.",
        |a| a.events,
    );
}

fn member_metrics(out: &mut Exposition, arrays: &[ArrayView]) {
    out.family(
        "graid_array_members",
        Kind::Gauge,
        "Members by state: active, rebuilding, faulty, missing.",
    );
    for a in arrays {
        for state in MEMBER_STATES {
            let n = a.members.iter().filter(|m| m.state == state).count();
            out.sample(&[("device", dev(a).as_str()), ("state", state)], n as u64);
        }
    }
    out.family(
        "graid_member_state",
        Kind::Gauge,
        "1 for the state each member is in.",
    );
    for a in arrays {
        for m in &a.members {
            for state in MEMBER_STATES {
                out.sample(
                    &borrowed(&member_labels(a, m, Some(state))),
                    u64::from(m.state == state),
                );
            }
        }
    }
    type Field = fn(&MemberView) -> u64;
    let counters: [(&str, &str, Field); 6] = [
        (
            "graid_member_reads_total",
            "Reads sent to the member.",
            |m| m.reads,
        ),
        (
            "graid_member_writes_total",
            "Writes sent to the member.",
            |m| m.writes,
        ),
        (
            "graid_member_read_bytes_total",
            "Bytes read from the member.",
            |m| m.read_bytes,
        ),
        (
            "graid_member_written_bytes_total",
            "Bytes written to the member.",
            |m| m.write_bytes,
        ),
        (
            "graid_member_errors_total",
            "I/O errors the member returned.",
            |m| m.errors,
        ),
        (
            "graid_member_corrected_total",
            "Read errors repaired from another copy or the parity.",
            |m| m.corrected,
        ),
    ];
    for (name, help, field) in counters {
        out.family(name, Kind::Counter, help);
        for a in arrays {
            for m in &a.members {
                out.sample(&borrowed(&member_labels(a, m, None)), field(m));
            }
        }
    }
}

fn sync_metrics(out: &mut Exposition, arrays: &[ArrayView]) {
    out.family(
        "graid_sync_action",
        Kind::Gauge,
        "1 for what the array does in the background (md's sync_action: a reshape too; and replace).",
    );
    for a in arrays {
        let action = sync_action(a);
        for name in SYNC_ACTIONS {
            out.sample(
                &[("device", dev(a).as_str()), ("action", name)],
                u64::from(action == name),
            );
        }
    }
    per_array_f(
        out,
        arrays,
        "graid_sync_completed_ratio",
        "How far the running reshape, resync, rebuild, check, repair or replace is (0 to 1; 1 when idle).",
        |a| sync_progress(a).map_or(1.0, |(done, total)| done as f64 / total.max(1) as f64),
    );
    per_array(
        out,
        arrays,
        "graid_sync_remaining_bytes",
        Kind::Gauge,
        "What the running reshape, resync, rebuild, check, repair or replace has still to do.",
        |a| sync_progress(a).map_or(0, |(done, total)| total.saturating_sub(done) * SECTOR_BYTES),
    );
    per_array(
        out,
        arrays,
        "graid_sync_speed_bytes",
        Kind::Gauge,
        "Its speed over the last second or so, bytes per second (0: idle or not measured yet).",
        |a| {
            let kibs = a
                .rebuild
                .as_ref()
                .map(|r| r.rate_kibs)
                .or(a.scrub.as_ref().map(|s| s.rate_kibs))
                .or(a.replace.as_ref().map(|r| r.rate_kibs))
                .unwrap_or(0);
            u64::from(kibs) * 1024
        },
    );
    per_array(
        out,
        arrays,
        "graid_sync_stalled",
        Kind::Gauge,
        "1 when the reshape or rebuild stands still, or the last check, repair or resync \
         stopped before its end.",
        |a| {
            u64::from(
                a.reshape.as_ref().is_some_and(|r| r.state == "stalled")
                    || a.rebuild.as_ref().is_some_and(|r| r.stalled)
                    || a.scrub_stopped_percent.is_some(),
            )
        },
    );
    per_array(
        out,
        arrays,
        "graid_mismatch_sectors",
        Kind::Gauge,
        "Mismatched 512-byte sectors found by the running or last check or repair (md's \
         mismatch_cnt).",
        |a| a.mismatch_sectors,
    );
    per_array(
        out,
        arrays,
        "graid_scrub_read_errors",
        Kind::Gauge,
        "4 KiB blocks the running or last check, repair or resync could not read.",
        |a| a.scrub_read_errors,
    );
    per_array(
        out,
        arrays,
        "graid_rebuilt_bytes_total",
        Kind::Counter,
        "Bytes rebuilt since the array started.",
        |a| a.rebuilt_sectors * SECTOR_BYTES,
    );
}

fn log_metrics(out: &mut Exposition, arrays: &[ArrayView]) {
    type Ppl = fn(&PplView) -> u64;
    let logs: Vec<(&ArrayView, &PplView)> = arrays
        .iter()
        .filter_map(|a| a.ppl.as_ref().map(|p| (a, p)))
        .collect();
    let counters: [(&str, &str, Ppl); 3] = [
        (
            "graid_ppl_entries_total",
            "Partial-stripe writes the partial parity log recorded.",
            |p| p.entries,
        ),
        (
            "graid_ppl_barriers_total",
            "Full-stripe writes over logged stripes.",
            |p| p.barriers,
        ),
        ("graid_ppl_wraps_total", "Times the log was emptied.", |p| {
            p.wraps
        }),
    ];
    for (name, help, field) in counters {
        out.family(name, Kind::Counter, help);
        for (a, p) in &logs {
            out.sample(&[("device", dev(a).as_str())], field(p));
        }
    }
    type Bitmap = fn(&BitmapView) -> u64;
    let bitmaps: Vec<(&ArrayView, &BitmapView)> = arrays
        .iter()
        .filter_map(|a| a.bitmap.as_ref().map(|b| (a, b)))
        .collect();
    let gauges: [(&str, &str, Bitmap); 3] = [
        (
            "graid_bitmap_regions",
            "Regions of the write-intent bitmap.",
            |b| b.regions,
        ),
        (
            "graid_bitmap_dirty_regions",
            "Regions whose bit is set: written lately, or not yet resynced.",
            |b| b.dirty_regions,
        ),
        (
            "graid_bitmap_chunk_bytes",
            "What one bitmap bit covers.",
            |b| b.chunk_bytes,
        ),
    ];
    for (name, help, field) in gauges {
        out.family(name, Kind::Gauge, help);
        for (a, b) in &bitmaps {
            out.sample(&[("device", dev(a).as_str())], field(b));
        }
    }
}

fn helper_metrics(out: &mut Exposition, h: &HelperView) {
    out.family(
        "graid_helper_state",
        Kind::Gauge,
        "1 for the parity helper's state: none (parity computed in the kernel), healthy, \
         degraded (missed a deadline), no-pool.",
    );
    for state in HELPER_STATES {
        out.sample(&[("state", state)], u64::from(h.state == state));
    }
    out.family(
        "graid_helper_info",
        Kind::Gauge,
        "The attached helper (always 1); its engine.",
    );
    out.sample(&[("engine", &h.engine), ("pid", &h.pid.to_string())], 1);
    let counters: [(&str, &str, u64); 9] = [
        (
            "graid_helper_attaches_total",
            "Times a helper attached.",
            h.attaches,
        ),
        (
            "graid_helper_jobs_total",
            "Parity jobs sent to the helper.",
            h.jobs,
        ),
        (
            "graid_helper_bytes_total",
            "Bytes of the jobs sent.",
            h.bytes,
        ),
        (
            "graid_helper_background_jobs_total",
            "Jobs of rebuilds and scrubs.",
            h.background_jobs,
        ),
        (
            "graid_helper_recover_jobs_total",
            "Jobs that recovered lost data.",
            h.recover_jobs,
        ),
        (
            "graid_helper_verified_jobs_total",
            "Completions the kernel recomputed and compared.",
            h.verified_jobs,
        ),
        (
            "graid_helper_completed_total",
            "Jobs completed.",
            h.completed,
        ),
        ("graid_helper_batches_total", "Batches of jobs.", h.batches),
        (
            "graid_helper_protocol_errors_total",
            "Completions refused: malformed, late, or wrong (a lying helper).",
            h.protocol_errors,
        ),
    ];
    for (name, help, value) in counters {
        out.family(name, Kind::Counter, help);
        out.sample(&[], value);
    }
    out.family(
        "graid_helper_latency_max_seconds",
        Kind::Gauge,
        "The longest a job took.",
    );
    out.sample_f(&[], h.latency_max_us as f64 / 1e6);
    out.family(
        "graid_helper_fallback_jobs_total",
        Kind::Counter,
        "Parity jobs computed in the kernel instead, by reason.",
    );
    for (reason, count) in &h.fallbacks {
        out.sample(&[("reason", reason)], *count);
    }
}

/// md's `sync_action` for the array: what it does in the background.
pub fn sync_action(a: &ArrayView) -> &'static str {
    if a.reshape.is_some() {
        "reshape"
    } else if a.rebuild.is_some() {
        "recover"
    } else if let Some(s) = &a.scrub {
        match s.action.as_str() {
            "check" => "check",
            "repair" => "repair",
            _ => "resync",
        }
    } else if a.replace.is_some() {
        "replace"
    } else {
        "idle"
    }
}

/// Sectors done and in all of what runs in the background, if anything does.
fn sync_progress(a: &ArrayView) -> Option<(u64, u64)> {
    let reshape = a
        .reshape
        .as_ref()
        .map(|r| (r.moved_bytes / SECTOR_BYTES, r.total_bytes / SECTOR_BYTES));
    reshape
        .or(a
            .rebuild
            .as_ref()
            .map(|r| (r.done_sectors, r.total_sectors)))
        .or(a.scrub.as_ref().map(|s| (s.done_sectors, s.total_sectors)))
        .or(a
            .replace
            .as_ref()
            .map(|r| (r.done_sectors, r.total_sectors)))
}

/// `graid0` for `/dev/graid0`.
fn dev(a: &ArrayView) -> String {
    a.device.trim_start_matches("/dev/").to_owned()
}

fn member_labels<'a>(
    a: &ArrayView,
    m: &MemberView,
    state: Option<&'a str>,
) -> Vec<(&'a str, String)> {
    let member = m
        .device
        .as_deref()
        .map(|d| d.trim_start_matches("/dev/").to_owned())
        .unwrap_or_else(|| {
            if m.state == "missing" {
                String::new()
            } else {
                format!("{}:{}", m.major, m.minor)
            }
        });
    let mut labels = vec![
        ("device", dev(a)),
        ("role", m.role.to_string()),
        ("member", member),
    ];
    if let Some(s) = state {
        labels.push(("state", s.to_owned()));
    }
    labels
}

fn borrowed<'a>(labels: &'a [(&'a str, String)]) -> Vec<(&'a str, &'a str)> {
    labels.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

fn per_array(
    out: &mut Exposition,
    arrays: &[ArrayView],
    name: &str,
    kind: Kind,
    help: &str,
    value: impl Fn(&ArrayView) -> u64,
) {
    out.family(name, kind, help);
    for a in arrays {
        out.sample(&[("device", dev(a).as_str())], value(a));
    }
}

fn per_array_f(
    out: &mut Exposition,
    arrays: &[ArrayView],
    name: &str,
    help: &str,
    value: impl Fn(&ArrayView) -> f64,
) {
    out.family(name, Kind::Gauge, help);
    for a in arrays {
        out.sample_f(&[("device", dev(a).as_str())], value(a));
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Gauge,
    Counter,
}

/// The text being written: each family's HELP and TYPE once, then its samples.
#[derive(Default)]
struct Exposition {
    text: String,
    family: String,
}

impl Exposition {
    fn family(&mut self, name: &str, kind: Kind, help: &str) {
        let kind = match kind {
            Kind::Gauge => "gauge",
            Kind::Counter => "counter",
        };
        // HELP text escapes backslash and newline only.
        let help = help.replace('\\', "\\\\").replace('\n', "\\n");
        let _ = writeln!(self.text, "# HELP {name} {help}\n# TYPE {name} {kind}");
        self.family = name.to_owned();
    }

    fn sample(&mut self, labels: &[(&str, &str)], value: u64) {
        self.line(labels, &value.to_string());
    }

    fn sample_f(&mut self, labels: &[(&str, &str)], value: f64) {
        self.line(labels, &format!("{value}"));
    }

    fn line(&mut self, labels: &[(&str, &str)], value: &str) {
        self.text.push_str(&self.family);
        if !labels.is_empty() {
            let pairs: Vec<String> = labels
                .iter()
                .map(|(k, v)| format!("{k}=\"{}\"", escape_label(v)))
                .collect();
            let _ = write!(self.text, "{{{}}}", pairs.join(","));
        }
        let _ = writeln!(self.text, " {value}");
    }
}

/// A label value as the text format wants it: backslash, double quote and newline escaped.
fn escape_label(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::fake::{array, FakeControl};
    use crate::member::fake::FakeSystem;
    use graid_abi::{GRAID_ARRAY_DEGRADED, GRAID_MEMBER_MISSING, GRAID_MEMBER_REBUILDING};
    use std::collections::{BTreeMap, BTreeSet};

    fn metrics() -> String {
        let mut rebuilding = array(
            2,
            "vault",
            5,
            &[(259, 0, 0), (259, 1, GRAID_MEMBER_REBUILDING), (259, 2, 0)],
        );
        rebuilding.state = GRAID_ARRAY_DEGRADED;
        rebuilding.member_data_sectors = 1000;
        rebuilding.members[1].recovery_offset = 250;
        rebuilding.rate_kibs = 64;
        rebuilding.mismatch_sectors = 16;
        let mut odd = array(
            7,
            "say \"hi\"\\",
            1,
            &[(259, 3, 0), (0, 0, GRAID_MEMBER_MISSING)],
        );
        odd.state = GRAID_ARRAY_DEGRADED;
        let ctl = FakeControl::with(vec![rebuilding, odd]);
        let sys = FakeSystem::with_disks(&["nvme0n1", "nvme1n1", "nvme2n1", "nvme3n1"]);
        run(&ctl, &sys, None).unwrap()
    }

    /// Parses the exposition as a scraper does: every sample belongs to the family declared
    /// last, each family is declared once with a HELP and a TYPE, label values unescape.
    fn parse(text: &str) -> BTreeMap<String, f64> {
        let mut families = BTreeSet::new();
        let mut current = String::new();
        let mut samples = BTreeMap::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# HELP ") {
                let name = rest.split(' ').next().unwrap();
                assert!(families.insert(name.to_owned()), "{name} declared twice");
                current = name.to_owned();
                continue;
            }
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').unwrap();
                assert_eq!(name, current);
                assert!(kind == "gauge" || kind == "counter");
                assert_eq!(kind == "counter", name.ends_with("_total"), "{name}");
                continue;
            }
            let (series, value) = line.rsplit_once(' ').unwrap();
            let name = series.split('{').next().unwrap();
            assert_eq!(name, current, "sample outside its family: {line}");
            assert!(name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c == '_' || c.is_ascii_digit()));
            assert!(samples
                .insert(series.to_owned(), value.parse::<f64>().unwrap())
                .is_none());
        }
        samples
    }

    #[test]
    fn every_sample_sits_in_its_declared_family() {
        let text = metrics();
        if let Some(path) = std::env::var_os("GRAID_METRICS_SAMPLE") {
            fs::write(path, &text).unwrap();
        }
        let samples = parse(&text);
        assert!(samples.len() > 50);
    }

    #[test]
    fn states_progress_and_counters_are_the_arrays() {
        let s = parse(&metrics());
        let get = |k: &str| *s.get(k).unwrap_or_else(|| panic!("no {k}"));
        assert_eq!(
            get(r#"graid_array_state{device="graid2",state="degraded"}"#),
            1.0
        );
        assert_eq!(
            get(r#"graid_array_state{device="graid2",state="optimal"}"#),
            0.0
        );
        assert_eq!(get(r#"graid_array_degraded{device="graid2"}"#), 1.0);
        assert_eq!(
            get(r#"graid_array_members{device="graid2",state="rebuilding"}"#),
            1.0
        );
        assert_eq!(
            get(r#"graid_array_members{device="graid7",state="missing"}"#),
            1.0
        );
        assert_eq!(
            get(r#"graid_sync_action{device="graid2",action="recover"}"#),
            1.0
        );
        assert_eq!(
            get(r#"graid_sync_action{device="graid7",action="idle"}"#),
            1.0
        );
        assert_eq!(get(r#"graid_sync_completed_ratio{device="graid2"}"#), 0.25);
        assert_eq!(
            get(r#"graid_sync_remaining_bytes{device="graid2"}"#),
            750.0 * 512.0
        );
        assert_eq!(get(r#"graid_sync_speed_bytes{device="graid2"}"#), 65536.0);
        assert_eq!(get(r#"graid_mismatch_sectors{device="graid2"}"#), 16.0);
        assert_eq!(
            get(r#"graid_member_reads_total{device="graid2",role="2",member="nvme2n1"}"#),
            200.0
        );
        assert_eq!(
            get(r#"graid_member_state{device="graid7",role="1",member="",state="missing"}"#),
            1.0
        );
        // The helper's families come from the fake's status.
        assert!(s.keys().any(|k| k.starts_with("graid_helper_state{")));
    }

    #[test]
    fn a_restripe_is_a_reshape_with_its_progress() {
        let sys = FakeSystem::with_disks(&["nvme0n1", "nvme1n1", "nvme2n1"]);
        let d = array(3, "grown", 5, &[(259, 0, 0), (259, 1, 0), (259, 2, 0)]);
        let mut view = ArrayView::new(&d, &sys);
        view.reshape = Some(crate::grow_members::ReshapeView {
            state: "stalled",
            raid_devices_from: 3,
            raid_devices: 4,
            chunk_bytes_from: 65536,
            chunk_bytes: 65536,
            layout_from: 2,
            layout: 2,
            total_bytes: 4096 * 512,
            moved_bytes: 1024 * 512,
            recorded_bytes: 0,
            percent: 25.0,
            data_offset_bytes: 0,
            new_data_offset_bytes: 0,
        });
        let s = parse(&render(&[view], None));
        let get = |k: &str| *s.get(k).unwrap_or_else(|| panic!("no {k}"));
        assert_eq!(
            get(r#"graid_sync_action{device="graid3",action="reshape"}"#),
            1.0
        );
        assert_eq!(
            get(r#"graid_sync_action{device="graid3",action="idle"}"#),
            0.0
        );
        assert_eq!(get(r#"graid_sync_completed_ratio{device="graid3"}"#), 0.25);
        assert_eq!(
            get(r#"graid_sync_remaining_bytes{device="graid3"}"#),
            3072.0 * 512.0
        );
        assert_eq!(get(r#"graid_sync_stalled{device="graid3"}"#), 1.0);
    }

    #[test]
    fn label_values_are_escaped() {
        let text = metrics();
        assert!(text.contains(r#"name="say \"hi\"\\""#), "{text}");
    }

    #[test]
    fn output_file_is_replaced_whole() {
        let dir = std::env::temp_dir().join(format!("graid-metrics-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let file = dir.join("graid.prom");
        fs::write(&file, "old").unwrap();
        let ctl = FakeControl::with(vec![array(0, "data", 1, &[(259, 0, 0), (259, 1, 0)])]);
        let sys = FakeSystem::with_disks(&["nvme0n1", "nvme1n1"]);
        assert_eq!(run(&ctl, &sys, Some(&file)).unwrap(), "");
        let written = fs::read_to_string(&file).unwrap();
        assert!(written.contains(r#"graid_array_info{device="graid0",name="data""#));
        // Nothing is left beside it.
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 1);
        let err = run(&ctl, &sys, Some(&dir.join("no/such/dir/x.prom"))).unwrap_err();
        assert!(
            err.to_string().contains("cannot write the metrics"),
            "{err}"
        );
        fs::remove_dir_all(&dir).unwrap();
    }
}
