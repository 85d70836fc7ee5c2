// SPDX-License-Identifier: GPL-2.0

//! raid_gpu: GPU-accelerated software RAID.
//!
//! Module entry: registers the control device `/dev/graid-control` (arrays) and the parity
//! helper's device `/dev/graid-helper` (the ring).

#[path = "../rust/mod.rs"]
mod kernel_ext;

mod array;
mod bitmap_io;
mod buffer_cache;
mod control;
mod errno;
mod helper_device;
mod io;
mod log_batch;
mod member_devices;
mod ppl_io;
mod rq_stack;
mod staging;
mod stripe_io;
mod superblock_io;
mod sysfs;
mod uevent;
mod write_stats;

// Pure RAID logic shared with the host tools (tools/graid-engine), where it is tested.
#[allow(dead_code, unreachable_pub)]
mod engine;

// Shared verbatim with the tools; not every item is used by the module.
#[allow(dead_code, unreachable_pub)]
mod uapi;

// The text of the sysfs files, shared verbatim with the tools.
#[allow(unreachable_pub)]
mod sysfs_text;

// The parity ring's layout, shared verbatim with the tools.
#[allow(dead_code, unreachable_pub)]
mod ring_uapi;

use kernel::prelude::*;
use kernel_ext::{compat::param, misc::MiscRegistration};

/// Version reported by the VERSION ioctl and `modinfo`.
pub(crate) const MODULE_VERSION: &str = "0.1.0";

module! {
    type: RaidGpuModule,
    name: "raid_gpu",
    authors: ["The graid developers"],
    description: "graid: GPU-accelerated software RAID",
    license: "GPL",
    params: {
        fault_stripe_alloc: u32 {
            default: 0,
            description: "Tests only: make every Nth fresh RAID 5/6 stripe buffer allocation fail (0: never), so arrays run on their reserve buffers",
        },
        stripe_cache_kib: u32 {
            default: 16384,
            description: "KiB of RAID 5/6 stripe buffer memory an array keeps for its next writes rather than freeing it (md's stripe cache), for arrays started afterwards; 0 keeps none",
        },
        offload_min_kib: u32 {
            default: 4294967295,
            description: "Smallest parity job sent to the helper, in KiB of data (default 128; 0: every generation)",
        },
        offload_balance: u32 {
            default: 1,
            description: "1: each parity job goes to whichever of the helper and the kernel is faster now (the slower gets one job a second); 0: every eligible job to the helper (tests)",
        },
        offload_verify: u32 {
            default: 1,
            description: "Checking the helper's results (a wrong one detaches it): 0 never; 1 every job of a new helper's first 16, then one a second; 2 every job",
        },
        offload_deadline_ms: u32 {
            default: 1000,
            description: "Milliseconds the helper has for a job before the kernel computes it",
        },
        auto_resync: u32 {
            default: 1,
            description: "1: an array whose copies or parity are not known to match resyncs as soon as it runs; 0: its resync waits for `graidctl repair` (md's frozen sync_action)",
        },
        safe_mode_delay_ms: u32 {
            default: 200,
            description: "Milliseconds without writes after which an array is marked clean again (md's safe_mode_delay), for arrays started afterwards",
        },
        bitmap_clean_ms: u32 {
            default: 5000,
            description: "Milliseconds between the looks that clear the write-intent bits of idle regions (a region idle for two looks loses its bit; md's bitmap daemon_sleep), for arrays started afterwards",
        },
    },
}

/// Bytes of stripe buffers an array keeps for reuse (`buffer_cache.rs`).
pub(crate) fn stripe_cache_bytes() -> usize {
    (param(&module_parameters::stripe_cache_kib) as usize).saturating_mul(1024)
}

/// Whether an array that needs a resync starts it when it starts.
pub(crate) fn auto_resync() -> bool {
    param(&module_parameters::auto_resync) != 0
}

/// The quiet period after which an idle array is marked clean (`engine/safe_mode.rs`).
pub(crate) fn safe_mode_delay_ms() -> u32 {
    param(&module_parameters::safe_mode_delay_ms).max(1)
}

/// How often idle regions' write-intent bits are looked at (`engine/write_intent.rs`).
pub(crate) fn bitmap_clean_ms() -> u32 {
    param(&module_parameters::bitmap_clean_ms).max(1)
}

#[pin_data(PinnedDrop)]
struct RaidGpuModule {
    /// `/sys/kernel/debug/graid/offload` (`helper_device::write_stats`). First, so it is
    /// removed (and its readers drained) before the devices it reads go.
    offload_stats: Pin<KBox<kernel::debugfs::File<()>>>,
    /// `/sys/kernel/debug/graid/stripe_buffers` (`stripe_io::write_buffer_stats`).
    buffer_stats: Pin<KBox<kernel::debugfs::File<()>>>,
    /// `/sys/kernel/debug/graid/log_writes` (`log_batch::write_log_stats`).
    log_stats: Pin<KBox<kernel::debugfs::File<()>>>,
    /// `/sys/kernel/debug/graid/held_stripes` (`stripe_io::write_hold_stats`).
    hold_stats: Pin<KBox<kernel::debugfs::File<()>>>,
    /// Where the parity helper attaches (`helper_device.rs`). Before the control device, so
    /// it goes first: its deadline work kicks the arrays' workers through it.
    #[pin]
    helper: MiscRegistration<helper_device::HelperDevice>,
    #[pin]
    control: MiscRegistration<control::Control>,
}

impl kernel::InPlaceModule for RaidGpuModule {
    fn init(module: &'static ThisModule) -> impl PinInit<Self, Error> {
        pr_info!("raid_gpu {} loaded (ABI {})\n", MODULE_VERSION, uapi::GRAID_ABI_VERSION);
        let debugfs = kernel::debugfs::Dir::new(c"graid");
        let offload_stats = KBox::pin_init(
            debugfs.read_callback_file(c"offload", (), &helper_device::write_stats),
            GFP_KERNEL,
        );
        let buffer_stats = KBox::pin_init(
            debugfs.read_callback_file(c"stripe_buffers", (), &stripe_io::write_buffer_stats),
            GFP_KERNEL,
        );
        let log_stats = KBox::pin_init(
            debugfs.read_callback_file(c"log_writes", (), &log_batch::write_log_stats),
            GFP_KERNEL,
        );
        let hold_stats = KBox::pin_init(
            debugfs.read_callback_file(c"held_stripes", (), &stripe_io::write_hold_stats),
            GFP_KERNEL,
        );
        try_pin_init!(Self {
            offload_stats: offload_stats?,
            buffer_stats: buffer_stats?,
            log_stats: log_stats?,
            hold_stats: hold_stats?,
            // Root only, one helper at a time.
            helper <- MiscRegistration::register(
                c"graid-helper",
                0o600,
                module,
                helper_device::HelperDevice::new(),
            ),
            // Root only: the control device creates and destroys arrays.
            control <- MiscRegistration::register(c"graid-control", 0o600, module, control::Control::new()),
        })
    }
}

#[pinned_drop]
impl PinnedDrop for RaidGpuModule {
    fn drop(self: Pin<&mut Self>) {
        // No array runs (each holds a module reference), but the kobjects of their sysfs
        // directories may be released later still, through code of this module.
        kernel_ext::sysfs::wait_for_releases();
    }
}
