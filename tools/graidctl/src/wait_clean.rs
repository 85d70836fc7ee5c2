//! `graidctl wait-clean`: waits until every running array is marked clean (mdadm's
//! `--wait-clean --scan`). An array is marked clean a quiet moment after its last write (the
//! module's safe mode); at shutdown nothing waits for that moment, so the system-shutdown hook
//! (`tools/systemd/graid.shutdown`) runs this after the filesystems are unmounted or read-only:
//! arrays left clean need no resync or log replay at the next start.

use crate::array_ref::running_arrays;
use crate::control::ControlDevice;
use crate::error::CtlError;
use crate::output::array_device;
use graid_abi::GRAID_DETAIL_DIRTY;
use std::time::{Duration, Instant};

/// Waits up to `timeout` for every array to be clean, asking again after each `pause`.
/// Prints the arrays it waited for; fails naming those still dirty at the end.
pub fn run(
    ctl: &dyn ControlDevice,
    timeout: Duration,
    pause: &mut dyn FnMut(),
) -> Result<String, CtlError> {
    let start = Instant::now();
    let mut waited = false;
    loop {
        let dirty: Vec<String> = running_arrays(ctl)?
            .iter()
            .filter(|a| a.flags & GRAID_DETAIL_DIRTY != 0)
            .map(|a| array_device(a.index))
            .collect();
        if dirty.is_empty() {
            return Ok(if waited {
                format!(
                    "graidctl: every array is clean (waited {} ms)\n",
                    start.elapsed().as_millis()
                )
            } else {
                "graidctl: every array is clean\n".to_owned()
            });
        }
        if start.elapsed() >= timeout {
            return Err(CtlError::Failed(format!(
                "still dirty after {} s: {} (writes go on, or the array cannot write its \
                 superblocks)",
                timeout.as_secs(),
                dirty.join(", ")
            )));
        }
        waited = true;
        pause();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::fake::{array, FakeControl};

    #[test]
    fn waits_until_no_array_is_dirty() {
        let mut dirty = array(1, "data", 5, &[(259, 0, 0)]);
        dirty.flags = GRAID_DETAIL_DIRTY;
        let ctl = FakeControl::with(vec![array(0, "a", 1, &[(259, 1, 0)]), dirty]);
        let mut pauses = 0;
        let out = run(&ctl, Duration::from_secs(60), &mut || {
            pauses += 1;
            // The array is marked clean after the third look.
            if pauses == 3 {
                ctl.arrays.borrow_mut()[1].flags = 0;
            }
        })
        .unwrap();
        assert_eq!(pauses, 3);
        assert!(
            out.starts_with("graidctl: every array is clean (waited"),
            "{out}"
        );
    }

    #[test]
    fn names_the_arrays_still_dirty_at_the_timeout() {
        let mut dirty = array(3, "data", 5, &[(259, 0, 0)]);
        dirty.flags = GRAID_DETAIL_DIRTY;
        let ctl = FakeControl::with(vec![dirty]);
        let err = run(&ctl, Duration::ZERO, &mut || {}).unwrap_err();
        assert_eq!(
            err.to_string(),
            "still dirty after 0 s: /dev/graid3 (writes go on, or the array cannot write its \
             superblocks)"
        );
        let ctl = FakeControl::with(vec![]);
        assert_eq!(
            run(&ctl, Duration::ZERO, &mut || {}).unwrap(),
            "graidctl: every array is clean\n"
        );
    }
}
