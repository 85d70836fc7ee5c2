// md's RAID-5/6 recovery of one or two lost columns of a stripe, 32 bits per invocation.
//
// The stripe's columns lie back to back from word `base`, `words` u32 each: data in md's
// syndrome order, then P, then Q. `lost_a` and `lost_b` are the lost slots (data index, P =
// `data`, Q = `data + 1`; 0xffffffff: none). Only lost columns are written. `mode` says how
// (the host classifies, and computes the GF(2^8) constants `c0`, `c1`):
//   1: one data column x lost, P intact: Dx = P + the other data (and Q, if lost, regenerated
//      with c0 = g^x);
//   2: data x and P lost: Dx = c0 * (Q + the others' syndrome), c0 = g^-x; P regenerated;
//   3: data x and y lost: Dx = c0 * Pxy + c1 * Qxy, Dy = Pxy + Dx (md's raid6_2data_recov);
//   4: only parity lost: regenerated.
// `gf.wgsl` comes first (build.rs).

struct Recovery {
    base: u32,
    words: u32,
    data: u32,
    parity: u32,
    lost_a: u32,
    lost_b: u32,
    mode: u32,
    c0: u32,
    c1: u32,
}

@group(0) @binding(0) var<storage, read_write> columns: array<u32>;
var<immediate> r: Recovery;

fn at(slot: u32, w: u32) -> u32 {
    return r.base + slot * r.words + w;
}

fn lost(slot: u32) -> bool {
    return slot == r.lost_a || slot == r.lost_b;
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    let w = id.x;
    if (w >= r.words) {
        return;
    }
    // The surviving data's P and syndrome (lost columns count as zero).
    var ps = 0u;
    var qs = 0u;
    var i = r.data;
    loop {
        if (i == 0u) {
            break;
        }
        i = i - 1u;
        var d = 0u;
        if (!lost(i)) {
            d = columns[at(i, w)];
        }
        ps = ps ^ d;
        qs = times_two(qs) ^ d;
    }
    let p = r.data;
    let q = r.data + 1u;
    if (r.mode == 1u) {
        let dx = columns[at(p, w)] ^ ps;
        columns[at(r.lost_a, w)] = dx;
        if (r.parity == 2u && lost(q)) {
            columns[at(q, w)] = qs ^ times(dx, r.c0);
        }
    } else if (r.mode == 2u) {
        let dx = times(columns[at(q, w)] ^ qs, r.c0);
        columns[at(r.lost_a, w)] = dx;
        columns[at(p, w)] = ps ^ dx;
    } else if (r.mode == 3u) {
        let pxy = columns[at(p, w)] ^ ps;
        let qxy = columns[at(q, w)] ^ qs;
        let dx = times(pxy, r.c0) ^ times(qxy, r.c1);
        columns[at(r.lost_a, w)] = dx;
        columns[at(r.lost_b, w)] = pxy ^ dx;
    } else {
        if (lost(p)) {
            columns[at(p, w)] = ps;
        }
        if (r.parity == 2u && lost(q)) {
            columns[at(q, w)] = qs;
        }
    }
}
