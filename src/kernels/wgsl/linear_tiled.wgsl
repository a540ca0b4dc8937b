// Linear, register-blocked prompt variant (M > 4, K a multiple of 8): the contract of linear.wgsl,
//   out[m, out_col + n] = sum_k x[m, k] * W[n, k] + bias[n] (+ residual[m, out_col + n]),  n < N,
// with W [N, K] decoded by WEIGHT_TYPE (0 f32 bits, 1 f16, 2 bf16; two 16-bit values per u32, the
// lower-indexed element in the low half); out and residual have out_stride columns, the others are left alone.
// Why this shape of kernel (linear.wgsl's tiled variant, kept for K % 8 != 0, reached 13-17 TFLOP/s of an
// H200's 38 TFLOP/s FMA ceiling at M = 2048: its 4x4 outputs per thread read 8 scalars from workgroup memory
// per 16 FMAs, its global loads are scalar with a decode per weight, and it waits on every load):
// * each workgroup computes a TILE_M x TILE_N tile (64 or 128 each, ROW_GROUPS / COL_GROUPS = 1 or 2 groups
//   of 64; the dispatcher takes the largest that still gives about a workgroup per SM, or, shared out, a
//   wave of long enough shares: kernels::linear_tile), each of its 16 x 16 threads owns rows 4ty..4ty+3
//   (+64) and columns 4tx..4tx+3 (+64): up to 8x8 outputs, fed per k by vec4
//   reads of workgroup memory (4 vec4 reads per 64 FMAs at 128 x 128), accumulated in four mat4x4 values
//   indexed by constants only, so they stay in registers;
// * K is walked in slabs of TILE_K = 8, staged k-major (x_s[k][m], w_s[k][n]) in two buffers: each thread
//   loads its part of slab s + 1 into registers before computing slab s and stores it into the other buffer
//   after, so global latency hides behind the FMAs and one barrier per slab suffices;
// * global loads are 16 bytes: x as vec4<f32> (rows are whole 16-byte pieces since K % 8 == 0), W as
//   vec4<u32> (4 f32 weights, or a row's 8 16-bit weights, which two threads decode half each); K % 8 == 0
//   for every weight type keeps slabs whole and the choice of kernel a function of the shape alone;
// * the workgroup arrays are indexed [buffer][k][slot], so that the bounds checks WebGPU adds do not clamp
//   each read's address (an H200's disassembly of the flat index showed a clamp and an address computation
//   per read); a slab has its 8 k written out (multiply_k with constant k), so each read sits at a constant
//   offset from 4 addresses per thread and the compiler overlaps the next k's reads with this k's FMAs (a
//   loop over k was not unrolled on an H200: each k waited on its own reads, and whole tiles took 17-30 %
//   longer, runs 50-51);
// * the stores into workgroup memory are transposed scalars; the two threads of a warp that share a row of x
//   (or of W) write k and k + 4 of it to one bank, a 2-way conflict on 4 stores per slab, kept
//   because the XOR swizzle that avoided it needs 8 read addresses per thread instead of 4, and that build
//   spilled registers and ran slower on an H200 (runs 47-48);
// * two buffers of 8 x 128 floats for x and for W are exactly 16 KiB, the storage WebGPU guarantees;
// * WORKERS > 0 shares the work out in equal runs of (tile, slab) iterations instead, one per workgroup
//   (linear_shares.wgsl): for products whose tiles would leave the last wave of workgroups part empty, or
//   too few to fill the GPU (a 512 x 896 output is 112 tiles). A share's whole tiles go through the
//   epilogue; a tile cut between shares is written as raw partial sums, in tile-sized slots of partials
//   [2 WORKERS, TILE_M, TILE_N], which linear_split_sum.wgsl adds up.
// * its body (include/linear_tiled_body.wgsl) is shared with linear_tiled_f16.wgsl, which multiplies in f16
//   where the adapter has shader-f16; here the tiles, products and sums are f32 (Product), so nothing is
//   lost against the checkpoint's weights.
// Bindings (group 0): 0 x [M, K] read (as vec4), 1 W [N, K] read (as vec4<u32>), 2 bias [N] read,
//                     3 residual [M, out_stride] read, 4 out [M, out_stride] read_write,
//                     5 partials [2 WORKERS, TILE_M, TILE_N] read_write (any buffer when WORKERS = 0),
//                     6 params uniform.
// Dispatch, folded as (min(T, 65535), ceil(T / 65535), 1): T = ceil(N / TILE_N) * ceil(M / TILE_M) workgroups,
// column tiles fastest, then row tiles; or T = WORKERS.

alias Product = f32;
const SLAB_SUMS = false;

const X_SLOTS: u32 = 32u;  // tiles of up to 128 rows and 128 columns
const W_SLOTS: u32 = 32u;

//!include linear_tiled_body.wgsl
