//! Array and member UUIDs: 16 raw bytes, shown in the canonical 8-4-4-4-12 form.

use graid_engine::superblock::UuidText;

/// Formats 16 bytes as `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` (lowercase, bytes in order), as
/// the module's uevents show them.
pub fn format(uuid: &[u8; 16]) -> String {
    UuidText(uuid).to_string()
}

/// A UUID's 32 hex digits without separators (`format`'s text without its dashes): names that
/// must not contain `-`, such as a systemd unit's instance (graid-last-resort@HEX.timer).
pub fn hex(uuid: &str) -> String {
    uuid.chars().filter(|c| c.is_ascii_hexdigit()).collect()
}

/// Parses a UUID written as 32 hex digits, optionally grouped by `-` (canonical form) or `:`
/// (mdadm's `xxxxxxxx:xxxxxxxx:xxxxxxxx:xxxxxxxx` form). The nil UUID is refused: on the wire it
/// means "let the module pick one".
pub fn parse(text: &str) -> Result<[u8; 16], String> {
    let digits: Vec<u8> = text.bytes().filter(|&b| b != b'-' && b != b':').collect();
    let well_formed = digits.len() == 32
        && digits.iter().all(u8::is_ascii_hexdigit)
        && !text.starts_with(['-', ':'])
        && !text.ends_with(['-', ':']);
    if !well_formed {
        return Err(format!(
            "'{text}' is not a UUID (expected 32 hex digits, e.g. \
             01234567-89ab-cdef-0123-456789abcdef)"
        ));
    }
    let mut uuid = [0u8; 16];
    for (byte, pair) in uuid.iter_mut().zip(digits.chunks_exact(2)) {
        let hex = std::str::from_utf8(pair).expect("ASCII hex digits");
        *byte = u8::from_str_radix(hex, 16).expect("checked hex digits");
    }
    if uuid == [0; 16] {
        return Err("the nil UUID is not allowed (omit --uuid for a random one)".to_owned());
    }
    Ok(uuid)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BYTES: [u8; 16] = [
        0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd,
        0xef,
    ];

    #[test]
    fn canonical_form() {
        assert_eq!(format(&BYTES), "01234567-89ab-cdef-0123-456789abcdef");
        assert_eq!(format(&[0xff; 16]), "ffffffff-ffff-ffff-ffff-ffffffffffff");
    }

    #[test]
    fn parses_canonical_mdadm_and_plain_forms() {
        assert_eq!(parse("01234567-89ab-cdef-0123-456789abcdef"), Ok(BYTES));
        assert_eq!(parse("01234567-89AB-CDEF-0123-456789ABCDEF"), Ok(BYTES));
        assert_eq!(parse("01234567:89abcdef:01234567:89abcdef"), Ok(BYTES));
        assert_eq!(parse("0123456789abcdef0123456789abcdef"), Ok(BYTES));
        assert_eq!(parse(&format(&BYTES)), Ok(BYTES));
    }

    #[test]
    fn refuses_malformed_and_nil() {
        for bad in [
            "",
            "0123",
            "01234567-89ab-cdef-0123-456789abcdeg",
            "01234567-89ab-cdef-0123-456789abcdef00",
            "-0123456789abcdef0123456789abcdef",
            "0123456789abcdef0123456789abcdef:",
            "01234567-89ab-cdef-0123-456789abcdé",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        let err = parse("00000000-0000-0000-0000-000000000000").unwrap_err();
        assert!(err.contains("nil"), "{err}");
    }
}
