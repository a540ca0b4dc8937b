// Linear for a few rows (kernels::kLinearRowsMin <= M <= kernels::kLinearRowsMax, K % 8 == 0: a batched decode
// step of several sequences): the contract of linear.wgsl,
//   out[m, out_col + n] = sum_k x[m, k] * W[n, k] + bias[n] (+ residual[m, out_col + n]),  n < N,
// with W [N, K] decoded by WEIGHT_TYPE: f32, f16, bf16 (weights.wgsl), or a block type in kernels::pack_rows()'s
// layout (include/blocks.wgsl; K a multiple of its block). Such a step should cost one read of the weights, as
// decoding one row does, but it also does M times the FMAs, so the kernel is built to spend neither twice:
// * its unit of work is a 16-byte piece of a weight row, 4 or 8 consecutive k of element weights; of a block
//   row, a 32-element chunk's 16 bytes of quants (Q8_0: half its 32), each quad of 4 k of which is dequantized
//   in registers (quad_quants' integer quants, the chunk's scale and offset decoded once a piece: ggml's values
//   bit for bit) and then feeds the same 4 * ROWS FMAs an element quad does, so the decode's cost is spread over
//   all rows (a matrix-vector kernel takes the scale out of its sums instead, which saves a multiply a weight
//   but serves only its few rows);
// * each thread keeps the sums of all ROWS rows for its COLS columns, so every weight piece is loaded
//   and decoded once and used for every row; the sums are four mat4x4 values (a group of 4 rows each, a column
//   per mat column) written to with constant indices only: the first version of this kernel kept them in an
//   array indexed in loops, which the H200's compiler did not unroll, and ran Llama-3-8B's 16-row products at
//   6-10 TFLOP/s of the card's ~56 (its time grew with M as if each FMA went through memory);
// * each k of a quad is an outer product: 4 rows of x times COLS weights, COLS vec4 FMAs (4 k written out);
// * the LANES threads of a slice take neighbouring columns at the same k, so a warp's reads of x are of one or
//   a few addresses (served once, not once per lane as when the lanes split k: linear_matvec_sg.wgsl's layout,
//   whose column groups each re-read all M rows of x, made 4 rows cost 2 decode steps on an H200);
// * a workgroup is TEAMS teams, each of LANES * COLS columns; the 256 / (LANES * TEAMS) slices of a team take
//   every slices-th block of UNROLL pieces (UNROLL * COLS = 4 piece loads in flight per thread; a block piece
//   also loads its chunk's header and high-bit words) and add up through workgroup memory at the end, a group
//   of 4 rows at a time. The teams of a workgroup read the same x at about the same time, so more teams
//   fetch each x row from L2 for more columns: at 16 rows a workgroup's x (16 K floats) is twice the bytes of
//   16 columns' f16 weights, and 7 times a 4-bit type's.
// * GATE_ACT 1 / 2 (params.gate_act): a gated MLP's gate|up projection, W = [gate rows; up rows] (N / 2 each),
//   writes act(gate) * up (SiLU / GELU-tanh, biases added first) to out[m, out_col + g] for g < N / 2, sparing a
//   batched step the activation's own dispatch. A thread's first COLS / 2 columns are gate rows g and its others
//   the up rows N / 2 + g of the same g, so a pair meets in one thread's sums (COLS 2 or 4).
// No subgroups, no shader-f16: it runs on every adapter. The dispatcher (kernels::linear_rows_blocking) sets
// ROWS = M, COLS (1, 2 or 4), LANES (8, 16 or 32), TEAMS (1, 2, 4 or 8), UNROLL
// and GATE_ACT; grid: ceil(N / (TEAMS * LANES * COLS)) workgroups, folded (a gated projection's N counts both
// halves).
// A row's sum is the same f32 sum of K terms as in the other linear kernels, in another order (COLS, LANES and
// UNROLL set which pieces each slice adds up): a row can differ in its last bits between steps of other sizes,
// as it already does between the matrix-vector and tiled kernels; tests/test_generate_scheduler holds the greedy
// tokens to be the same whatever the step.
// Bindings (group 0): 0 x [M, K] read, 1 W [N, K] read (WEIGHT_TYPE; block rows padded to 16 bytes), 2 bias [N],
// 3 residual, 4 out [M, out_stride] read_write, 5 params uniform.

