// Linear for decoding (M <= 4 rows) on adapters with the `subgroups` feature: the same contract as
// linear.wgsl,
//   out[m, out_col + n] = sum_k x'[m, k] * W[n, k] + bias[n] (+ residual[m, out_col + n]),
// for rows of W that are a whole number of 16-byte pieces (K % 4 == 0 for f32 weights, K % 8 == 0 for
// f16 / bf16). Decoding streams every weight once, so the kernel is built to keep memory busy:
// * a column group of COLS output columns is served by SPLIT subgroups, each taking every SPLIT-th run of
//   `lanes` 16-byte pieces of the rows (vec4<u32> loads, coalesced across the lanes);
// * each lane issues its UNROLL * COLS loads of a step before using any (the dispatcher's blocking,
//   linear_matvec_blocking, chose from H200 sweeps; issuing the next step's loads before summing the
//   current one measured slower there: 150 vs 177 tok/s on Llama-8B);
// * subgroupAdd sums the lanes; with SPLIT > 1 the subgroups of a group add up through workgroup memory.
// Each piece of x' read is reused for COLS rows of W. The fusions save a dispatch and a round trip each:
// * NORM_X 1: x' = x / sqrt(mean(x^2) + eps) * norm_weight (an RMSNorm before the projection); the lanes
//   of a group together read every piece of x once, so they sum its squares on the way and 1 / rms
//   scales the finished dot products: no extra pass;
// * NORM_X 2, the same RMSNorm with x * norm_weight already written by the product before (NORM_OUT): x is
//   bound to that, and binding 5 to the raw x, whose squares the workgroup's threads sum once between them
//   (four 16-byte pieces each at K = 4096) instead of every group reading norm_weight beside x;
// * NORM_OUT: a product that writes the residual stream also writes out * norm_weight (binding 5 the next
//   RMSNorm's weight) to binding 6, the x of the NORM_X 2 product that follows;
// * GATE_ACT 1 / 2: a gated MLP's gate|up projection, W = [gate rows; up rows] (N / 2 each) and column
//   group g = the pair (g, N / 2 + g), writes act(gate) * up to out[m, out_col + g] for g < N / 2, act
//   SiLU (1) or GELU-tanh (2), so the down projection reads the activation directly (COLS = 2).
// Row count, fusions and the blocking (COLS, SPLIT, UNROLL) are override constants (the dispatcher sets ROWS,
// GATE_ACT and NORM_X from the uniform's M, gate_act and norm_x), so the compiler unrolls the loops and drops
// unused paths.
// ROPE turns the kernel into a decode step's q|k|v projection that also does qkv_rope_store.wgsl's work
// (without its q/k norm): N = (Q_HEADS + 2 KV_HEADS) * HEAD_DIM, COLS = 2, and column group g holds a
// rotary pair of one head, (j, j + r/2) for j < r/2 = ROTARY_DIM / 2 in q and k heads, else the neighbours
// (2j, 2j + 1); the pair is rotated in rotate-half style at angle (position + m) * rope_table[j], cos and sin
// scaled by rope_table[ROTARY_DIM / 2] as in qkv_rope_store.wgsl, and stored to q_out [M, Q_HEADS * HEAD_DIM]
// (bound as out) or to the k and v cache pools [blocks * KV_BLOCK_TOKENS, KV_HEADS * HEAD_DIM] (KV_TYPE
// elements, kv_cache.wgsl) at the row of position + m in the sequence's block table kv_table (kv_blocks.wgsl).
// It saves the store kernel's dispatch per layer. An f16 cache word holds two neighbouring dims, which one lane must store together, so there COLS = 4:
// group g holds the pairs (2j, 2j + r/2) and (2j + 1, 2j + 1 + r/2) for 2j < r/2, else the dims 4j .. 4j + 3
// (HEAD_DIM and ROTARY_DIM multiples of 4). kernels::linear_qkv_rope sets COLS. A q8 cache is never stored here: a
// row's scale needs the absmax of its whole head, spread over workgroups (kernels::qkv_rope_fusable).
// Bindings (group 0): 0 x [M, K] read, 1 W [N, K] read (WEIGHT_TYPE), 2 bias [N] read,
//                     3 residual read (ROPE: rope_table [ROTARY_DIM / 2 + 1]), 4 out [M, out_stride] read_write,
//                     5 norm_weight read: [K] (NORM_X 1), the raw x [M, K] (NORM_X 2), [out_stride]
//                     (NORM_OUT), any buffer otherwise; 6 k_cache read_write (ROPE; NORM_OUT: the prepared
//                     output [M, out_stride], f32 bits), 7 v_cache read_write (ROPE), any buffer when unused;
//                     8 kv_table u32 read (ROPE: the block ids of the sequence; any buffer otherwise),
//                     9 params uniform.
// Work is cut in units of one workgroup's 256 / (lanes * SPLIT) column groups. Dispatch: one workgroup per
// unit, U = ceil(N / (COLS * 256 / (max_subgroup_size * SPLIT))), or W < U with LOOPS (then, of a launched
// grid of G workgroups, workgroup w takes units w, w + G, w + 2G, ...: a grid that stays resident, each
// workgroup's tail one unit; see linear_matvec_blocking), folded as (min(W, 65535), ceil(W / x), 1);
// SPLIT <= 256 / max_subgroup_size.
// Sizing units by the largest subgroup size the adapter reports covers every column whatever size the
// driver picks (extra groups find their columns >= N and write nothing).
enable subgroups;

