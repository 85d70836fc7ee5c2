// SPDX-License-Identifier: GPL-2.0

//! Spares: devices that belong to an array without a role, waiting to take the place of a
//! member that fails. The engine keeps who they are (slot-table entry and UUID), so that every
//! superblock update lists them and writes their own superblocks too; their devices live with
//! the platform. Only the worker changes the table (and the array's start, before the worker
//! runs); anyone may read it.

use super::members::AtomicUuid;
use super::superblock::UUID_LEN;
use core::sync::atomic::{AtomicU32, Ordering};

/// How many spares an array holds at most.
pub const MAX_SPARES: usize = 8;

/// The `slot` of a free entry.
const FREE: u32 = u32::MAX;

#[derive(Debug)]
struct Entry {
    /// Slot-table entry of the spare's device, [`FREE`] when the entry holds none.
    slot: AtomicU32,
    uuid: AtomicUuid,
}

/// An array's spares.
#[derive(Debug)]
pub struct Spares {
    entries: [Entry; MAX_SPARES],
}

impl Default for Spares {
    fn default() -> Self {
        Self::new()
    }
}

impl Spares {
    pub const fn new() -> Self {
        Self {
            entries: [const {
                Entry {
                    slot: AtomicU32::new(FREE),
                    uuid: AtomicUuid::zero(),
                }
            }; MAX_SPARES],
        }
    }

    /// The spares as `(slot, uuid)`, in the order they were added.
    pub fn iter(&self) -> impl Iterator<Item = (u32, [u8; UUID_LEN])> + '_ {
        self.entries.iter().filter_map(|e| {
            let slot = e.slot.load(Ordering::SeqCst);
            (slot != FREE).then(|| (slot, e.uuid.load()))
        })
    }

    pub fn len(&self) -> usize {
        self.iter().count()
    }

    pub fn is_empty(&self) -> bool {
        self.iter().next().is_none()
    }

    pub fn is_full(&self) -> bool {
        self.len() == MAX_SPARES
    }

    /// Whether slot-table entry `slot` is a spare's.
    pub fn holds(&self, slot: u32) -> bool {
        self.iter().any(|(s, _)| s == slot)
    }

    /// The slot-table entries of the spares, as bits.
    pub fn slot_bits(&self) -> u64 {
        self.iter().fold(0, |bits, (slot, _)| {
            bits | 1u64.checked_shl(slot).unwrap_or(0)
        })
    }

    /// Adds a spare; false if the table is full or `slot` is already one (nothing changed).
    /// The worker only (or before the array runs).
    pub fn insert(&self, slot: u32, uuid: [u8; UUID_LEN]) -> bool {
        if slot == FREE || self.holds(slot) {
            return false;
        }
        let Some(entry) = self
            .entries
            .iter()
            .find(|e| e.slot.load(Ordering::SeqCst) == FREE)
        else {
            return false;
        };
        // The UUID first: a reader that sees the slot sees its UUID.
        entry.uuid.store(uuid);
        entry.slot.store(slot, Ordering::SeqCst);
        true
    }

    /// Drops the spare in slot-table entry `slot`; false if there is none. The worker only.
    pub fn remove(&self, slot: u32) -> bool {
        self.entries
            .iter()
            .find(|e| e.slot.load(Ordering::SeqCst) == slot && slot != FREE)
            .is_some_and(|e| {
                e.slot.store(FREE, Ordering::SeqCst);
                true
            })
    }
}
