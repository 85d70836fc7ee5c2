// md's read-modify-write over one stripe, 32 bits (four bytes) per invocation: each change's
// old and new data folded into P (and Q) in place, P ^= old ^ new, Q ^= g^index * (old ^ new).
//
// The job's columns lie back to back from word `base`, `words` u32 each: each change's old
// then new column, then P, then Q. `coef` holds each change's g^index, four to a word (change
// k in byte k % 4 of word k / 4). `gf.wgsl` comes first (build.rs).

struct Update {
    base: u32,
    words: u32,
    changes: u32,
    parity: u32,
    coef: array<u32, 8>,
}

@group(0) @binding(0) var<storage, read_write> columns: array<u32>;
var<immediate> u: Update;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    let w = id.x;
    if (w >= u.words) {
        return;
    }
    let p_at = u.base + 2u * u.changes * u.words + w;
    let q_at = p_at + u.words;
    var p = columns[p_at];
    var q = 0u;
    if (u.parity == 2u) {
        q = columns[q_at];
    }
    for (var k = 0u; k < u.changes; k = k + 1u) {
        let before = columns[u.base + 2u * k * u.words + w];
        let after = columns[u.base + (2u * k + 1u) * u.words + w];
        let d = before ^ after;
        p = p ^ d;
        q = q ^ times(d, u.coef[k / 4u] >> (8u * (k % 4u)));
    }
    columns[p_at] = p;
    if (u.parity == 2u) {
        columns[q_at] = q;
    }
}