//!include linear_params.wgsl
//!include weights.wgsl
//!include linear_store.wgsl
//!include blocks.wgsl
//!include activations.wgsl
//!include gated_store.wgsl

@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> W: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> bias: array<f32>;
@group(0) @binding(3) var<storage, read> residual: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
@group(0) @binding(5) var<uniform> params: Params;

override ROWS: u32 = 8u;    // M, 1..16
override COLS: u32 = 4u;    // columns per thread: 1, 2 or 4
override LANES: u32 = 32u;  // columns of a slice (8, 16 or 32); a team's SLICES slices share each column's k
override UNROLL: u32 = 1u;  // consecutive pieces a slice takes at a time: 1, 2 or 4
override TEAMS: u32 = 1u;   // teams of a workgroup, each with its own LANES * COLS columns
override GATE_ACT: u32 = 0u;  // params.gate_act: 0, or 1 (SiLU) / 2 (GELU-tanh) with COLS 2 or 4

const WORKGROUP_SIZE: u32 = 256u;
override TEAM_SIZE: u32 = WORKGROUP_SIZE / TEAMS;
override SLICES: u32 = TEAM_SIZE / LANES;  // slices of a team, each its own pieces of k

// blocks.wgsl's access to the weights: word i, and words i .. i + 3 (i a multiple of 4) in one load.
fn block_word(i: u32) -> u32 {
  return W[i / 4u][i % 4u];
}

fn block_words4(i: u32) -> vec4<u32> {
  return W[i / 4u];
}

// Quads (4 k) of a piece: f32 1, f16 / bf16 2, Q8_0 4 (half a chunk's 32 bytes of quants), the 4- to 6-bit
// block types 8 (a chunk's 16 bytes).
fn piece_quads() -> u32 {
  switch (WEIGHT_TYPE) {
    case 0u: { return 1u; }
    case 1u, 2u: { return 2u; }
    case 3u: { return 4u; }
    default: { return 8u; }
  }
}

// The 32-element chunk of block piece p.
fn piece_chunk(p: u32) -> u32 {
  return p * piece_quads() / 8u;
}

// A thread's loads of one piece of its columns: w[c] column c's 16 bytes, side[c] (block types only) the rest.
struct Loaded {
  w: array<vec4<u32>, 4>,
  side: array<ChunkSide, 4>,
}

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

// Row group g's x at quad `at` (4 k) of each row, transposed: [k][row]. Rows past M read row M - 1.
fn x_group(g: u32, at: u32, row_quads: u32) -> mat4x4<f32> {
  let last = ROWS - 1u;
  return transpose(mat4x4<f32>(x[min(4u * g, last) * row_quads + at], x[min(4u * g + 1u, last) * row_quads + at],
                               x[min(4u * g + 2u, last) * row_quads + at], x[min(4u * g + 3u, last) * row_quads + at]));
}

// Adds 4 k to every row group's sums: x's quad `at` of each row times wt, the columns' weights there ([k][column]).
fn add_quad(at: u32, wt: mat4x4<f32>) {
  let row_quads = params.K / 4u;  // quads (vec4) of a row of x
  let g = groups();
  acc0 = four_k(acc0, x_group(0u, at, row_quads), wt);
  if (g > 1u) {
    acc1 = four_k(acc1, x_group(1u, at, row_quads), wt);
  }
  if (g > 2u) {
    acc2 = four_k(acc2, x_group(2u, at, row_quads), wt);
  }
  if (g > 3u) {
    acc3 = four_k(acc3, x_group(3u, at, row_quads), wt);
  }
}

