// md's RAID-5/6 parity over one stripe's columns, 32 bits (four bytes) per invocation.
//
// The job's columns lie back to back in `columns`, `words` u32 each, from word `base`: the
// data columns in md's syndrome order, then P, then Q. P is their XOR; Q is md's syndrome,
// sum of g^i * D_i over GF(2^8) with polynomial 0x11d, by Horner's rule from the last column.
// `gf.wgsl` comes first (build.rs).

struct Params {
    // First word of the job's first column.
    base: u32,
    // Words per column.
    words: u32,
    // Data columns.
    data: u32,
    // 1: Q too (RAID 6).
    pq: u32,
}

@group(0) @binding(0) var<storage, read_write> columns: array<u32>;
var<immediate> params: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    let w = id.x;
    if (w >= params.words) {
        return;
    }
    var p = 0u;
    var q = 0u;
    var i = params.data;
    loop {
        if (i == 0u) {
            break;
        }
        i = i - 1u;
        let d = columns[params.base + i * params.words + w];
        p = p ^ d;
        q = times_two(q) ^ d;
    }
    columns[params.base + params.data * params.words + w] = p;
    if (params.pq != 0u) {
        columns[params.base + (params.data + 1u) * params.words + w] = q;
    }
}