//!include linear_params.wgsl
//!include weights.wgsl
//!include linear_store.wgsl
//!include activations.wgsl
//!include gated_store.wgsl
//!include kv_cache.wgsl
//!include kv_blocks.wgsl

@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> W: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> bias: array<f32>;
@group(0) @binding(3) var<storage, read> residual: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
@group(0) @binding(5) var<storage, read> norm_weight: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read_write> k_cache: array<u32>;
@group(0) @binding(7) var<storage, read_write> v_cache: array<u32>;
@group(0) @binding(8) var<storage, read> kv_table: array<u32>;
@group(0) @binding(9) var<uniform> params: Params;

override ROWS: u32 = 1u;         // M, 1..4
override COLS: u32 = 1u;         // output columns per column group, 1..4
override SPLIT: u32 = 1u;        // subgroups per column group, a power of two
override UNROLL: u32 = 1u;       // 16-byte weight pieces in flight per lane and column, 1..8
override GATE_ACT: u32 = 0u;     // params.gate_act
override NORM_X: u32 = 0u;       // params.norm_x: 0, 1 (weight applied here) or 2 (x arrives weighted)
override NORM_OUT: bool = false; // params.norm_out != 0
override LOOPS: bool = false;    // the grid is smaller than the units: workgroups loop (see main)
override ROPE: bool = false;     // the q|k|v epilogue (see above), with the head shape below
override Q_HEADS: u32 = 1u;
override KV_HEADS: u32 = 1u;
// At least the largest COLS: the rotary epilogue's HEAD_DIM / COLS is evaluated when the pipeline is created,
// also where ROPE is off.
override HEAD_DIM: u32 = 4u;
override ROTARY_DIM: u32 = 0u;

const WORKGROUP_SIZE: u32 = 256u;
const MAX_SUBGROUPS: u32 = 64u;  // 256 lanes in subgroups of at least 4
var<workgroup> partial_sums: array<vec4<f32>, MAX_SUBGROUPS * 4u>;  // [subgroup][column]
var<workgroup> partial_squares: array<vec4<f32>, MAX_SUBGROUPS>;

// acc[c][m] += x'[m, piece p] . W[row c, piece p] for the COLS weight pieces w[c] of piece index p, with
// x' = x * norm_weight before the 1 / rms factor when NORM_X is 1; squares[m] += the squares of those x.
fn accumulate(acc: ptr<function, array<vec4<f32>, 4>>, squares: ptr<function, vec4<f32>>, p: u32,
              w: array<vec4<u32>, 4>) {
  let K4 = params.K / 4u;
  let x_pieces = select(2u, 1u, WEIGHT_TYPE == 0u);  // 16-byte pieces of x per piece of W
  for (var m = 0u; m < ROWS; m++) {
    var xs: array<vec4<f32>, 2>;
    for (var h = 0u; h < x_pieces; h++) {
      let i = x_pieces * p + h;
      xs[h] = x[m * K4 + i];
      if (NORM_X == 1u) {
        (*squares)[m] += dot(xs[h], xs[h]);
        xs[h] *= norm_weight[i];
      }
    }
    for (var c = 0u; c < COLS; c++) {
      if (WEIGHT_TYPE == 0u) {
        (*acc)[c][m] += dot(xs[0], bitcast<vec4<f32>>(w[c]));
      } else {
        (*acc)[c][m] += dot(xs[0], vec4<f32>(halves(w[c].x), halves(w[c].y))) +
                        dot(xs[1], vec4<f32>(halves(w[c].z), halves(w[c].w)));
      }
    }
  }
}

