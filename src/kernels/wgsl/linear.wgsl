// Linear (nn.Linear on a row block of its weight):
//   out[m, out_col + n] = sum_k x[m, k] * W[n, k] + bias[n] (+ residual[m, out_col + n]),  n < N,
// with W [N, K] in Hugging Face layout (one row per output), decoded by WEIGHT_TYPE: 0 f32 bits, 1 f16,
// 2 bf16 (two 16-bit values per u32, the lower-indexed element in the low half). out and residual have
// out_stride columns; the other columns of out are left alone.
// Two variants of one contract, chosen by the MATVEC override:
// * tiled (prompts): each workgroup computes a 64x64 tile of out, 4x4 elements per thread, walking K in
//   steps of 16 through x and W tiles staged (transposed, k-major) in workgroup memory;
// * matrix-vector (M <= 4, decoding): 32 threads share each output column and split its dot products over
//   16-byte pieces of its weight row (one weight at a time when K is not a multiple of 4 for f32 or 8 for
//   16-bit weights, whose rows then do not start on 16 bytes), then add up their partial sums in
//   workgroup memory.
// Bindings (group 0): 0 x [M, K] read, 1 W [N, K] read, 2 bias [N] read, 3 residual [M, out_stride] read,
//                     4 out [M, out_stride] read_write, 5 params uniform.
// Dispatch, folded as (min(W, 65535), ceil(W / x), 1): tiled W = ceil(N / 64) * ceil(M / 64) tiles, column
// tiles fastest; matrix-vector W = ceil(N / 8).

//!include linear_params.wgsl
//!include weights.wgsl

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> W: array<u32>;
@group(0) @binding(2) var<storage, read> bias: array<f32>;
@group(0) @binding(3) var<storage, read> residual: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
@group(0) @binding(5) var<uniform> params: Params;

override MATVEC: bool = false;

const WORKGROUP_SIZE: u32 = 256u;

// Matrix-vector variant: LANES threads per output column, COLS columns per workgroup.
const MATVEC_ROWS: u32 = 4u;
const LANES: u32 = 32u;
const COLS: u32 = WORKGROUP_SIZE / LANES;
var<workgroup> partial: array<f32, MATVEC_ROWS * WORKGROUP_SIZE>;  // partial[m * WORKGROUP_SIZE + lid]

fn weight_at(e: u32) -> f32 {
  return weight_element(W[weight_word(e)], e);
}

fn x4(i: u32) -> vec4<f32> {
  return vec4<f32>(x[i], x[i + 1u], x[i + 2u], x[i + 3u]);
}

//!include linear_store.wgsl

// W rows n0.. and k0.. into w_tile, 4 elements per thread, 16 neighbouring threads along one row's k.
fn stage_w_tile(n0: u32, k0: u32, lid: u32) {
  for (var r: u32 = 0u; r < 4u; r++) {
    let idx = lid + r * WORKGROUP_SIZE;
    let row = idx / TILE_K;
    let kk = idx % TILE_K;
    var wv: f32 = 0.0;
    if (n0 + row < params.N && k0 + kk < params.K) {
      wv = weight_at((n0 + row) * params.K + k0 + kk);
    }
    w_tile[kk * PITCH + row] = wv;
  }
}

fn matvec(block: u32, lid: u32) {
  let M = params.M;
  let K = params.K;
  let n = block * COLS + lid / LANES;
  let lane = lid % LANES;

  var acc: array<f32, MATVEC_ROWS>;
  let per_word = select(2u, 1u, WEIGHT_TYPE == 0u);  // weights per u32
  if (n < params.N && K % (4u * per_word) == 0u) {
    // Rows start on a 16-byte boundary: each lane reads four consecutive words (4 or 8 weights) per step,
    // the lanes of a column neighbouring 16-byte pieces of its row.
    let words = K / per_word;
    let row = n * words;
    for (var word = 4u * lane; word < words; word += 4u * LANES) {
      let w = vec4<u32>(W[row + word], W[row + word + 1u], W[row + word + 2u], W[row + word + 3u]);
      let k = word * per_word;
      for (var m: u32 = 0u; m < MATVEC_ROWS; m++) {
        if (m < M) {
          if (WEIGHT_TYPE == 0u) {
            acc[m] += dot(x4(m * K + k), bitcast<vec4<f32>>(w));
          } else {
            acc[m] += dot(x4(m * K + k), vec4<f32>(halves(w.x), halves(w.y))) +
                      dot(x4(m * K + k + 4u), vec4<f32>(halves(w.z), halves(w.w)));
          }
        }
      }
    }
  } else if (n < params.N) {
    // K is not a multiple of 4 (f32) or 8 (16-bit weights): weights are read one by one.
    let row = n * K;
    for (var k = lane; k < K; k += LANES) {
      let w = weight_at(row + k);
      for (var m: u32 = 0u; m < MATVEC_ROWS; m++) {
        if (m < M) {
          acc[m] += x[m * K + k] * w;
        }
      }
    }
  }

  // Tree reduction over the LANES threads of each column, all rows at once.
  for (var m: u32 = 0u; m < MATVEC_ROWS; m++) {
    partial[m * WORKGROUP_SIZE + lid] = acc[m];
  }
  workgroupBarrier();
  for (var stride = LANES / 2u; stride > 0u; stride /= 2u) {
    if (lane < stride) {
      for (var m: u32 = 0u; m < MATVEC_ROWS; m++) {
        partial[m * WORKGROUP_SIZE + lid] += partial[m * WORKGROUP_SIZE + lid + stride];
      }
    }
    workgroupBarrier();
  }
  // Lane m of the column writes row m.
  if (n < params.N && lane < M) {
    store(lane, n, partial[lane * WORKGROUP_SIZE + lid - lane]);
  }
}

//!include tile64.wgsl
