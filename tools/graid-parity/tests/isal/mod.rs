//! Optional FFI to Debian's ISA-L (`libisal-dev`), an independent md-layout RAID-6
//! implementation used as an oracle and as a benchmark baseline. Only compiled with the `isal`
//! cargo feature; shared by the tests and the bench-summary example via `#[path]`.
#![allow(unsafe_code, dead_code)]

use std::os::raw::{c_int, c_void};

#[link(name = "isal")]
extern "C" {
    fn pq_gen(vects: c_int, len: c_int, array: *mut *mut c_void) -> c_int;
    fn xor_gen(vects: c_int, len: c_int, array: *mut *mut c_void) -> c_int;
}

fn pointers(data: &[&[u8]], outputs: Vec<&mut [u8]>) -> Vec<*mut c_void> {
    let len = outputs[0].len();
    assert!(
        data.iter().all(|d| d.len() == len),
        "ISA-L needs equal lengths"
    );
    // ISA-L takes sources and destinations in one array, destinations last. It only reads the
    // sources; the *mut is its C signature.
    let mut array: Vec<*mut c_void> = data.iter().map(|d| d.as_ptr() as *mut c_void).collect();
    array.extend(outputs.into_iter().map(|o| o.as_mut_ptr().cast::<c_void>()));
    array
}

/// ISA-L `pq_gen`: P and Q of `data` (md layout). Buffers must be 32-byte aligned.
pub fn gen_pq(data: &[&[u8]], p: &mut [u8], q: &mut [u8]) {
    let len = p.len();
    let mut array = pointers(data, vec![p, q]);
    // SAFETY: `array` holds data.len() source pointers then P and Q, each valid for `len`
    // bytes (checked equal above); P and Q are distinct exclusive borrows, so ISA-L's writes
    // alias nothing else.
    let rc = unsafe { pq_gen(array.len() as c_int, len as c_int, array.as_mut_ptr()) };
    assert_eq!(rc, 0, "ISA-L pq_gen refused the buffers");
}

/// ISA-L `xor_gen`: P of `data`.
pub fn gen_xor(data: &[&[u8]], p: &mut [u8]) {
    let len = p.len();
    let mut array = pointers(data, vec![p]);
    // SAFETY: as in `gen_pq`, with one destination.
    let rc = unsafe { xor_gen(array.len() as c_int, len as c_int, array.as_mut_ptr()) };
    assert_eq!(rc, 0, "ISA-L xor_gen refused the buffers");
}
