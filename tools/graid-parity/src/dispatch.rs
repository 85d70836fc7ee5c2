//! Dispatch levels: which instruction set the kernels use, what each needs from the CPU, and how
//! the best one (or the one forced by `GRAID_PARITY_LEVEL`) is chosen.

use crate::ParityError;
use std::fmt;
use std::str::FromStr;

/// The environment variable that forces a dispatch level, e.g. `GRAID_PARITY_LEVEL=avx2`.
pub const LEVEL_ENV: &str = "GRAID_PARITY_LEVEL";

/// A kernel family. Ordered from slowest to fastest preference, so `max()` picks the best.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// Portable 64-bit SWAR code; runs everywhere.
    Scalar,
    /// 16-byte vectors, `pshufb` nibble tables.
    Ssse3,
    /// 32-byte vectors, `vpshufb` nibble tables.
    Avx2,
    /// 64-byte vectors, `vpshufb` nibble tables and mask registers.
    Avx512Bw,
    /// 32-byte vectors, one `gf2p8affineqb` per multiplication.
    Avx2Gfni,
    /// 64-byte vectors, one `gf2p8affineqb` per multiplication.
    Avx512Gfni,
}

impl Level {
    /// Every level, slowest first.
    pub const ALL: [Level; 6] = [
        Level::Scalar,
        Level::Ssse3,
        Level::Avx2,
        Level::Avx512Bw,
        Level::Avx2Gfni,
        Level::Avx512Gfni,
    ];

    /// The names [`Level::from_str`] accepts, for error messages.
    pub const NAMES: &'static str = "scalar, ssse3, avx2, avx512bw, avx2-gfni, avx512-gfni";

    /// The name used by `GRAID_PARITY_LEVEL`, benchmarks and logs.
    pub fn name(self) -> &'static str {
        match self {
            Level::Scalar => "scalar",
            Level::Ssse3 => "ssse3",
            Level::Avx2 => "avx2",
            Level::Avx512Bw => "avx512bw",
            Level::Avx2Gfni => "avx2-gfni",
            Level::Avx512Gfni => "avx512-gfni",
        }
    }

    /// The CPU features the level's kernels are compiled for, as `is_x86_feature_detected!`
    /// spells them.
    pub fn required_features(self) -> &'static str {
        match self {
            Level::Scalar => "none",
            Level::Ssse3 => "ssse3",
            Level::Avx2 => "avx2",
            Level::Avx512Bw => "avx512f, avx512bw",
            Level::Avx2Gfni => "avx2, gfni",
            Level::Avx512Gfni => "avx512f, avx512bw, gfni",
        }
    }

    /// Whether this CPU can run the level's kernels.
    pub fn is_supported(self) -> bool {
        match self {
            Level::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            Level::Ssse3 => std::arch::is_x86_feature_detected!("ssse3"),
            #[cfg(target_arch = "x86_64")]
            Level::Avx2 => std::arch::is_x86_feature_detected!("avx2"),
            #[cfg(target_arch = "x86_64")]
            Level::Avx512Bw => {
                std::arch::is_x86_feature_detected!("avx512f")
                    && std::arch::is_x86_feature_detected!("avx512bw")
            }
            #[cfg(target_arch = "x86_64")]
            Level::Avx2Gfni => {
                std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("gfni")
            }
            #[cfg(target_arch = "x86_64")]
            Level::Avx512Gfni => {
                std::arch::is_x86_feature_detected!("avx512f")
                    && std::arch::is_x86_feature_detected!("avx512bw")
                    && std::arch::is_x86_feature_detected!("gfni")
            }
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }

    /// Returns `self` if the CPU supports it, or the error naming what is missing.
    pub fn check_supported(self) -> Result<Level, ParityError> {
        if self.is_supported() {
            Ok(self)
        } else {
            Err(ParityError::LevelUnsupported {
                level: self,
                needs: self.required_features(),
            })
        }
    }

    /// Every level this CPU supports, slowest first.
    pub fn supported() -> Vec<Level> {
        Level::ALL
            .into_iter()
            .filter(|level| level.is_supported())
            .collect()
    }

    /// The fastest level this CPU supports.
    pub fn best() -> Level {
        Level::supported()
            .into_iter()
            .max()
            .unwrap_or(Level::Scalar)
    }

    /// The level forced by `GRAID_PARITY_LEVEL`, if set; an unknown or unsupported name is an
    /// error rather than a silent fallback, so a test run asking for a level really gets it.
    pub fn from_env() -> Result<Option<Level>, ParityError> {
        match std::env::var(LEVEL_ENV) {
            Ok(name) if !name.trim().is_empty() => {
                let level: Level = name.parse()?;
                level.check_supported().map(Some)
            }
            _ => Ok(None),
        }
    }

    /// `GRAID_PARITY_LEVEL` if set, else the best supported level.
    pub fn select() -> Result<Level, ParityError> {
        Ok(Level::from_env()?.unwrap_or_else(Level::best))
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Level {
    type Err = ParityError;

    fn from_str(name: &str) -> Result<Level, ParityError> {
        let wanted = name.trim().to_ascii_lowercase().replace('_', "-");
        Level::ALL
            .into_iter()
            .find(|level| level.name() == wanted)
            .ok_or_else(|| ParityError::UnknownLevel(name.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for level in Level::ALL {
            assert_eq!(level.name().parse::<Level>(), Ok(level));
            assert!(Level::NAMES.contains(level.name()));
        }
        assert_eq!("AVX2_GFNI".parse::<Level>(), Ok(Level::Avx2Gfni));
    }

    #[test]
    fn unknown_name_is_an_error() {
        assert_eq!(
            "avx1024".parse::<Level>(),
            Err(ParityError::UnknownLevel("avx1024".into()))
        );
    }

    #[test]
    fn scalar_is_always_supported_and_best_is_supported() {
        assert!(Level::Scalar.is_supported());
        assert!(Level::best().is_supported());
        assert_eq!(Level::supported().last(), Some(&Level::best()));
    }

    #[test]
    fn unsupported_levels_are_refused_with_their_features() {
        for level in Level::ALL {
            match level.check_supported() {
                Ok(got) => assert!(got.is_supported() && got == level),
                Err(err) => {
                    assert!(!level.is_supported());
                    let text = err.to_string();
                    assert!(
                        text.contains(level.name()) && text.contains("lacks"),
                        "{text}"
                    );
                }
            }
        }
    }
}