// NORM_X 2: this thread's share of every row's sum of squares of the raw x (bound as norm_weight), the
// workgroup's threads together reading each piece once, four loads in flight.
fn raw_squares(lid: u32) -> vec4<f32> {
  let K4 = params.K / 4u;
  var squares = vec4<f32>(0.0);
  for (var m = 0u; m < ROWS; m++) {
    for (var i = lid; i < K4; i += 4u * WORKGROUP_SIZE) {
      var v: array<vec4<f32>, 4>;
      for (var u = 0u; u < 4u; u++) {
        v[u] = norm_weight[m * K4 + min(i + u * WORKGROUP_SIZE, K4 - 1u)];
      }
      for (var u = 0u; u < 4u; u++) {
        squares[m] += select(0.0, dot(v[u], v[u]), i + u * WORKGROUP_SIZE < K4);
      }
    }
  }
  return squares;
}

// The plain epilogue's operands for column n of row m, loaded before the loop so that the stores do not wait
// on them: linear_store.wgsl's addend (bias + residual), and the next RMSNorm's weight for NORM_OUT. (H200, llama3-8b / qwen2.5-0.5b tg128:
// 198.4 -> 199.2 / 1,010.7 -> 1,012.6 without prepared norms, run 61; 202.5 -> 203.0 / 1,022.2 -> 1,027.3 with
// them, run 65.)
struct Epilogue {
  addend: f32,
  next_weight: f32,
}

fn load_epilogue(m: u32, n: u32) -> Epilogue {
  var e = Epilogue(epilogue_addend(m, n), 0.0);
  if (NORM_OUT) {
    let column = params.out_col + n;
    e.next_weight = norm_weight[column / 4u][column % 4u];
  }
  return e;
}

// out[m, out_col + n] = sum + bias[n] (+ residual), and with NORM_OUT beside it the next RMSNorm's x * weight,
// for the NORM_X 2 product after.
fn store_plain(m: u32, n: u32, sum: f32, e: Epilogue) {
  let o = output_index(m, n);
  let value = sum + e.addend;
  out[o] = value;
  if (NORM_OUT) {
    k_cache[o] = bitcast<u32>(value * e.next_weight);
  }
}

// ROPE: the COLS columns of column group g, dims of one head (see the header): COLS / 2 rotary pairs
// (dims[c], dims[c + COLS / 2]) whose inverse frequencies start at index j, or COLS neighbours that do not rotate.
struct RopeGroup {
  head: u32,
  j: u32,
  rotated: bool,
  dims: array<u32, 4>,
}

fn rope_group(g: u32) -> RopeGroup {
  let pairs = COLS / 2u;
  let head = g / (HEAD_DIM / COLS);
  let q = g % (HEAD_DIM / COLS);
  let half_rotary = select(0u, ROTARY_DIM / 2u, head < Q_HEADS + KV_HEADS);  // v heads do not rotate
  var group = RopeGroup(head, q * pairs, q * pairs < half_rotary, array<u32, 4>());
  for (var c = 0u; c < COLS; c++) {
    group.dims[c] = select(q * COLS + c, q * pairs + c % pairs + (c / pairs) * half_rotary, group.rotated);
  }
  return group;
}

