// md's RAID-5/6 parity and recovery on an NVIDIA GPU, 32 bits (four bytes) per thread and
// step. The same algebra, constants and column order as the Vulkan engine's shaders
// (graid_parity::device): a job's columns lie back to back from `columns`, `words` u32 each,
// the data columns in md's syndrome order, then P, then Q. GF(2^8) with md's polynomial 0x11d.
//
// Compiled to PTX ahead of time by build-ptx.py (NVRTC from the nvidia-cuda-nvrtc wheel) and
// committed as parity.ptx, which the engine embeds; CI checks the two agree.

typedef unsigned int u32;

// Each byte of `x` times g = 2.
__device__ __forceinline__ u32 times_two(u32 x)
{
	u32 carries = (x >> 7) & 0x01010101u;
	return ((x << 1) & 0xfefefefeu) ^ (carries * 0x1du);
}

// Each byte of `x` times the constant byte `c`, bit by bit.
__device__ __forceinline__ u32 times(u32 x, u32 c)
{
	u32 acc = 0;
	for (c &= 0xffu; c != 0; c >>= 1) {
		if (c & 1u)
			acc ^= x;
		x = times_two(x);
	}
	return acc;
}

// P (XOR) and, when `pq`, Q (md's syndrome by Horner's rule from the last data column).
extern "C" __global__ void graid_generate(u32 *__restrict__ columns, u32 words, u32 data, u32 pq)
{
	for (u32 w = blockIdx.x * blockDim.x + threadIdx.x; w < words; w += gridDim.x * blockDim.x) {
		u32 p = 0, q = 0;
		for (u32 i = data; i-- > 0;) {
			u32 d = columns[(size_t)i * words + w];
			p ^= d;
			q = times_two(q) ^ d;
		}
		columns[(size_t)data * words + w] = p;
		if (pq)
			columns[(size_t)(data + 1) * words + w] = q;
	}
}

// One or two lost columns of any role, by md's cases (graid_parity::device says which `mode`
// and computes `c0`, `c1`):
//   1: one data column lost, P intact: Dx = P + the other data (a lost Q regenerated, c0 = g^x);
//   2: data x and P lost: Dx = c0 * (Q + the others' syndrome), c0 = g^-x; P regenerated;
//   3: data x and y lost: Dx = c0 * Pxy + c1 * Qxy, Dy = Pxy + Dx (md's raid6_2data_recov);
//   4: only parity lost: regenerated.
// Only lost columns are written.
extern "C" __global__ void graid_recover(u32 *__restrict__ columns, u32 words, u32 data,
					 u32 parity, u32 lost_a, u32 lost_b, u32 mode, u32 c0,
					 u32 c1)
{
	u32 p = data, q = data + 1;
	bool p_lost = lost_a == p || lost_b == p;
	bool q_lost = parity == 2 && (lost_a == q || lost_b == q);
	for (u32 w = blockIdx.x * blockDim.x + threadIdx.x; w < words; w += gridDim.x * blockDim.x) {
		// The surviving data's P and syndrome (lost columns count as zero).
		u32 ps = 0, qs = 0;
		for (u32 i = data; i-- > 0;) {
			u32 d = (i == lost_a || i == lost_b) ? 0 : columns[(size_t)i * words + w];
			ps ^= d;
			qs = times_two(qs) ^ d;
		}
		if (mode == 1) {
			u32 dx = columns[(size_t)p * words + w] ^ ps;
			columns[(size_t)lost_a * words + w] = dx;
			if (q_lost)
				columns[(size_t)q * words + w] = qs ^ times(dx, c0);
		} else if (mode == 2) {
			u32 dx = times(columns[(size_t)q * words + w] ^ qs, c0);
			columns[(size_t)lost_a * words + w] = dx;
			columns[(size_t)p * words + w] = ps ^ dx;
		} else if (mode == 3) {
			u32 pxy = columns[(size_t)p * words + w] ^ ps;
			u32 qxy = columns[(size_t)q * words + w] ^ qs;
			u32 dx = times(pxy, c0) ^ times(qxy, c1);
			columns[(size_t)lost_a * words + w] = dx;
			columns[(size_t)lost_b * words + w] = pxy ^ dx;
		} else {
			if (p_lost)
				columns[(size_t)p * words + w] = ps;
			if (q_lost)
				columns[(size_t)q * words + w] = qs;
		}
	}
}

// Read-modify-write: each change's old and new data (columns 2k and 2k + 1) folded into P (and,
// when `parity` is 2, Q) in place: P ^= old ^ new, Q ^= g^index * (old ^ new). `coef` holds
// each change's g^index, four to a word (change k in byte k % 4 of word k / 4).
struct Coefficients {
	u32 word[8];
};

extern "C" __global__ void graid_update(u32 *__restrict__ columns, u32 words, u32 changes,
					u32 parity, Coefficients coef)
{
	u32 *p = columns + (size_t)2 * changes * words;
	u32 *q = p + words;
	for (u32 w = blockIdx.x * blockDim.x + threadIdx.x; w < words; w += gridDim.x * blockDim.x) {
		u32 pw = p[w], qw = parity == 2 ? q[w] : 0;
		for (u32 k = 0; k < changes; k++) {
			u32 d = columns[(size_t)2 * k * words + w] ^ columns[(size_t)(2 * k + 1) * words + w];
			pw ^= d;
			qw ^= times(d, coef.word[k / 4] >> (8 * (k % 4)));
		}
		p[w] = pw;
		if (parity == 2)
			q[w] = qw;
	}
}
