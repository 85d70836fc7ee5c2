//! `graidctl stop ARRAY`: GRAID_IOC_STOP.

use crate::array_ref::{resolve, ArrayRef};
use crate::control::ControlDevice;
use crate::errno::{ioctl_error, Op};
use crate::error::CtlError;
use crate::export;
use crate::member::System;
use crate::nvmet::{Nvmet, NVMET_ROOT};
use crate::output::{json, ArrayView};
use graid_abi::{GraidStop, GRAID_STOP_FORCE};
use std::time::Duration;

/// udev and blkid open a new or changed array for a moment; a stop that races with them waits
/// this long (in total) for them to let go before reporting the array busy.
const BUSY_GRACE: Duration = if cfg!(test) {
    Duration::ZERO
} else {
    Duration::from_secs(3)
};
const BUSY_POLL: Duration = Duration::from_millis(100);

pub fn run(
    ctl: &dyn ControlDevice,
    sys: &dyn System,
    array: &ArrayRef,
    force: bool,
    json_out: bool,
) -> Result<String, CtlError> {
    let detail = resolve(ctl, sys, array)?;
    let view = ArrayView::new(&detail, sys);
    if let Some(e) = view.exports.first() {
        if !force {
            return Err(CtlError::Failed(format!(
                "{} is exported over NVMe-oF as {}: graidctl unexport {} first, or stop --force, \
                 which takes the export down (exports.conf keeps it for the array's next start)",
                view.label(),
                e.nqn,
                view.device
            )));
        }
        export::take_down(&Nvmet::new(NVMET_ROOT), &view.label(), &view.exports)?;
    }
    let req = GraidStop {
        index: detail.index,
        flags: if force { GRAID_STOP_FORCE } else { 0 },
    };
    let mut waited = Duration::ZERO;
    let mut result = ctl.stop(&req);
    while matches!(&result, Err(e) if e.raw_os_error() == Some(libc::EBUSY)) && waited < BUSY_GRACE
    {
        std::thread::sleep(BUSY_POLL);
        waited += BUSY_POLL;
        result = ctl.stop(&req);
    }
    result.map_err(|e| {
        let label = view.label();
        let op = Op::Stop {
            array: &label,
            force,
            open_count: detail.open_count,
        };
        ioctl_error(op, &e)
    })?;
    Ok(if json_out {
        json(&view)
    } else {
        format!("graidctl: stopped {}\n", view.label())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::array_ref::parse;
    use crate::control::fake::{array, FakeControl};
    use crate::member::fake::FakeSystem;

    fn ctl() -> FakeControl {
        FakeControl::with(vec![
            array(0, "data", 1, &[(259, 0, 0), (259, 1, 0)]),
            array(2, "", 0, &[(259, 2, 0), (259, 3, 0)]),
        ])
    }

    #[test]
    fn stops_by_name_and_reports() {
        let ctl = ctl();
        let out = run(
            &ctl,
            &FakeSystem::default(),
            &parse("/dev/graid/data").unwrap(),
            false,
            false,
        )
        .unwrap();
        assert_eq!(out, "graidctl: stopped /dev/graid0 (data)\n");
        assert_eq!(*ctl.stopped.borrow(), [GraidStop { index: 0, flags: 0 }]);
        let out = run(
            &ctl,
            &FakeSystem::default(),
            &parse("2").unwrap(),
            true,
            true,
        )
        .unwrap();
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["device"], "/dev/graid2");
        assert_eq!(
            ctl.stopped.borrow()[1],
            GraidStop {
                index: 2,
                flags: GRAID_STOP_FORCE
            }
        );
    }

    #[test]
    fn busy_array_says_to_close_it_first() {
        let ctl = ctl();
        ctl.arrays.borrow_mut()[0].open_count = 3;
        ctl.fail.borrow_mut().push(("stop", libc::EBUSY));
        let err = run(
            &ctl,
            &FakeSystem::default(),
            &parse("data").unwrap(),
            false,
            false,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot stop /dev/graid0 (data): the array is in use (open 3 time(s)); unmount or \
             close it first (--force cannot stop an open array either) (EBUSY)"
        );
    }

    #[test]
    fn an_exported_array_is_refused_without_force() {
        let ctl = ctl();
        let sys = FakeSystem::default();
        sys.exports.borrow_mut().push(crate::nvmet::Export {
            nqn: "nqn.2024-01.com.example:data".into(),
            device: "/dev/graid0".into(),
            enabled: true,
            listeners: Vec::new(),
            hosts: Vec::new(),
            allow_any_host: true,
        });
        let err = run(&ctl, &sys, &parse("data").unwrap(), false, false).unwrap_err();
        assert!(
            err.to_string().starts_with(
                "/dev/graid0 (data) is exported over NVMe-oF as nqn.2024-01.com.example:data: \
                 graidctl unexport /dev/graid0 first"
            ),
            "{err}"
        );
        assert!(ctl.stopped.borrow().is_empty());
        // Another array's export does not hold this one.
        run(&ctl, &sys, &parse("2").unwrap(), false, false).unwrap();
    }

    #[test]
    fn unknown_array_sends_nothing() {
        let ctl = ctl();
        let err = run(
            &ctl,
            &FakeSystem::default(),
            &parse("/dev/graid5").unwrap(),
            false,
            false,
        )
        .unwrap_err();
        assert_eq!(err.to_string(), "no such array: /dev/graid5 is not running");
        assert!(ctl.stopped.borrow().is_empty());
    }
}