// ROPE: row m's values of group g's columns (bias not yet added), rotated where they rotate, then stored to
// q_out or to the cache pool's row of position + m (an f16 word per two neighbouring dims: dims[0, 1] and
// dims[2, 3]).
fn store_rope_group(m: u32, g: u32, sums: vec4<f32>) {
  let group = rope_group(g);
  let pairs = COLS / 2u;
  var x = sums;
  for (var c = 0u; c < COLS; c++) {
    if (params.has_bias != 0u) {
      x[c] += bias[group.head * HEAD_DIM + group.dims[c]];
    }
  }
  if (group.rotated) {
    let rotated = x;
    let scale = residual[ROTARY_DIM / 2u];  // residual is bound to rope_table: the attention factor follows the frequencies
    for (var c = 0u; c < pairs; c++) {
      let angle = f32(params.position + m) * residual[group.j + c];
      let cs = cos(angle) * scale;
      let sn = sin(angle) * scale;
      x[c] = rotated[c] * cs - rotated[c + pairs] * sn;
      x[c + pairs] = rotated[c + pairs] * cs + rotated[c] * sn;
    }
  }
  if (group.head < Q_HEADS) {
    for (var c = 0u; c < COLS; c++) {
      out[(m * Q_HEADS + group.head) * HEAD_DIM + group.dims[c]] = x[c];
    }
    return;
  }
  let is_k = group.head < Q_HEADS + KV_HEADS;
  let kv = select(group.head - Q_HEADS - KV_HEADS, group.head - Q_HEADS, is_k);
  let row = (kv_row(0u, params.position + m) * KV_HEADS + kv) * HEAD_DIM;
  for (var c = 0u; c < COLS; c += KV_PER_WORD) {
    let word = kv_word(row + group.dims[c]);
    let packed = kv_pack(x[c], x[min(c + 1u, 3u)]);
    if (is_k) {
      k_cache[word] = packed;
    } else {
      v_cache[word] = packed;
    }
  }
}

// NORM_X 2: every row's 1 / rms from the raw x, the workgroup's threads sharing the reads (once per
// workgroup, however many column groups it then takes).
fn raw_rms_scale(lid: u32, subgroup: u32, lane: u32, lanes: u32) -> vec4<f32> {
  let squares = subgroupAdd(raw_squares(lid));
  if (lane == 0u) {
    partial_squares[subgroup] = squares;
  }
  workgroupBarrier();
  var total = vec4<f32>(0.0);
  for (var s = 0u; s < WORKGROUP_SIZE / lanes; s++) {
    total += partial_squares[s];
  }
  return rms_scale(total);
}

fn rms_scale(squares: vec4<f32>) -> vec4<f32> {
  return inverseSqrt(squares / f32(params.K) + bitcast<f32>(params.eps_bits));
}

