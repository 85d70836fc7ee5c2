//! The spare table: bounded, ordered, one entry per slot.

use graid_engine::spares::{Spares, MAX_SPARES};
use graid_engine::superblock::UUID_LEN;

#[test]
fn spares_are_kept_in_order_and_bounded() {
    let spares = Spares::new();
    assert!(spares.is_empty());
    for slot in 0..MAX_SPARES as u32 {
        assert!(spares.insert(slot + 4, [slot as u8; UUID_LEN]));
    }
    assert!(spares.is_full());
    assert!(!spares.insert(40, [0; UUID_LEN]), "a ninth spare");
    assert!(spares.remove(6));
    assert!(!spares.remove(6), "removed twice");
    assert!(!spares.insert(5, [0; UUID_LEN]), "a slot taken twice");
    assert!(spares.insert(40, [9; UUID_LEN]));
    let slots: Vec<u32> = spares.iter().map(|(s, _)| s).collect();
    assert_eq!(slots, [4, 5, 40, 7, 8, 9, 10, 11]);
    assert_eq!(spares.iter().nth(2), Some((40, [9; UUID_LEN])));
    assert_eq!(spares.slot_bits() & (1 << 6), 0);
    assert_ne!(spares.slot_bits() & (1 << 40), 0);
}
