//! `graidctl helper`, and the helper line of `detail`: the parity helper the module offloads to
//! and what it did (`Documentation/ring-protocol.rst`).

use crate::control::ControlDevice;
use crate::errno::{ioctl_error, Op};
use crate::error::CtlError;
use crate::output::json;
use graid_abi::ring::{
    HelperStatus, HELPER_FALLBACK_NAMES, HELPER_STATE_DEGRADED, HELPER_STATE_HEALTHY,
    HELPER_STATE_NO_POOL,
};
use serde::Serialize;
use std::collections::BTreeMap;

/// What the module says about its helper.
#[derive(Debug, Serialize, PartialEq)]
pub struct HelperView {
    /// `none`, `healthy`, `degraded` (missed a deadline: one job at a time) or `no-pool`.
    pub state: String,
    pub pid: u32,
    pub engine: String,
    pub pool_bytes: u64,
    pub slots: u32,
    pub queued: u32,
    pub attaches: u64,
    pub jobs: u64,
    pub bytes: u64,
    /// Of `jobs`, the rebuild's and the scrub's, and the recoveries.
    pub background_jobs: u64,
    pub recover_jobs: u64,
    /// Completions the kernel recomputed and compared.
    pub verified_jobs: u64,
    pub completed: u64,
    pub batches: u64,
    pub latency_avg_us: u64,
    pub latency_max_us: u64,
    pub protocol_errors: u64,
    /// Parity jobs computed in the kernel, by reason.
    pub fallbacks: BTreeMap<String, u64>,
}

impl HelperView {
    pub fn new(s: &HelperStatus) -> Self {
        let state = match s.state {
            HELPER_STATE_HEALTHY => "healthy",
            HELPER_STATE_DEGRADED => "degraded",
            HELPER_STATE_NO_POOL => "no-pool",
            _ => "none",
        };
        let end = s
            .engine
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(s.engine.len());
        Self {
            state: state.to_owned(),
            pid: s.pid,
            engine: String::from_utf8_lossy(&s.engine[..end]).into_owned(),
            pool_bytes: s.pool_bytes,
            slots: s.slots,
            queued: s.queued,
            attaches: s.attaches,
            jobs: s.jobs,
            bytes: s.bytes,
            background_jobs: s.background_jobs,
            recover_jobs: s.recover_jobs,
            verified_jobs: s.verified_jobs,
            completed: s.completed,
            batches: s.batches,
            latency_avg_us: s.latency_total_ns / s.completed.max(1) / 1000,
            latency_max_us: s.latency_max_ns / 1000,
            protocol_errors: s.protocol_errors,
            fallbacks: HELPER_FALLBACK_NAMES
                .iter()
                .zip(s.fallbacks)
                .map(|(name, count)| ((*name).to_owned(), count))
                .collect(),
        }
    }

    fn attached(&self) -> bool {
        self.state != "none"
    }

    /// `detail`'s one line.
    pub fn summary(&self) -> String {
        if !self.attached() {
            return "none (parity computed in the kernel)".to_owned();
        }
        format!(
            "{} (pid {}), {}: {} jobs offloaded, {} in the kernel",
            self.engine,
            self.pid,
            self.state,
            self.jobs,
            self.fallbacks.values().sum::<u64>()
        )
    }

    fn text(&self) -> String {
        let mut out = format!("        Helper : {}\n", self.summary());
        if self.attached() {
            out += &format!(
                "          Pool : {} MiB, {} job slots, {} jobs out\n",
                self.pool_bytes >> 20,
                self.slots,
                self.queued
            );
        }
        out += &format!(
            "     Offloaded : {} jobs, {} MiB of data, {} completed in {} batches\n",
            self.jobs,
            self.bytes >> 20,
            self.completed,
            self.batches
        );
        out += &format!(
            "    Background : {} jobs of rebuild and scrub, {} recoveries\n",
            self.background_jobs, self.recover_jobs
        );
        out += &format!(
            "       Checked : {} results recomputed by the kernel\n",
            self.verified_jobs
        );
        out += &format!(
            "       Latency : {} us average, {} us longest\n",
            self.latency_avg_us, self.latency_max_us
        );
        out += &format!(
            "      Attaches : {}, detached for protocol errors: {}\n",
            self.attaches, self.protocol_errors
        );
        let reasons: Vec<String> = self
            .fallbacks
            .iter()
            .filter(|(_, &n)| n > 0)
            .map(|(name, n)| format!("{name} {n}"))
            .collect();
        let reasons = if reasons.is_empty() {
            "none".to_owned()
        } else {
            reasons.join(", ")
        };
        out += &format!("     In kernel : {reasons}\n");
        out
    }
}

/// The helper's status, or `None` from a module without it.
pub fn status(ctl: &dyn ControlDevice) -> Option<HelperView> {
    ctl.helper_status().ok().map(|s| HelperView::new(&s))
}

/// `graidctl helper`.
pub fn run(ctl: &dyn ControlDevice, json_out: bool) -> Result<String, CtlError> {
    let s = ctl
        .helper_status()
        .map_err(|e| ioctl_error(Op::HelperStatus, &e))?;
    let view = HelperView::new(&s);
    Ok(if json_out { json(&view) } else { view.text() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::fake::FakeControl;

    fn status() -> HelperStatus {
        let mut engine = [0u8; 32];
        engine[..8].copy_from_slice(b"cpu-avx2");
        HelperStatus {
            state: HELPER_STATE_HEALTHY,
            pid: 42,
            engine,
            pool_bytes: 64 << 20,
            slots: 32,
            queued: 3,
            attaches: 2,
            jobs: 1000,
            bytes: 3 << 30,
            completed: 990,
            batches: 100,
            latency_total_ns: 990 * 250_000,
            latency_max_ns: 9_000_000,
            protocol_errors: 1,
            background_jobs: 40,
            recover_jobs: 25,
            verified_jobs: 30,
            fallbacks: [5, 7, 0, 0, 0, 0, 10, 0, 0, 1],
        }
    }

    #[test]
    fn text_and_json() {
        let mut ctl = FakeControl::with(vec![]);
        ctl.helper = status();
        let text = run(&ctl, false).unwrap();
        assert!(
            text.contains(
                "Helper : cpu-avx2 (pid 42), healthy: 1000 jobs offloaded, 23 in the kernel"
            ),
            "{text}"
        );
        assert!(
            text.contains("Latency : 250 us average, 9000 us longest"),
            "{text}"
        );
        assert!(
            text.contains("In kernel : expired 10, no-helper 5, small 7, wrong 1"),
            "{text}"
        );
        let value: serde_json::Value = serde_json::from_str(&run(&ctl, true).unwrap()).unwrap();
        assert!(
            text.contains("Background : 40 jobs of rebuild and scrub, 25 recoveries"),
            "{text}"
        );
        assert_eq!(value["jobs"], 1000);
        assert_eq!(value["recover_jobs"], 25);
        assert_eq!(value["verified_jobs"], 30);
        assert!(text.contains("Checked : 30 results"), "{text}");
        assert_eq!(value["fallbacks"]["expired"], 10);
        assert_eq!(value["engine"], "cpu-avx2");
    }

    #[test]
    fn no_helper() {
        let ctl = FakeControl::with(vec![]);
        let view = super::status(&ctl).unwrap();
        assert_eq!(view.summary(), "none (parity computed in the kernel)");
        ctl.fail.borrow_mut().push(("helper", libc::ENOTTY));
        assert!(super::status(&ctl).is_none());
        assert!(run(&ctl, false).is_err());
    }
}