// One column group's products: the SPLIT subgroups of this workgroup with slice 0..SPLIT-1 stream its weight
// rows, add up, and the first one's lanes store row `lane` (NORM_X 2: scaled by raw_scale).
fn column_group(group: u32, slice: u32, subgroup: u32, lane: u32, lanes: u32, raw_scale: vec4<f32>) {
  let first = group * COLS;
  let N = params.N;
  let K = params.K;
  let pieces = select(K / 8u, K / 4u, WEIGHT_TYPE == 0u);  // 16-byte pieces per weight row
  let stride = lanes * SPLIT;                                // between one lane's consecutive pieces

  // Rows past N read row N - 1 again (every lane keeps reaching the subgroupAdds) and write nothing.
  var rows: array<u32, 4>;
  if (ROPE) {
    let rope = rope_group(min(group, N / COLS - 1u));
    for (var c = 0u; c < COLS; c++) {
      rows[c] = (rope.head * HEAD_DIM + rope.dims[c]) * pieces;
    }
  } else if (GATE_ACT != 0u) {
    let g = min(group, N / 2u - 1u);
    rows[0] = g * pieces;
    rows[1] = (N / 2u + g) * pieces;
  } else {
    for (var c = 0u; c < COLS; c++) {
      rows[c] = min(first + c, N - 1u) * pieces;
    }
  }
  var epilogue: array<Epilogue, 4>;  // [c], for the row this lane stores (the plain epilogue)
  if (!ROPE && GATE_ACT == 0u) {
    for (var c = 0u; c < COLS; c++) {
      epilogue[c] = load_epilogue(min(lane, ROWS - 1u), min(first + c, N - 1u));
    }
  }
  var acc: array<vec4<f32>, 4>;  // acc[c][m]: the partial dot product of x' row m with weight row rows[c]
  var squares = vec4<f32>(0.0);  // squares[m]: the partial sum of x[m, :]^2 (NORM_X 1)
  for (var base = slice * lanes + lane; base < pieces; base += UNROLL * stride) {
    var w: array<array<vec4<u32>, 4>, 8>;  // [u][c], u < UNROLL
    for (var u = 0u; u < UNROLL; u++) {
      if (base + u * stride < pieces) {
        for (var c = 0u; c < COLS; c++) {
          w[u][c] = W[rows[c] + base + u * stride];
        }
      }
    }
    for (var u = 0u; u < UNROLL; u++) {
      if (base + u * stride < pieces) {
        accumulate(&acc, &squares, base + u * stride, w[u]);
      }
    }
  }
  for (var c = 0u; c < COLS; c++) {
    acc[c] = subgroupAdd(acc[c]);
  }
  if (NORM_X == 1u) {
    squares = subgroupAdd(squares);
  }
  if (SPLIT > 1u) {
    if (lane == 0u) {
      for (var c = 0u; c < COLS; c++) {
        partial_sums[subgroup * 4u + c] = acc[c];
      }
      if (NORM_X == 1u) {  // (NORM_X 2's partial_squares hold raw_rms_scale's shares)
        partial_squares[subgroup] = squares;
      }
    }
    workgroupBarrier();
    // The group's first subgroup adds up the shares of all SPLIT (the others write nothing).
    if (slice == 0u) {
      for (var s = 1u; s < SPLIT; s++) {
        for (var c = 0u; c < COLS; c++) {
          acc[c] += partial_sums[(subgroup + s) * 4u + c];
        }
        if (NORM_X == 1u) {
          squares += partial_squares[subgroup + s];
        }
      }
    }
    if (LOOPS) {
      // The shares are read before the workgroup's next column groups write theirs. This barrier also keeps
      // the subgroups reading their unit's rows together: with the shares in two halves used in turn instead
      // and this barrier gone, llama3-8b decoding fell from 214 to 178 tok/s (H200, run 76).
      workgroupBarrier();
    }
  }
  if (NORM_X != 0u) {
    // RMSNorm: the per-row factor 1 / rms comes out of the sum.
    let scale = select(rms_scale(squares), raw_scale, NORM_X == 2u);
    for (var c = 0u; c < COLS; c++) {
      acc[c] *= scale;
    }
  }
  if (slice != 0u || lane >= ROWS) {
    return;
  }
  // Lane m stores row m. Written min(lane, ROWS - 1) (the same value here), the row is the constant 0 when
  // decoding one row, so acc is indexed by constants only: indexed by the lane, an H200's compiler kept acc
  // in local memory, stored on every loop trip, in some programs.
  let m = min(lane, ROWS - 1u);
  if (ROPE) {
    if (group < N / COLS) {
      store_rope_group(m, group, vec4<f32>(acc[0][m], acc[1][m], acc[2][m], acc[3][m]));
    }
  } else if (GATE_ACT != 0u) {
    if (group < N / 2u) {
      store_gated(m, group, acc[0][m], acc[1][m]);
    }
  } else {
    for (var c = 0u; c < COLS; c++) {
      if (first + c < N) {
        store_plain(m, first + c, acc[c][m], epilogue[c]);
      }
    }
  }
}

// Workgroup w takes unit w, or with LOOPS the units w, w + G, w + 2G, ... of a grid of G workgroups (fewer
// than the units) that stay resident and slide over the weights. Without LOOPS there is no loop and no
// barrier between units: on Qwen2.5-0.5B, whose grids are one workgroup per unit, those alone cost 2 % of
// decode speed (H200, run 71: 1,025.1 -> 1,002.9 tok/s; run 72 without them: 1,016.4 -> 1,018.8).
@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32, @builtin(subgroup_invocation_id) lane: u32,
        @builtin(subgroup_size) lanes: u32) {
  let subgroup = lid / lanes;
  let groups = WORKGROUP_SIZE / lanes / SPLIT;  // column groups per workgroup
  let column_groups = select(select((params.N + COLS - 1u) / COLS, params.N / 2u, GATE_ACT != 0u), params.N / COLS, ROPE);
  let units = (column_groups + groups - 1u) / groups;
  var raw_scale = vec4<f32>(1.0);
  if (NORM_X == 2u) {
    raw_scale = raw_rms_scale(lid, subgroup, lane, lanes);
  }
  let workgroup = wid.x + wid.y * nwg.x;
  if (!LOOPS) {
    column_group(workgroup * groups + subgroup / SPLIT, subgroup % SPLIT, subgroup, lane, lanes, raw_scale);
    return;
  }
  for (var unit = workgroup; unit < units; unit += nwg.x * nwg.y) {
    column_group(unit * groups + subgroup / SPLIT, subgroup % SPLIT, subgroup, lane, lanes, raw_scale);
  }
}
