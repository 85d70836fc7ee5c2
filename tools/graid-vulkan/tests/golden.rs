//! The Vulkan engine against the byte-at-a-time oracle (`graid_parity::conformance`, the
//! checks every accelerator engine passes) on whatever device the machine has: Mesa's
//! lavapipe in CI. Without a Vulkan device the tests say so and pass, unless
//! `GRAID_REQUIRE_VULKAN=1` (as `make test` sets it, with lavapipe installed by `make deps`)
//! makes that a failure.

use graid_vulkan::VulkanEngine;
use std::sync::OnceLock;

fn required() -> bool {
    std::env::var("GRAID_REQUIRE_VULKAN").is_ok_and(|v| v == "1")
}

/// The engine, made once for all tests (a device is slow to open on lavapipe).
fn engine() -> Option<&'static VulkanEngine> {
    static ENGINE: OnceLock<Option<VulkanEngine>> = OnceLock::new();
    ENGINE
        .get_or_init(|| match VulkanEngine::new() {
            Ok(engine) => {
                eprintln!("graid-vulkan tests on {}", engine.device_name());
                Some(engine)
            }
            Err(e) => {
                assert!(
                    !required(),
                    "GRAID_REQUIRE_VULKAN=1 but no Vulkan engine: {e}"
                );
                eprintln!("skipping the Vulkan tests: {e}");
                None
            }
        })
        .as_ref()
}

graid_parity::engine_conformance_tests!(
    engine(),
    |e: &VulkanEngine| e.jobs_in_place_and_staged(),
    required()
);
