// Linear with GPTQ int4 weights ("v1" zero points, desc_act false), dequantised on the fly:
//   out[m, out_col + n] = sum_k x[m, k] * W[n, k] + bias[n] (+ residual[m, out_col + n]),  n < N,
//   W[n, k] = scales[g, n] * (q[k, n] - (z[g, n] + 1)),  g = k / group_size,
// where q[k, n] is nibble k % 8 of qweight[k / 8, n] and z[g, n] nibble n % 8 of qzeros[g, n / 8] (lowest
// bits = lowest index), and scales are f16, two per u32 (element g * N + n, lower index in the low half).
// Each qweight word holds 8 consecutive k of one column, all in one group (group_size % 8 == 0).
// Two variants of one contract, chosen by the MATVEC override:
// * tiled (prompts): as linear.wgsl, 64x64 output tiles, 4x4 per thread, K in steps of 16 staged in
//   workgroup memory; 128 threads each dequantise one qweight word of the W tile;
// * matrix-vector (M <= 4, decoding): 8 columns per workgroup, 32 threads per column splitting K by
//   qweight word, partial sums added up in workgroup memory. The 8 threads of a column group read 8
//   neighbouring words (one 32-byte sector) of a qweight row.
// Bindings (group 0): 0 x [M, K] read, 1 qweight [K / 8, N] u32 read, 2 qzeros [K / G, N / 8] u32 read,
//                     3 scales [K / G, N] f16 pairs read, 4 bias [N] read, 5 residual [M, out_stride] read,
//                     6 out [M, out_stride] read_write, 7 params uniform.
// Dispatch, folded as (min(W, 65535), ceil(W / x), 1): tiled W = ceil(N / 64) * ceil(M / 64) tiles, column
// tiles fastest; matrix-vector W = ceil(N / 8).

struct Params {
  M: u32,
  K: u32,
  N: u32,
  out_stride: u32,
  out_col: u32,
  has_bias: u32,
  has_residual: u32,
  group_size: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> qweight: array<u32>;
@group(0) @binding(2) var<storage, read> qzeros: array<u32>;
@group(0) @binding(3) var<storage, read> scales: array<u32>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;
@group(0) @binding(5) var<storage, read> residual: array<f32>;
@group(0) @binding(6) var<storage, read_write> out: array<f32>;
@group(0) @binding(7) var<uniform> params: Params;

override MATVEC: bool = false;

const WORKGROUP_SIZE: u32 = 256u;


// Matrix-vector variant: COLS columns per workgroup, SLICES threads per column.
const MATVEC_ROWS: u32 = 4u;
const COLS: u32 = 8u;
const SLICES: u32 = WORKGROUP_SIZE / COLS;
var<workgroup> partial: array<f32, MATVEC_ROWS * WORKGROUP_SIZE>;  // partial[m * WORKGROUP_SIZE + lid]

// W[n, 8 * kw + i] for i < 8: the word qweight[kw, n] dequantised with its group's scale and zero.
fn dequantize_word(kw: u32, n: u32) -> array<f32, 8> {
  let N = params.N;
  let g = (8u * kw) / params.group_size;
  let scale_pair = scales[(g * N + n) / 2u];
  let scale = unpack2x16float(select(scale_pair & 0xFFFFu, scale_pair >> 16u, (n & 1u) == 1u)).x;
  let zero = i32((qzeros[g * (N / 8u) + n / 8u] >> (4u * (n % 8u))) & 0xFu) + 1;
  let word = qweight[kw * N + n];
  var w: array<f32, 8>;
  for (var i: u32 = 0u; i < 8u; i++) {
    w[i] = scale * f32(i32((word >> (4u * i)) & 0xFu) - zero);
  }
  return w;
}

//!include linear_store.wgsl

// W rows n0.. and k0.. into w_tile: threads below TILE_K / 8 * TILE dequantise one qweight word (8 k of
// one column) each. K % 8 == 0, so a word is either wholly inside K or wholly past it.
fn stage_w_tile(n0: u32, k0: u32, lid: u32) {
  if (lid < TILE_K / 8u * TILE) {
    let n = lid % TILE;
    let word = lid / TILE;
    var w = array<f32, 8>();  // zeros where the word lies outside W
    if (n0 + n < params.N && k0 + 8u * word < params.K) {
      w = dequantize_word(k0 / 8u + word, n0 + n);
    }
    for (var i: u32 = 0u; i < 8u; i++) {
      w_tile[(8u * word + i) * PITCH + n] = w[i];
    }
  }
}

fn matvec(block: u32, lid: u32) {
  let M = params.M;
  let K = params.K;
  let n = block * COLS + lid % COLS;
  let slice = lid / COLS;

  var acc: array<f32, MATVEC_ROWS>;
  if (n < params.N) {
    for (var kw = slice; kw < K / 8u; kw += SLICES) {
      let w = dequantize_word(kw, n);
      for (var m: u32 = 0u; m < MATVEC_ROWS; m++) {
        if (m < M) {
          let xk = m * K + 8u * kw;
          var sum = acc[m];
          for (var i: u32 = 0u; i < 8u; i++) {
            sum += x[xk + i] * w[i];
          }
          acc[m] = sum;
        }
      }
    }
  }

  // Tree reduction over the SLICES threads of each column (lid, lid + COLS, ...), all rows at once.
  for (var m: u32 = 0u; m < MATVEC_ROWS; m++) {
    partial[m * WORKGROUP_SIZE + lid] = acc[m];
  }
  workgroupBarrier();
  for (var stride = WORKGROUP_SIZE / 2u; stride >= COLS; stride /= 2u) {
    if (lid < stride) {
      for (var m: u32 = 0u; m < MATVEC_ROWS; m++) {
        partial[m * WORKGROUP_SIZE + lid] += partial[m * WORKGROUP_SIZE + lid + stride];
      }
    }
    workgroupBarrier();
  }
  if (slice == 0u && n < params.N) {
    for (var m: u32 = 0u; m < M; m++) {
      store(m, n, partial[m * WORKGROUP_SIZE + lid]);
    }
  }
}

//!include tile64.wgsl