// Quad h of the element pieces of the thread's columns as weights, transposed: [k][column].
fn element_quad(w: array<vec4<u32>, 4>, h: u32) -> mat4x4<f32> {
  if (WEIGHT_TYPE == 0u) {
    return transpose(mat4x4<f32>(bitcast<vec4<f32>>(w[0]), bitcast<vec4<f32>>(w[1]), bitcast<vec4<f32>>(w[2]),
                                 bitcast<vec4<f32>>(w[3])));
  }
  if (h == 0u) {
    return transpose(mat4x4<f32>(vec4<f32>(halves(w[0].x), halves(w[0].y)), vec4<f32>(halves(w[1].x), halves(w[1].y)),
                                 vec4<f32>(halves(w[2].x), halves(w[2].y)), vec4<f32>(halves(w[3].x), halves(w[3].y))));
  }
  return transpose(mat4x4<f32>(vec4<f32>(halves(w[0].z), halves(w[0].w)), vec4<f32>(halves(w[1].z), halves(w[1].w)),
                               vec4<f32>(halves(w[2].z), halves(w[2].w)), vec4<f32>(halves(w[3].z), halves(w[3].w))));
}

// Quad `quad` of a column's chunk, as ggml dequantizes it: from the column's piece (the quad's quant word),
// its high-bit words (side) and its chunk's scale.
fn column_quad(w: vec4<u32>, side: ChunkSide, s: ChunkScale, quad: u32) -> vec4<f32> {
  return scaled_quad(s, quad_quants(w[quad_quant_word(quad) % 4u], side.high[quad_high_word(quad)], quad), quad);
}

// Adds block piece p: its quads dequantized, each column's chunk scale decoded once.
fn block_piece(p: u32, l: Loaded) {
  let chunk = piece_chunk(p);
  let first = p * piece_quads() % 8u;  // the piece's first quad in its chunk
  let s0 = chunk_scale_of(l.side[0].header, chunk);
  var s1 = s0;
  var s2 = s0;
  var s3 = s0;
  if (COLS > 1u) {
    s1 = chunk_scale_of(l.side[1].header, chunk);
  }
  if (COLS > 2u) {
    s2 = chunk_scale_of(l.side[2].header, chunk);
    s3 = chunk_scale_of(l.side[3].header, chunk);
  }
  for (var h = 0u; h < piece_quads(); h++) {
    let quad = first + h;
    var v: mat4x4<f32>;  // [column][k]
    v[0] = column_quad(l.w[0], l.side[0], s0, quad);
    if (COLS > 1u) {
      v[1] = column_quad(l.w[1], l.side[1], s1, quad);
    }
    if (COLS > 2u) {
      v[2] = column_quad(l.w[2], l.side[2], s2, quad);
      v[3] = column_quad(l.w[3], l.side[3], s3, quad);
    }
    add_quad(piece_quads() * p + h, transpose(v));
  }
}

// Adds piece p (its quads are x's quads piece_quads() p, ...).
fn piece(p: u32, l: Loaded) {
  if (WEIGHT_TYPE >= 3u) {
    block_piece(p, l);
    return;
  }
  add_quad(piece_quads() * p, element_quad(l.w, 0u));
  if (WEIGHT_TYPE != 0u) {
    add_quad(2u * p + 1u, element_quad(l.w, 1u));
  }
}

// Block types: the chunk header and high-bit words of the column whose quants start at piece `row`, for piece p.
fn block_side(row: u32, p: u32) -> ChunkSide {
  return chunk_side(block_row_at(4u * row, params.K), piece_chunk(p));
}

// The thread's loads for piece p: row<c> is where column c's row (its quants) starts, in pieces; zeros past COLS.
fn load(row0: u32, row1: u32, row2: u32, row3: u32, p: u32) -> Loaded {
  var l: Loaded;
  l.w[0] = W[row0 + p];
  if (COLS > 1u) {
    l.w[1] = W[row1 + p];
  }
  if (COLS > 2u) {
    l.w[2] = W[row2 + p];
    l.w[3] = W[row3 + p];
  }
  if (WEIGHT_TYPE >= 3u) {
    l.side[0] = block_side(row0, p);
    if (COLS > 1u) {
      l.side[1] = block_side(row1, p);
    }
    if (COLS > 2u) {
      l.side[2] = block_side(row2, p);
      l.side[3] = block_side(row3, p);
    }
  }
  return l;
}

// Output columns of the workgroup's thread slots: COLS, or COLS / 2 gate|up pairs.
fn outputs_per_thread() -> u32 {
  return select(COLS, COLS / 2u, GATE_ACT != 0u);
}

