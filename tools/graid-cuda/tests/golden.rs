//! The CUDA engine against the byte-at-a-time oracle (`graid_parity::conformance`, the checks
//! every accelerator engine passes), on the machine's first NVIDIA GPU. Without a CUDA driver
//! or device the tests say so and pass, unless `GRAID_REQUIRE_CUDA=1` (as the GPU check script,
//! `selftests/gpu/check.sh`, sets it) makes that a failure.

use graid_cuda::{CudaEngine, Limits};
use graid_parity::Engine as _;
use std::sync::OnceLock;

fn required() -> bool {
    std::env::var("GRAID_REQUIRE_CUDA").is_ok_and(|v| v == "1")
}

/// The engine, made once for all tests. Small lanes (1 MiB each), so that the 1 MiB-column
/// jobs of the batch test are cut into slices too.
fn engine() -> Option<&'static CudaEngine> {
    static ENGINE: OnceLock<Option<CudaEngine>> = OnceLock::new();
    ENGINE
        .get_or_init(|| {
            let limits = Limits {
                streams: 3,
                memory: 3 << 20,
                ..Limits::default()
            };
            match CudaEngine::new(limits) {
                Ok(engine) => {
                    eprintln!("graid-cuda tests on {}", engine.name());
                    Some(engine)
                }
                Err(e) => {
                    assert!(!required(), "GRAID_REQUIRE_CUDA=1 but no CUDA engine: {e}");
                    eprintln!("skipping the CUDA tests: {e}");
                    None
                }
            }
        })
        .as_ref()
}

graid_parity::engine_conformance_tests!(
    engine(),
    |e: &CudaEngine| e.jobs_direct_and_staged(),
    required()
);

/// Without a driver the engine says so in words, and nothing panics (cudarc's loader would,
/// were it called without checking first).
#[test]
fn without_a_driver_the_engine_says_so() {
    let result = CudaEngine::new(Limits::default());
    if graid_cuda::driver_present() {
        eprintln!("a CUDA driver is here: {:?}", result.as_ref().err());
        return;
    }
    let error = result.err().expect("an engine without a driver");
    assert_eq!(error.to_string(), "no CUDA driver (libcuda.so.1 not found)");
}

#[test]
fn bad_limits_are_refused_before_the_driver_is_touched() {
    let limits = Limits {
        streams: 0,
        ..Limits::default()
    };
    let error = CudaEngine::new(limits).err().expect("zero streams refused");
    assert!(
        error.to_string().starts_with("bad limits: streams"),
        "{error}"
    );
}
