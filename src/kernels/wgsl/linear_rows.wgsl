// Linear for a few rows (kernels::kLinearRowsMin <= M <= kernels::kLinearRowsMax, K % 8 == 0: a batched decode
// step of several sequences): the contract of linear.wgsl,
//   out[m, out_col + n] = sum_k x[m, k] * W[n, k] + bias[n] (+ residual[m, out_col + n]),  n < N,
// with W [N, K] decoded by WEIGHT_TYPE. Such a step should cost one read of the weights, as decoding one row
// does, but it also does M times the FMAs, so the kernel is built to spend neither twice:
// * each thread keeps the sums of all ROWS rows for its COLS columns, so every 16-byte weight piece is loaded
//   and decoded once and used for every row; the sums are four mat4x4 values (a group of 4 rows each, a column
//   per mat column) written to with constant indices only: the first version of this kernel kept them in an
//   array indexed in loops, which the H200's compiler did not unroll, and ran Llama-3-8B's 16-row products at
//   6-10 TFLOP/s of the card's ~56 (its time grew with M as if each FMA went through memory);
// * each k of a piece is an outer product: 4 rows of x times COLS weights, COLS vec4 FMAs (4 k written out);
// * the LANES threads of a slice take neighbouring columns at the same k, so a warp's reads of x are of one or
//   a few addresses (served once, not once per lane as when the lanes split k: linear_matvec_sg.wgsl's layout,
//   whose column groups each re-read all M rows of x, made 4 rows cost 2 decode steps on an H200);
// * the 256 / LANES slices of a workgroup take every slices-th block of UNROLL pieces (UNROLL * COLS = 4 loads
//   in flight per thread) and add up through workgroup memory at the end, a group of 4 rows at a time.
// No subgroups, no shader-f16: it runs on every adapter. The dispatcher (kernels::linear_rows_blocking) sets
// ROWS = M, COLS (1, 2 or 4), LANES (8, 16 or 32) and UNROLL; grid: ceil(N / (LANES * COLS)) workgroups, folded.
// A row's sum is the same f32 sum of K terms as in the other linear kernels, in another order (COLS, LANES and
// UNROLL set which pieces each slice adds up): a row can differ in its last bits between steps of other sizes,
// as it already does between the matrix-vector and tiled kernels; tests/test_generate_scheduler holds the greedy
// tokens to be the same whatever the step.
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

override ROWS: u32 = 8u;    // M, 1..16
override COLS: u32 = 4u;    // columns per thread: 1, 2 or 4
override LANES: u32 = 32u;  // columns of a slice (8, 16 or 32); 256 / LANES slices share each column's k
override UNROLL: u32 = 1u;  // consecutive pieces a slice takes at a time: 1, 2 or 4

const WORKGROUP_SIZE: u32 = 256u;
// The sums: acc<g>[c][r] is row 4 g + r of column c.
var<private> acc0: mat4x4<f32>;
var<private> acc1: mat4x4<f32>;
var<private> acc2: mat4x4<f32>;
var<private> acc3: mat4x4<f32>;
// The slices' sums of a group of rows, [column][thread].
var<workgroup> partial: array<vec4<f32>, 4u * WORKGROUP_SIZE>;

fn groups() -> u32 {
  return (ROWS + 3u) / 4u;
}

// acc[c] += x4 * w[c] for the thread's columns: one k of 4 rows (x4) times its COLS weights (w).
fn outer(acc: mat4x4<f32>, x4: vec4<f32>, w: vec4<f32>) -> mat4x4<f32> {
  var a = acc;
  a[0] = fma(x4, vec4<f32>(w.x), a[0]);
  if (COLS > 1u) {
    a[1] = fma(x4, vec4<f32>(w.y), a[1]);
  }
  if (COLS > 2u) {
    a[2] = fma(x4, vec4<f32>(w.z), a[2]);
    a[3] = fma(x4, vec4<f32>(w.w), a[3]);
  }
  return a;
}

// 4 k: xt[j] holds the group's 4 rows at k j, wt[j] the columns' weights at k j.
fn four_k(acc: mat4x4<f32>, xt: mat4x4<f32>, wt: mat4x4<f32>) -> mat4x4<f32> {
  var a = outer(acc, xt[0], wt[0]);
  a = outer(a, xt[1], wt[1]);
  a = outer(a, xt[2], wt[2]);
  return outer(a, xt[3], wt[3]);
}

// Row group g's x at half piece `at` (4 k) of each row, transposed: [k][row]. Rows past M read row M - 1.
fn x_group(g: u32, at: u32, row_halves: u32) -> mat4x4<f32> {
  let last = ROWS - 1u;
  return transpose(mat4x4<f32>(x[min(4u * g, last) * row_halves + at], x[min(4u * g + 1u, last) * row_halves + at],
                               x[min(4u * g + 2u, last) * row_halves + at], x[min(4u * g + 3u, last) * row_halves + at]));
}

// Half h of the pieces of the thread's columns as weights, transposed: [k][column].
fn w_half(w0: vec4<u32>, w1: vec4<u32>, w2: vec4<u32>, w3: vec4<u32>, h: u32) -> mat4x4<f32> {
  if (WEIGHT_TYPE == 0u) {
    return transpose(mat4x4<f32>(bitcast<vec4<f32>>(w0), bitcast<vec4<f32>>(w1), bitcast<vec4<f32>>(w2),
                                 bitcast<vec4<f32>>(w3)));
  }
  if (h == 0u) {
    return transpose(mat4x4<f32>(vec4<f32>(halves(w0.x), halves(w0.y)), vec4<f32>(halves(w1.x), halves(w1.y)),
                                 vec4<f32>(halves(w2.x), halves(w2.y)), vec4<f32>(halves(w3.x), halves(w3.y))));
  }
  return transpose(mat4x4<f32>(vec4<f32>(halves(w0.z), halves(w0.w)), vec4<f32>(halves(w1.z), halves(w1.w)),
                               vec4<f32>(halves(w2.z), halves(w2.w)), vec4<f32>(halves(w3.z), halves(w3.w))));
}