// The output columns: N, or the N / 2 gate|up pairs.
fn output_columns() -> u32 {
  return select(params.N, params.N / 2u, GATE_ACT != 0u);
}

// The weight row of a thread's column slot c (its output column n = first_output + (c % outputs) * LANES + lane):
// n itself, or for a gated projection n's gate row (slots below COLS / 2) or up row (the others). Past the
// outputs it reads the last one's rows again and stores nothing.
fn slot_row(c: u32, first_output: u32, lane: u32) -> u32 {
  let outputs = outputs_per_thread();
  let n = min(first_output + (c % outputs) * LANES + lane, output_columns() - 1u);
  return select(n, n + select(0u, params.N / 2u, c >= outputs), GATE_ACT != 0u);
}

// Column slot c's total of row 4 g + r (the partial sums of the slices of the team whose threads start at
// `team_first`).
fn slot_total(c: u32, r: u32, team_first: u32, lane: u32) -> f32 {
  var total = 0.0;
  for (var s = 0u; s < SLICES; s++) {
    total += partial[c * WORKGROUP_SIZE + team_first + s * LANES + lane][r];
  }
  return total;
}

// Adds up the team's slices' sums of row group g and stores them: the team's thread t takes (output, row) pairs
// t / LANES, t / LANES + SLICES, ... of column lane t % LANES (a gated output: its gate and up slots).
fn reduce_group(g: u32, sums: mat4x4<f32>, lid: u32, first_output: u32) {
  let lane = lid % LANES;
  let team_first = lid / TEAM_SIZE * TEAM_SIZE;
  let outputs = outputs_per_thread();
  workgroupBarrier();  // the last group's reads are done
  partial[lid] = sums[0];
  partial[WORKGROUP_SIZE + lid] = sums[1];
  partial[2u * WORKGROUP_SIZE + lid] = sums[2];
  partial[3u * WORKGROUP_SIZE + lid] = sums[3];
  workgroupBarrier();
  for (var i = lid % TEAM_SIZE / LANES; i < 4u * outputs; i += SLICES) {
    let c = i / 4u;
    let r = i % 4u;
    let m = 4u * g + r;
    let n = first_output + c * LANES + lane;
    if (m < ROWS && n < output_columns()) {
      if (GATE_ACT != 0u) {
        store_gated(m, n, slot_total(c, r, team_first, lane), slot_total(c + outputs, r, team_first, lane));
      } else {
        store(m, n, slot_total(c, r, team_first, lane));
      }
    }
  }
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  load_block_tables(lid);
  let pieces = params.K / (4u * piece_quads());  // 16-byte pieces per weight row (block types: of its quants)
  // Pieces from a weight row's start to the next's: a block row's quants are followed by its high bits and
  // headers (blocks.wgsl).
  let stride = select(pieces, block_row_words(params.K) / 4u, WEIGHT_TYPE >= 3u);
  let lane = lid % LANES;
  let slice = lid % TEAM_SIZE / LANES;
  let team = (wid.x + wid.y * nwg.x) * TEAMS + lid / TEAM_SIZE;
  let first_output = team * LANES * outputs_per_thread();

  // Where the weight rows of the thread's column slots start (slot_row).
  let row0 = slot_row(0u, first_output, lane) * stride;
  let row1 = slot_row(1u, first_output, lane) * stride;
  let row2 = slot_row(2u, first_output, lane) * stride;
  let row3 = slot_row(3u, first_output, lane) * stride;
  for (var block = slice * UNROLL; block < pieces; block += SLICES * UNROLL) {
    // Every load of the block before any sum (UNROLL * COLS in flight).
    let a = load(row0, row1, row2, row3, block);
    var b: Loaded;
    var c: Loaded;
    var d: Loaded;
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
  reduce_group(0u, acc0, lid, first_output);
  if (g > 1u) {
    reduce_group(1u, acc1, lid, first_output);
  }
  if (g > 2u) {
    reduce_group(2u, acc2, lid, first_output);
  }
  if (g > 3u) {
    reduce_group(3u, acc3, lid, first_output);
  }
}
