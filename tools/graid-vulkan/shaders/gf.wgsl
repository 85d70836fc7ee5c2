// GF(2^8) with md's polynomial 0x11d on four bytes packed in a u32: what every shader here
// multiplies with. build.rs puts this file before each shader (WGSL has no includes).

// Each byte of `x` times g = 2.
fn times_two(x: u32) -> u32 {
    let carries = (x >> 7u) & 0x01010101u;
    return ((x << 1u) & 0xfefefefeu) ^ (carries * 0x1du);
}

// Each byte of `x` times the constant byte `c`, bit by bit.
fn times(x: u32, c: u32) -> u32 {
    var acc = 0u;
    var v = x;
    var k = c & 0xffu;
    loop {
        if (k == 0u) {
            break;
        }
        if ((k & 1u) != 0u) {
            acc = acc ^ v;
        }
        v = times_two(v);
        k = k >> 1u;
    }
    return acc;
}
