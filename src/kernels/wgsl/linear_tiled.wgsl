// Linear, register-blocked prompt variant (M > 4, K a multiple of 8): the contract of linear.wgsl,
//   out[m, out_col + n] = sum_k x[m, k] * W[n, k] + bias[n] (+ residual[m, out_col + n]),  n < N,
// with W [N, K] decoded by WEIGHT_TYPE (0 f32 bits, 1 f16, 2 bf16; two 16-bit values per u32, the
// lower-indexed element in the low half); out and residual have out_stride columns, the others are left alone.
// Why this shape of kernel (linear.wgsl's tiled variant, kept for K % 8 != 0, reached 13-17 TFLOP/s of an
// H200's 38 TFLOP/s FMA ceiling at M = 2048: its 4x4 outputs per thread read 8 scalars from workgroup memory
// per 16 FMAs, its global loads are scalar with a decode per weight, and it waits on every load):
// * each workgroup computes a TILE_M x TILE_N tile (64 or 128 each, ROW_GROUPS / COL_GROUPS = 1 or 2 groups
//   of 64; the dispatcher takes the largest that still gives about a workgroup per SM), each of its 16 x 16
//   threads owns rows 4ty..4ty+3 (+64) and columns 4tx..4tx+3 (+64): up to 8x8 outputs, fed per k by vec4
//   reads of workgroup memory (4 vec4 reads per 64 FMAs at 128 x 128), accumulated in four mat4x4 values
//   indexed by constants only, so they stay in registers;
// * K is walked in slabs of TILE_K = 8, staged k-major (x_s[k][m], w_s[k][n]) in two buffers: each thread
//   loads its part of slab s + 1 into registers before computing slab s and stores it into the other buffer
//   after, so global latency hides behind the FMAs and one barrier per slab suffices;
// * global loads are 16 bytes: x as vec4<f32> (rows are whole 16-byte pieces since K % 8 == 0), W as
//   vec4<u32> (4 f32 weights, or 8 16-bit weights decoded once per staged word); K % 8 == 0 for every weight
//   type keeps slabs whole and the choice of kernel a function of the shape alone;
// * the workgroup arrays are indexed [buffer][k][slot], so that the bounds checks WebGPU adds do not clamp
//   each read's address (an H200's disassembly of the flat index showed a clamp and an address computation
//   per read); a whole tile's slab has its 8 k written out (multiply_k with constant k), so each read sits at
//   a constant offset from 4 addresses per thread and the compiler overlaps the next k's reads with this k's
//   FMAs (the loop was not unrolled: each k waited on its own reads). The parts of a split loop over k
//   instead: on an H200, looped, Llama's split products took 5-7 % less time and its whole ones 17-30 %
//   more than written out (runs 50-51; why, the timings do not show);
// * the stores into workgroup memory are transposed scalars; the two threads of a warp that share a row of x
//   (or of f32 weights) write k and k + 4 of it to one bank, a 2-way conflict on 4 stores per slab, kept
//   because the XOR swizzle that avoided it needs 8 read addresses per thread instead of 4, and that build
//   spilled registers and ran slower on an H200 (runs 47-48);
// * two buffers of 8 x 128 floats for x and for W are exactly 16 KiB, the storage WebGPU guarantees;
// * SPLIT_K > 1 splits K into SPLIT_K parts of whole slabs, one workgroup per (tile, part), for products
//   with too few tiles to fill the GPU (a 512 x 896 output is 112 tiles): each writes its raw partial sums
//   to out as partials [SPLIT_K, M, N] (no bias, residual, out_stride or out_col) and
//   linear_split_sum.wgsl adds them up with the epilogue.
// Bindings (group 0): 0 x [M, K] read (as vec4), 1 W [N, K] read (as vec4<u32>), 2 bias [N] read,
//                     3 residual [M, out_stride] read, 4 out [M, out_stride] read_write, 5 params uniform.
// Dispatch, folded as (min(T, 65535), ceil(T / 65535), 1): T = ceil(N / TILE_N) * ceil(M / TILE_M) * SPLIT_K
// workgroups, column tiles fastest, then row tiles, then parts.

//!include linear_params.wgsl
//!include weights.wgsl

@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> W: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> bias: array<f32>;
@group(0) @binding(3) var<storage, read> residual: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
@group(0) @binding(5) var<uniform> params: Params;

