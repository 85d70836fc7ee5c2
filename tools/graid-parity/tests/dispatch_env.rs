//! `GRAID_PARITY_LEVEL` forces the dispatch level. Its own test binary (own process), because it
//! sets an environment variable.

use graid_parity::{CpuEngine, Level, ParityError, LEVEL_ENV};

#[test]
fn environment_forces_or_refuses_a_level() {
    for level in Level::ALL {
        std::env::set_var(LEVEL_ENV, level.name());
        match CpuEngine::new() {
            Ok(engine) => {
                assert!(level.is_supported());
                assert_eq!(engine.level(), level);
            }
            Err(err) => {
                assert!(
                    !level.is_supported(),
                    "{level} supported but refused: {err}"
                );
                assert_eq!(
                    err,
                    ParityError::LevelUnsupported {
                        level,
                        needs: level.required_features()
                    }
                );
            }
        }
    }
    std::env::set_var(LEVEL_ENV, "sse9");
    assert_eq!(
        CpuEngine::new().err(),
        Some(ParityError::UnknownLevel("sse9".into()))
    );
    std::env::remove_var(LEVEL_ENV);
    assert_eq!(CpuEngine::new().unwrap().level(), Level::best());
}

#[test]
fn api_refuses_levels_the_cpu_lacks() {
    for level in Level::ALL {
        assert_eq!(
            CpuEngine::with_level(level).is_ok(),
            level.is_supported(),
            "{level}"
        );
    }
}
