// SPDX-License-Identifier: GPL-2.0

//! Error numbers graid answers with that `kernel::error::code` does not predefine.

use kernel::{bindings, error::Error};

fn code(errno: u32) -> Error {
    Error::from_errno(-(errno as i32))
}

/// A member's superblock is corrupt or of an unsupported format.
pub(crate) fn euclean() -> Error {
    code(bindings::EUCLEAN)
}

/// A member carries no graid superblock.
pub(crate) fn enodata() -> Error {
    code(bindings::ENODATA)
}

/// A member is older than the rest of its array (or was failed or removed from it).
pub(crate) fn estale() -> Error {
    code(bindings::ESTALE)
}

/// A member is a zoned device.
pub(crate) fn emediumtype() -> Error {
    code(bindings::EMEDIUMTYPE)
}

/// The operation is not available for this array's level (yet).
pub(crate) fn eopnotsupp() -> Error {
    code(bindings::EOPNOTSUPP)
}

/// The helper speaks another version of the ring's protocol.
pub(crate) fn eproto() -> Error {
    code(bindings::EPROTO)
}