override ROW_GROUPS: u32 = 2u;  // TILE_M = 64 * ROW_GROUPS
override COL_GROUPS: u32 = 2u;  // TILE_N = 64 * COL_GROUPS
override SPLIT_K: u32 = 1u;     // parts of K, each of ceil(slabs / SPLIT_K) slabs (the last may be shorter)

const WORKGROUP_SIZE: u32 = 256u;
const TILE_K: u32 = 8u;
const_assert TILE_K == 8u;  // main writes a whole tile's slab out, one multiply_k per k
const SLOTS: u32 = 32u;  // vec4 slots per k row: 128 rows or columns at most
// x_s[buffer][k][m / 4][m % 4], w_s likewise for n. Three indices rather than one flat one because the bounds
// checks WebGPU adds clamp every index that is not a constant: k is one once multiply_k is inlined and the
// slot is the same in every slab, so a slab takes 5 clamps (the buffer and 4 slots) instead of 32.
alias Slab = array<array<vec4<f32>, SLOTS>, TILE_K>;
var<workgroup> x_s: array<Slab, 2>;
var<workgroup> w_s: array<Slab, 2>;

// One thread's share of a slab, held in registers between its load and its store.
struct Staged {
  x: vec4<f32>,  // x[row, k .. k + 3], row = lid / 2, k = 4 * (lid % 2)
  w: vec4<u32>,  // f32: W[lid / 2, 4 * (lid % 2) ..] as bits; 16-bit: W[lid, 0 .. 8] packed
}

// Loads slab k0 .. k0 + 7 of the tile at (m0, n0); rows past M or N read as zeros.
fn load(m0: u32, n0: u32, k0: u32, lid: u32) -> Staged {
  var staged: Staged;
  let K4 = params.K / 4u;
  let row = lid / 2u;
  let piece = k0 / 4u + lid % 2u;
  if (row < 64u * ROW_GROUPS && m0 + row < params.M) {
    staged.x = x[(m0 + row) * K4 + piece];
  }
  if (WEIGHT_TYPE == 0u) {
    if (row < 64u * COL_GROUPS && n0 + row < params.N) {
      staged.w = W[(n0 + row) * K4 + piece];
    }
  } else if (lid < 64u * COL_GROUPS && n0 + lid < params.N) {
    staged.w = W[(n0 + lid) * (params.K / 8u) + k0 / 8u];
  }
  return staged;
}

fn put_x(buffer: u32, k: u32, m: u32, value: f32) {
  x_s[buffer][k][m / 4u][m % 4u] = value;
}

fn put_w(buffer: u32, k: u32, n: u32, value: f32) {
  w_s[buffer][k][n / 4u][n % 4u] = value;
}

// Stores a staged slab, transposed, into `buffer`.
fn stage(staged: Staged, buffer: u32, lid: u32) {
  let row = lid / 2u;
  let k = 4u * (lid % 2u);
  if (row < 64u * ROW_GROUPS) {
    for (var j: u32 = 0u; j < 4u; j++) {
      put_x(buffer, k + j, row, staged.x[j]);
    }
  }
  if (WEIGHT_TYPE == 0u) {
    if (row < 64u * COL_GROUPS) {
      let w = bitcast<vec4<f32>>(staged.w);
      for (var j: u32 = 0u; j < 4u; j++) {
        put_w(buffer, k + j, row, w[j]);
      }
    }
  } else if (lid < 64u * COL_GROUPS) {
    for (var j: u32 = 0u; j < 4u; j++) {
      let pair = halves(staged.w[j]);
      put_w(buffer, 2u * j, lid, pair.x);
      put_w(buffer, 2u * j + 1u, lid, pair.y);
    }
  }
}

// c[r] += a[r] * b: the outer product of 4 rows and 4 columns.
fn outer(a: vec4<f32>, b: vec4<f32>, c: mat4x4<f32>) -> mat4x4<f32> {
  return mat4x4<f32>(fma(vec4<f32>(a.x), b, c[0]), fma(vec4<f32>(a.y), b, c[1]), fma(vec4<f32>(a.z), b, c[2]),
                     fma(vec4<f32>(a.w), b, c[3]));
}

// acc_ij: rows m0 + 64i + 4ty + r (column r of the matrix), columns n0 + 64j + 4tx + 0..3 of the tile (main).
// Module-scope so that multiply_k can update them; each invocation has its own, starting at zero.
var<private> acc00: mat4x4<f32>;
var<private> acc01: mat4x4<f32>;
var<private> acc10: mat4x4<f32>;
var<private> acc11: mat4x4<f32>;

