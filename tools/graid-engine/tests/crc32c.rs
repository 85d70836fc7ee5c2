//! The engine's CRC-32C against published vectors and the `crc32c` crate.

use graid_engine::crc32c::crc32c;
use proptest::prelude::*;

#[test]
fn check_value() {
    assert_eq!(crc32c(b"123456789"), 0xE306_9283);
}

#[test]
fn empty_input() {
    assert_eq!(crc32c(&[]), 0);
}

// RFC 3720 (iSCSI), appendix B.4.
#[test]
fn iscsi_vectors() {
    let ascending: Vec<u8> = (0..32).collect();
    let descending: Vec<u8> = (0..32).rev().collect();
    assert_eq!(crc32c(&[0x00; 32]), 0x8A91_36AA);
    assert_eq!(crc32c(&[0xFF; 32]), 0x62A8_AB43);
    assert_eq!(crc32c(&ascending), 0x46DD_794E);
    assert_eq!(crc32c(&descending), 0x113F_DB5C);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn matches_the_crc32c_crate(bytes in proptest::collection::vec(any::<u8>(), 0..5000)) {
        prop_assert_eq!(crc32c(&bytes), crc32c::crc32c(&bytes));
    }
}
