// Linear for a few rows (kernels::kMatvecRows < M <= kernels::kLinearRowsMax, K % 8 == 0: a batched decode
// step of several sequences): the contract of linear.wgsl,
//   out[m, out_col + n] = sum_k x[m, k] * W[n, k] + bias[n] (+ residual[m, out_col + n]),  n < N,
// with W [N, K] decoded by WEIGHT_TYPE. Such a step should cost one read of the weights, as decoding one row
// does, but it also does M times the FMAs, so the kernel is built to spend neither twice:
// * each thread keeps the sums of all ROWS rows for its COLS columns (ROWS * COLS <= 32 registers), so every
//   16-byte weight piece is loaded and decoded once and used for every row;
// * the LANES threads of a slice take neighbouring columns at the same k, so a subgroup's reads of x are of one
//   address per slice (served once, not once per lane as when the lanes split k: linear_matvec_sg.wgsl's
//   layout, whose x reads per row made M = 4 cost 3.5 decode steps on an H200);
// * the 256 / LANES slices of a workgroup take every slices-th block of UNROLL pieces (4 in flight per
//   thread: UNROLL * COLS = 4) and add up through workgroup memory, 8 sums per thread at a time (8 KiB).
// No subgroups, no shader-f16: it runs on every adapter. The dispatcher (kernels::linear_rows_blocking) sets
// ROWS = M, COLS (4 up to 8 rows, else 2; 1 or 2 for narrow N) and LANES; grid: ceil(N / (LANES * COLS)) workgroups,
// folded.
// A row's sum is the same f32 sum of K terms as in the other linear kernels, in another order (COLS and LANES
// set which pieces each slice adds up): a row can differ in its last bits between steps of other sizes, as it
// already does between the matrix-vector (M <= 4) and tiled kernels; tests/test_generate_scheduler holds the
// greedy tokens to be the same whatever the step.
// Bindings (group 0): 0 x [M, K] read, 1 W [N, K] read (WEIGHT_TYPE), 2 bias [N], 3 residual, 4 out
// [M, out_stride] read_write, 5 params uniform.

//!include linear_params.wgsl
//!include weights.wgsl
//!include linear_store.wgsl

@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> W: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> bias: array<f32>;
@group(0) @binding(3) var<storage, read> residual: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
@group(0) @binding(5) var<uniform> params: Params;

override ROWS: u32 = 8u;    // M
override COLS: u32 = 4u;    // columns per thread: 1, 2 or 4, ROWS * COLS <= MAX_SUMS (the dispatcher: 2 or 4)
override LANES: u32 = 32u;  // columns of a slice (8, 16 or 32); 256 / LANES slices share each column's k

const WORKGROUP_SIZE: u32 = 256u;
const MAX_SUMS: u32 = 32u;
const IN_FLIGHT: u32 = 4u;  // 16-byte weight pieces each thread loads before using any
const ROUND: u32 = 8u;      // sums per thread added up through workgroup memory at a time
var<workgroup> partial: array<f32, ROUND * WORKGROUP_SIZE>;  // [sum][thread]

// A weight piece as f32: 4 weights (f32) or 8 (16-bit), the second half zero for f32.
fn decode(piece: vec4<u32>) -> array<vec4<f32>, 2> {
  if (WEIGHT_TYPE == 0u) {
    return array<vec4<f32>, 2>(bitcast<vec4<f32>>(piece), vec4<f32>(0.0));
  }
  return array<vec4<f32>, 2>(vec4<f32>(halves(piece.x), halves(piece.y)),
                             vec4<f32>(halves(piece.z), halves(piece.w)));
}

// sums[c * ROWS + m] += x[m, piece p] . w[c] for the COLS decoded pieces w of piece index p.
fn accumulate(sums: ptr<function, array<f32, MAX_SUMS>>, p: u32, w: array<array<vec4<f32>, 2>, 4>) {
  let K4 = params.K / 4u;
  let x_pieces = select(2u, 1u, WEIGHT_TYPE == 0u);  // 16-byte pieces of x per piece of W
  for (var m = 0u; m < ROWS; m++) {
    let x0 = x[m * K4 + x_pieces * p];
    var x1 = vec4<f32>(0.0);
    if (WEIGHT_TYPE != 0u) {
      x1 = x[m * K4 + x_pieces * p + 1u];
    }
    for (var c = 0u; c < COLS; c++) {
      (*sums)[c * ROWS + m] += dot(x0, w[c][0]) + dot(x1, w[c][1]);
    }
  }
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let N = params.N;
  let pieces = select(params.K / 8u, params.K / 4u, WEIGHT_TYPE == 0u);  // 16-byte pieces per weight row
  let slices = WORKGROUP_SIZE / LANES;
  let unroll = IN_FLIGHT / COLS;  // consecutive pieces of a block
  let lane = lid % LANES;
  let slice = lid / LANES;
  let first = (wid.x + wid.y * nwg.x) * LANES * COLS;  // the workgroup's first column

  // Column c of this thread is first + c * LANES + lane; past N it reads row N - 1 and stores nothing.
  var rows: array<u32, 4>;
  for (var c = 0u; c < COLS; c++) {
    rows[c] = min(first + c * LANES + lane, N - 1u) * pieces;
  }
  var sums: array<f32, MAX_SUMS>;
  for (var block = slice * unroll; block < pieces; block += slices * unroll) {
    var loaded: array<array<vec4<u32>, 4>, 4>;  // [u][c], u < unroll
    for (var u = 0u; u < unroll; u++) {
      if (block + u < pieces) {
        for (var c = 0u; c < COLS; c++) {
          loaded[u][c] = W[rows[c] + block + u];
        }
      }
    }
    for (var u = 0u; u < unroll; u++) {
      if (block + u < pieces) {
        var w: array<array<vec4<f32>, 2>, 4>;
        for (var c = 0u; c < COLS; c++) {
          w[c] = decode(loaded[u][c]);
        }
        accumulate(&sums, block + u, w);
      }
    }
  }

  // The slices' sums of each (column, row), ROUND of this thread's at a time: thread t < ROUND * LANES adds up
  // sum r + t / LANES of column lane t % LANES over the slices and stores it.
  let count = ROWS * COLS;
  for (var r = 0u; r < count; r += ROUND) {
    for (var i = 0u; i < ROUND; i++) {
      if (r + i < count) {
        partial[i * WORKGROUP_SIZE + lid] = sums[r + i];
      }
    }
    workgroupBarrier();
    let i = lid / LANES;
    if (i < ROUND && r + i < count) {
      var total = 0.0;
      for (var s = 0u; s < slices; s++) {
        total += partial[i * WORKGROUP_SIZE + s * LANES + lane];
      }
      let c = (r + i) / ROWS;
      let n = first + c * LANES + lane;
      if (n < N) {
        store((r + i) % ROWS, n, total);
      }
    }
    workgroupBarrier();
  }
}
