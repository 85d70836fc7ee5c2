// SPDX-License-Identifier: GPL-2.0

//! An array's cache of RAID 5/6 stripe buffers (md's stripe cache, for our buffers): a slice
//! that ends hands its buffer here, and the next slice takes it back instead of allocating
//! and zeroing a new one, its column memory moved to whichever columns that slice needs
//! ([`StripeBuffer::refit`]). A steady stream of writes so allocates nothing once the cache
//! holds as many buffers as it keeps in flight. Bounded in bytes (the module parameter
//! `stripe_cache_kib`): a buffer that would pass the bound is freed.

use crate::engine::parity::Columns;
use crate::stripe_io::StripeBuffer;
use kernel::alloc::Flags;
use kernel::page::PAGE_SIZE;
use kernel::prelude::*;
use kernel::{new_spinlock, sync::SpinLock};

/// The most buffers a cache holds, whatever its bound (the list is allocated with the array).
const MAX_BUFFERS: usize = 4096;

/// The buffers kept, and the bytes they hold.
struct Kept {
    buffers: KVec<KBox<StripeBuffer>>,
    bytes: usize,
}

#[pin_data]
pub(crate) struct BufferCache {
    /// Taken only in process context (stripe steps, which end every buffer's use).
    #[pin]
    kept: SpinLock<Kept>,
    /// The bytes of memory the cache may hold.
    limit: usize,
}

impl BufferCache {
    /// A cache holding at most `limit` bytes of buffers.
    pub(crate) fn new(limit: usize) -> impl PinInit<Self, Error> {
        // Every buffer holds at least a page.
        let count = (limit / PAGE_SIZE).min(MAX_BUFFERS);
        try_pin_init!(Self {
            kept <- new_spinlock!(Kept {
                buffers: KVec::with_capacity(count, GFP_KERNEL)?,
                bytes: 0,
            }),
            limit,
        })
    }

    /// A kept buffer made to hold `columns` of `bytes` bytes (and log headers if `log`),
    /// allocating only what its memory lacks, with `gfp`; `None` if the cache is empty or
    /// that allocation failed (the buffer stays kept then).
    pub(crate) fn take(
        &self,
        columns: Columns,
        bytes: usize,
        log: bool,
        gfp: Flags,
    ) -> Option<KBox<StripeBuffer>> {
        let mut buffer = {
            let mut kept = self.kept.lock();
            let buffer = kept.buffers.pop()?;
            kept.bytes = kept.bytes.saturating_sub(buffer.storage());
            buffer
        };
        match buffer.refit(columns, bytes, log, gfp) {
            Ok(()) => Some(buffer),
            Err(_) => {
                self.put(buffer);
                None
            }
        }
    }

    /// Keeps `buffer` for a later slice, or frees it if the cache is full.
    pub(crate) fn put(&self, buffer: KBox<StripeBuffer>) {
        let size = buffer.storage();
        let refused = {
            let mut kept = self.kept.lock();
            let bytes = kept.bytes.saturating_add(size);
            if bytes > self.limit {
                Some(buffer)
            } else {
                match kept.buffers.push_within_capacity(buffer) {
                    Ok(()) => {
                        kept.bytes = bytes;
                        None
                    }
                    Err(refused) => Some(refused.0),
                }
            }
        };
        // Freed outside the lock.
        drop(refused);
    }
}
