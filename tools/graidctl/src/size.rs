//! Parsing and formatting of sizes (chunk sizes on the command line, array and member sizes in
//! output). Units are binary: K = KiB = 1024 bytes.

/// Bytes per sector, the unit of every size in the ABI and on disk.
pub const SECTOR_BYTES: u64 = 512;

/// Smallest chunk size `create` accepts, in bytes (4 KiB).
pub const MIN_CHUNK_BYTES: u64 = 4096;
/// Largest chunk size `create` accepts, in bytes (1 MiB).
pub const MAX_CHUNK_BYTES: u64 = 1 << 20;
/// Chunk size of a striped array when `--chunk` is not given (512 KiB, mdadm's default).
pub const DEFAULT_CHUNK_BYTES: u64 = 512 << 10;

const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];

/// Parses a size with an optional binary suffix: `K`, `M`, `G`, `T` (also `KiB`, `KB`, any case),
/// or `B`/`s` for bytes/sectors. A bare number is in `default_unit` bytes (mdadm reads a bare
/// `--chunk 64` as 64 KiB, so the chunk parser passes 1024).
pub fn parse_size(text: &str, default_unit: u64) -> Result<u64, String> {
    let text = text.trim();
    let digits_end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, suffix) = text.split_at(digits_end);
    if digits.is_empty() {
        return Err(format!("'{text}' is not a size (expected e.g. 512K or 1M)"));
    }
    let number: u64 = digits
        .parse()
        .map_err(|_| format!("'{text}' is too large"))?;
    let unit = match suffix.to_ascii_lowercase().as_str() {
        "" => default_unit,
        "b" => 1,
        "s" => SECTOR_BYTES,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        _ => {
            return Err(format!(
                "'{text}' has an unknown unit '{suffix}' (use K, M, G or T)"
            ))
        }
    };
    number
        .checked_mul(unit)
        .ok_or_else(|| format!("'{text}' is too large"))
}

/// Parses a `--chunk` value and checks it: a power of two from 4 KiB to 1 MiB. Returns sectors.
pub fn parse_chunk(text: &str) -> Result<u32, String> {
    let bytes = parse_size(text, 1 << 10)?;
    if !bytes.is_power_of_two() || !(MIN_CHUNK_BYTES..=MAX_CHUNK_BYTES).contains(&bytes) {
        return Err(format!(
            "chunk size {} is not a power of two from 4 KiB to 1 MiB",
            format_bytes(bytes)
        ));
    }
    Ok((bytes / SECTOR_BYTES) as u32)
}

/// Parses a `--bitmap-chunk` value: a power of two of at least 4 KiB (a bare number is in KiB,
/// as mdadm reads it). Returns sectors.
pub fn parse_bitmap_chunk(text: &str) -> Result<u64, String> {
    let bytes = parse_size(text, 1 << 10)?;
    if !bytes.is_power_of_two() || bytes < MIN_CHUNK_BYTES {
        return Err(format!(
            "bitmap chunk {} is not a power of two of at least 4 KiB",
            format_bytes(bytes)
        ));
    }
    Ok(bytes / SECTOR_BYTES)
}

/// A byte count for people: exact values in the largest unit that divides them (`512 KiB`,
/// `4 GiB`), others with two decimals (`1.50 GiB`), small ones in bytes.
pub fn format_bytes(bytes: u64) -> String {
    let mut unit = 0;
    while unit + 1 < UNITS.len() && bytes >> (10 * (unit + 1)) != 0 {
        unit += 1;
    }
    if unit == 0 {
        return format!("{bytes} B");
    }
    let scale = 1u64 << (10 * unit);
    if bytes & (scale - 1) == 0 {
        return format!("{} {}", bytes / scale, UNITS[unit]);
    }
    // Hundredths, rounded half up, in integers (no float rounding surprises).
    let hundredths = (u128::from(bytes) * 100 + u128::from(scale) / 2) / u128::from(scale);
    format!(
        "{}.{:02} {}",
        hundredths / 100,
        hundredths % 100,
        UNITS[unit]
    )
}

/// A sector count for people, in bytes.
pub fn format_sectors(sectors: u64) -> String {
    format_bytes(sectors.saturating_mul(SECTOR_BYTES))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffixes_are_binary_and_case_insensitive() {
        assert_eq!(parse_size("512K", 1), Ok(512 << 10));
        assert_eq!(parse_size("512k", 1), Ok(512 << 10));
        assert_eq!(parse_size("512KiB", 1), Ok(512 << 10));
        assert_eq!(parse_size("1M", 1), Ok(1 << 20));
        assert_eq!(parse_size("2g", 1), Ok(2 << 30));
        assert_eq!(parse_size("1T", 1), Ok(1 << 40));
        assert_eq!(parse_size("4096B", 1), Ok(4096));
        assert_eq!(parse_size("8s", 1), Ok(4096));
        assert_eq!(parse_size("64", 1024), Ok(64 << 10));
    }

    #[test]
    fn malformed_sizes_are_refused() {
        for bad in [
            "",
            "K",
            "-4K",
            "1.5M",
            "4X",
            "12 34",
            "99999999999999999999",
        ] {
            assert!(parse_size(bad, 1).is_err(), "{bad}");
        }
        assert!(parse_size("99999999999T", 1)
            .unwrap_err()
            .contains("too large"));
    }

    #[test]
    fn chunk_is_a_power_of_two_from_4k_to_1m() {
        assert_eq!(parse_chunk("4K"), Ok(8));
        assert_eq!(parse_chunk("512K"), Ok(1024));
        assert_eq!(
            parse_chunk("512"),
            Ok(1024),
            "bare numbers are KiB like mdadm"
        );
        assert_eq!(parse_chunk("1M"), Ok(2048));
        for bad in ["2K", "2M", "48K", "0", "4097B"] {
            let err = parse_chunk(bad).unwrap_err();
            assert!(
                err.contains("power of two from 4 KiB to 1 MiB"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn bytes_format_exactly_or_with_two_decimals() {
        assert_eq!(format_bytes(0), "0 B");
        assert_eq!(format_bytes(1023), "1023 B");
        assert_eq!(format_bytes(4096), "4 KiB");
        assert_eq!(format_bytes(512 << 10), "512 KiB");
        assert_eq!(format_bytes(3 << 29), "1.50 GiB");
        assert_eq!(format_bytes((1 << 40) - 1), "1024.00 GiB");
        assert_eq!(format_bytes(1 << 40), "1 TiB");
        assert_eq!(format_bytes(u64::MAX), "16384.00 PiB");
        assert_eq!(format_sectors(2048), "1 MiB");
        assert_eq!(format_sectors(u64::MAX), "16384.00 PiB");
    }
}