// Row k of the slab in `buffer` times the thread's accumulators: 4 vec4 reads, up to 64 FMAs. a1 and b1 are
// unused, and so not read, in a tile of one row or column group.
fn multiply_k(buffer: u32, k: u32, tx: u32, ty: u32) {
  let a0 = x_s[buffer][k][ty];
  let a1 = x_s[buffer][k][16u + ty];
  let b0 = w_s[buffer][k][tx];
  let b1 = w_s[buffer][k][16u + tx];
  acc00 = outer(a0, b0, acc00);
  if (COL_GROUPS == 2u) {
    acc01 = outer(a0, b1, acc01);
  }
  if (ROW_GROUPS == 2u) {
    acc10 = outer(a1, b0, acc10);
  }
  if (ROW_GROUPS == 2u && COL_GROUPS == 2u) {
    acc11 = outer(a1, b1, acc11);
  }
}

//!include linear_store.wgsl

// Writes a thread's 4x4 block at rows m .. m + 3, columns n .. n + 3 (row r in c[r]): through the epilogue,
// or as part `part` of the partial sums.
fn store_block(part: u32, m: u32, n: u32, c: mat4x4<f32>) {
  for (var r: u32 = 0u; r < 4u; r++) {
    if (m + r < params.M) {
      for (var j: u32 = 0u; j < 4u; j++) {
        if (n + j < params.N) {
          if (SPLIT_K > 1u) {
            out[(part * params.M + m + r) * params.N + n + j] = c[r][j];
          } else {
            store(m + r, n + j, c[r][j]);
          }
        }
      }
    }
  }
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let tile_m = 64u * ROW_GROUPS;
  let tile_n = 64u * COL_GROUPS;
  let tiles_n = (params.N + tile_n - 1u) / tile_n;
  let tiles = tiles_n * ((params.M + tile_m - 1u) / tile_m);
  // The whole workgroup shares its tile, so this return keeps the barriers in uniform control flow.
  let index = wid.x + wid.y * nwg.x;
  if (index >= tiles * SPLIT_K) {
    return;
  }
  // Unsplit (SPLIT_K = 1) these fold to the tile alone and the whole K, as if the split did not exist.
  let tile = select(index, index % tiles, SPLIT_K > 1u);
  let part = select(0u, index / tiles, SPLIT_K > 1u);
  let m0 = (tile / tiles_n) * tile_m;
  let n0 = (tile % tiles_n) * tile_n;
  let tx = lid % 16u;
  let ty = lid / 16u;

  // This part's slabs: [first_slab, end_slab) (the whole K unless split).
  let slabs = params.K / TILE_K;
  let part_slabs = select(slabs, (slabs + SPLIT_K - 1u) / SPLIT_K, SPLIT_K > 1u);
  let first_slab = part * part_slabs;
  let end_slab = select(slabs, min(slabs, first_slab + part_slabs), SPLIT_K > 1u);
  if (first_slab < end_slab) {
    stage(load(m0, n0, first_slab * TILE_K, lid), 0u, lid);
  }
  workgroupBarrier();
  for (var s: u32 = first_slab; s < end_slab; s++) {
    let more = s + 1u < end_slab;
    var next: Staged;
    if (more) {
      next = load(m0, n0, (s + 1u) * TILE_K, lid);
    }
    let buffer = (s - first_slab) % 2u;
    // Whole tiles write the slab's 8 k out, parts of a split loop over them: see the header.
    if (SPLIT_K == 1u) {
      multiply_k(buffer, 0u, tx, ty);
      multiply_k(buffer, 1u, tx, ty);
      multiply_k(buffer, 2u, tx, ty);
      multiply_k(buffer, 3u, tx, ty);
      multiply_k(buffer, 4u, tx, ty);
      multiply_k(buffer, 5u, tx, ty);
      multiply_k(buffer, 6u, tx, ty);
      multiply_k(buffer, 7u, tx, ty);
    } else {
      for (var k = 0u; k < TILE_K; k++) {
        multiply_k(buffer, k, tx, ty);
      }
    }
    if (more) {
      stage(next, 1u - buffer, lid);
    }
    workgroupBarrier();
  }

  let m = m0 + 4u * ty;
  let n = n0 + 4u * tx;
  store_block(part, m, n, acc00);
  if (COL_GROUPS == 2u) {
    store_block(part, m, n + 64u, acc01);
  }
  if (ROW_GROUPS == 2u) {
    store_block(part, m + 64u, n, acc10);
    if (COL_GROUPS == 2u) {
      store_block(part, m + 64u, n + 64u, acc11);
    }
  }
}