// Adds half h of piece p (4 k; w0..w3 the columns' weight pieces) to every row group's sums.
fn half_piece(p: u32, h: u32, w0: vec4<u32>, w1: vec4<u32>, w2: vec4<u32>, w3: vec4<u32>) {
  let row_halves = params.K / 4u;  // half pieces (vec4) of a row of x
  let at = select(2u * p + h, p, WEIGHT_TYPE == 0u);
  let wt = w_half(w0, w1, w2, w3, h);
  let g = groups();
  acc0 = four_k(acc0, x_group(0u, at, row_halves), wt);
  if (g > 1u) {
    acc1 = four_k(acc1, x_group(1u, at, row_halves), wt);
  }
  if (g > 2u) {
    acc2 = four_k(acc2, x_group(2u, at, row_halves), wt);
  }
  if (g > 3u) {
    acc3 = four_k(acc3, x_group(3u, at, row_halves), wt);
  }
}

// Adds piece p: one half piece of x for f32 weights (4 k), two for 16-bit ones (8 k).
fn piece(p: u32, w: array<vec4<u32>, 4>) {
  half_piece(p, 0u, w[0], w[1], w[2], w[3]);
  if (WEIGHT_TYPE != 0u) {
    half_piece(p, 1u, w[0], w[1], w[2], w[3]);
  }
}

// The thread's weight pieces at piece p: row<c> is column c's first piece (zeros past COLS).
fn load(row0: u32, row1: u32, row2: u32, row3: u32, p: u32) -> array<vec4<u32>, 4> {
  var w: array<vec4<u32>, 4>;
  w[0] = W[row0 + p];
  if (COLS > 1u) {
    w[1] = W[row1 + p];
  }
  if (COLS > 2u) {
    w[2] = W[row2 + p];
    w[3] = W[row3 + p];
  }
  return w;
}

// Adds up the slices' sums of row group g and stores them: thread t takes (column, row) pairs t / LANES,
// t / LANES + slices, ... of column lane t % LANES.
fn reduce_group(g: u32, sums: mat4x4<f32>, lid: u32, first_column: u32) {
  let slices = WORKGROUP_SIZE / LANES;
  let lane = lid % LANES;
  workgroupBarrier();  // the last group's reads are done
  partial[lid] = sums[0];
  partial[WORKGROUP_SIZE + lid] = sums[1];
  partial[2u * WORKGROUP_SIZE + lid] = sums[2];
  partial[3u * WORKGROUP_SIZE + lid] = sums[3];
  workgroupBarrier();
  for (var i = lid / LANES; i < 4u * COLS; i += slices) {
    let c = i / 4u;
    let r = i % 4u;
    var total = 0.0;
    for (var s = 0u; s < slices; s++) {
      total += partial[c * WORKGROUP_SIZE + s * LANES + lane][r];
    }
    let m = 4u * g + r;
    let n = first_column + c * LANES + lane;
    if (m < ROWS && n < params.N) {
      store(m, n, total);
    }
  }
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let N = params.N;
  let pieces = select(params.K / 8u, params.K / 4u, WEIGHT_TYPE == 0u);  // 16-byte pieces per weight row
  let slices = WORKGROUP_SIZE / LANES;
  let lane = lid % LANES;
  let slice = lid / LANES;
  let first_column = (wid.x + wid.y * nwg.x) * LANES * COLS;

  // Column c of this thread is first_column + c * LANES + lane; past N it reads row N - 1 and stores nothing.
  let row0 = min(first_column + lane, N - 1u) * pieces;
  let row1 = min(first_column + LANES + lane, N - 1u) * pieces;
  let row2 = min(first_column + 2u * LANES + lane, N - 1u) * pieces;
  let row3 = min(first_column + 3u * LANES + lane, N - 1u) * pieces;
  for (var block = slice * UNROLL; block < pieces; block += slices * UNROLL) {
    // Every load of the block before any sum (UNROLL * COLS in flight).
    let a = load(row0, row1, row2, row3, block);
    var b: array<vec4<u32>, 4>;
    var c: array<vec4<u32>, 4>;
    var d: array<vec4<u32>, 4>;
    if (UNROLL > 1u && block + 1u < pieces) {
      b = load(row0, row1, row2, row3, block + 1u);
    }
    if (UNROLL > 2u && block + 2u < pieces) {
      c = load(row0, row1, row2, row3, block + 2u);
    }
    if (UNROLL > 2u && block + 3u < pieces) {
      d = load(row0, row1, row2, row3, block + 3u);
    }
    piece(block, a);
    if (UNROLL > 1u && block + 1u < pieces) {
      piece(block + 1u, b);
    }
    if (UNROLL > 2u && block + 2u < pieces) {
      piece(block + 2u, c);
    }
    if (UNROLL > 2u && block + 3u < pieces) {
      piece(block + 3u, d);
    }
  }

  let g = groups();
  reduce_group(0u, acc0, lid, first_column);
  if (g > 1u) {
    reduce_group(1u, acc1, lid, first_column);
  }
  if (g > 2u) {
    reduce_group(2u, acc2, lid, first_column);
  }
  if (g > 3u) {
    reduce_group(3u, acc3, lid, first_column);
  }
}
