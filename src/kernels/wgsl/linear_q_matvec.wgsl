// Linear for decoding (M <= 4 rows) with block-quantized weights (WEIGHT_TYPE 3..10, include/blocks.wgsl): the
// contract of linear.wgsl,
//   out[m, out_col + n] = sum_k x[m, k] * W[n, k] + bias[n] (+ residual[m, out_col + n]),  n < N,
// with W's rows in kernels::pack_rows()'s layout (K a multiple of the block size). No fusions: the graph
// normalises x and applies gate activations with their own dispatches for these weights (linear_can_fuse).
// Decoding streams every weight once, so the work is cut for memory: a team of TEAM threads serves COLS output
// columns, lane l taking the 32-element chunks l, l + TEAM, ... of the rows, so that a team's lanes read
// consecutive blocks at once; each chunk is decoded in registers and its scale taken out of the dot product
// (sum scale * q * x = scale * sum q * x, less offset * sum x for formats with a minimum). The lanes' sums meet
// in workgroup memory.
// Bindings (group 0): 0 x [M, K] read (as vec4), 1 W read (u32 words), 2 bias [N] read, 3 residual read,
//                     4 out [M, out_stride] read_write, 5 params uniform.
// Dispatch: ceil(N / (COLS * 256 / TEAM)) workgroups of 256, folded as (min(W, 65535), ceil(W / x), 1).

//!include linear_params.wgsl
//!include weights.wgsl

@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> W: array<u32>;
@group(0) @binding(2) var<storage, read> bias: array<f32>;
@group(0) @binding(3) var<storage, read> residual: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
@group(0) @binding(5) var<uniform> params: Params;

//!include linear_store.wgsl
//!include blocks.wgsl

fn block_word(i: u32) -> u32 {
  return W[i];
}

override ROWS: u32 = 1u;   // M, 1..4
override COLS: u32 = 1u;   // output columns per team, 1..4
override TEAM: u32 = 32u;  // threads per team, a power of two up to 256

const WORKGROUP_SIZE: u32 = 256u;
var<workgroup> partial_sums: array<array<vec4<f32>, 4>, WORKGROUP_SIZE>;  // [thread][column][row]

// Row m's dot product of chunk c of x with the chunk's quants q (scale and offset applied).
fn chunk_dot(m: u32, c: u32, q: array<vec4<f32>, 8>, s: ChunkScale) -> f32 {
  let first = (m * params.K + 32u * c) / 4u;
  var sums = vec2<f32>(0.0);
  var x_sum = vec4<f32>(0.0);
  for (var i = 0u; i < 8u; i++) {
    let xs = x[first + i];
    sums[i / 4u] += dot(xs, q[i]);
    if (blocks_have_offset()) {
      x_sum += xs;
    }
  }
  var total = dot(s.scale, sums);
  if (blocks_have_offset()) {
    total -= s.offset * dot(x_sum, vec4<f32>(1.0));
  }
  return total;
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let lane = lid % TEAM;
  let first = ((wid.x + wid.y * nwg.x) * (WORKGROUP_SIZE / TEAM) + lid / TEAM) * COLS;
  let N = params.N;
  let chunks = params.K / 32u;
  // Columns past N read row N - 1 again and store nothing.
  var rows: array<u32, 4>;
  for (var c = 0u; c < COLS; c++) {
    rows[c] = min(first + c, N - 1u) * block_row_words(params.K);
  }
  var acc: array<vec4<f32>, 4>;  // acc[column][row]
  for (var chunk = lane; chunk < chunks; chunk += TEAM) {
    for (var c = 0u; c < COLS; c++) {
      let s = chunk_scale(rows[c], chunk);
      var q: array<vec4<f32>, 8>;
      for (var i = 0u; i < 8u; i++) {
        q[i] = chunk_quad(rows[c], chunk, i);
      }
      for (var m = 0u; m < ROWS; m++) {
        acc[c][m] += chunk_dot(m, chunk, q, s);
      }
    }
  }
  partial_sums[lid] = acc;
  workgroupBarrier();
  for (var stride = TEAM / 2u; stride > 0u; stride /= 2u) {
    if (lane < stride) {
      for (var c = 0u; c < COLS; c++) {
        partial_sums[lid][c] += partial_sums[lid + stride][c];
      }
    }
    workgroupBarrier();
  }
  // Lane c * ROWS + m stores column c of row m.
  let c = lane / ROWS;
  let m = lane % ROWS;
  if (c < COLS && first + c < N) {
    store(m, first + c, partial_sums[lid - lane][c][m]);
  }
}
