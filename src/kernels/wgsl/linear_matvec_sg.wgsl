// Linear for decoding (M <= 4 rows), one subgroup per output column: the same contract as linear.wgsl,
//   out[m, out_col + n] = sum_k x'[m, k] * W[n, k] + bias[n] (+ residual[m, out_col + n]),
// for adapters with the `subgroups` feature and rows of W that are a whole number of 16-byte pieces
// (K % 4 == 0 for f32 weights, K % 8 == 0 for f16 / bf16). The lanes of a subgroup read neighbouring
// 16-byte pieces of one weight row (vec4<u32> loads, fully coalesced) and add their partial sums with
// subgroupAdd: no workgroup memory and no barriers, so weights stream at close to copy bandwidth.
// Two fusions save a dispatch and a round trip through memory each:
// * x_gate 1 / 2: the bound x is a gated MLP's [M, 2K] gate|up rows and x'[m, k] = act(gate) * up, with
//   act SiLU (1) or GELU-tanh (2) (the down projection reads the up projection's output directly);
// * norm_x 1: x' = x / sqrt(mean(x^2) + eps) * norm_weight (an RMSNorm before the projection); every
//   subgroup computes its rows' mean square itself, from x, which is small and stays in cache.
// Bindings (group 0): 0 x [M, K] (or [M, 2K]) read, 1 W [N, K] read (WEIGHT_TYPE), 2 bias [N] read,
//                     3 residual read, 4 out [M, out_stride] read_write, 5 norm_weight [K] read (any
//                     buffer when norm_x is 0), 6 params uniform.
// Dispatch: ceil(N / (256 / max_subgroup_size)) workgroups of 256, folded as (min(W, 65535), ceil(W / x), 1).
// Each workgroup covers 256 / subgroup_size columns; sizing the grid by the largest subgroup size the
// adapter reports covers every column whatever size the driver picks (extra workgroups find n >= N).
enable subgroups;

struct Params {
  M: u32,
  K: u32,
  N: u32,
  out_stride: u32,
  out_col: u32,
  has_bias: u32,
  has_residual: u32,
  x_gate: u32,
  norm_x: u32,
  eps_bits: u32,
  _pad0: u32,
  _pad1: u32,
}

@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> W: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> bias: array<f32>;
@group(0) @binding(3) var<storage, read> residual: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
@group(0) @binding(5) var<storage, read> norm_weight: array<vec4<f32>>;
@group(0) @binding(6) var<uniform> params: Params;

override WEIGHT_TYPE: u32 = 0u;  // 0 f32, 1 f16, 2 bf16

const WORKGROUP_SIZE: u32 = 256u;
const MAX_ROWS: u32 = 4u;

fn silu(v: vec4<f32>) -> vec4<f32> {
  let e = exp(-abs(v));  // never overflows
  return select(v * e, v, v >= vec4<f32>(0.0)) / (1.0 + e);
}

fn gelu(v: vec4<f32>) -> vec4<f32> {
  let u = 0.7978845608 * (v + 0.044715 * v * v * v);
  return v / (1.0 + exp(min(-2.0 * u, vec4<f32>(80.0))));
}

// Four consecutive inputs k = 4i.. of row m, after the fused gate activation, unnormalised.
fn x_piece(m: u32, i: u32) -> vec4<f32> {
  let K4 = params.K / 4u;
  if (params.x_gate == 0u) {
    return x[m * K4 + i];
  }
  let gate = x[2u * m * K4 + i];
  let up = x[2u * m * K4 + K4 + i];
  if (params.x_gate == 1u) {
    return silu(gate) * up;
  }
  return gelu(gate) * up;
}

// x'[m, 4i..] before the 1 / rms factor: times the norm weights when an RMSNorm is fused.
fn scaled_piece(m: u32, i: u32) -> vec4<f32> {
  let v = x_piece(m, i);
  if (params.norm_x != 0u) {
    return v * norm_weight[i];
  }
  return v;
}

fn halves(word: u32) -> vec2<f32> {
  if (WEIGHT_TYPE == 1u) {
    return unpack2x16float(word);
  }
  return bitcast<vec2<f32>>(vec2<u32>(word << 16u, word & 0xFFFF0000u));
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32, @builtin(subgroup_invocation_id) lane: u32,
        @builtin(subgroup_size) lanes: u32) {
  let columns_per_workgroup = WORKGROUP_SIZE / lanes;
  let n = (wid.x + wid.y * nwg.x) * columns_per_workgroup + lid / lanes;
  let M = params.M;
  let K = params.K;
  // 16-byte pieces per weight row, and vec4s per row of x'.
  let pieces = select(K / 8u, K / 4u, WEIGHT_TYPE == 0u);
  let x_row = K / 4u;

  var acc = vec4<f32>(0.0);  // acc[m]: the partial dot product of row m of x'
  if (n < params.N) {
    let row = n * pieces;
    for (var p = lane; p < pieces; p += lanes) {
      let w = W[row + p];
      if (WEIGHT_TYPE == 0u) {
        let wf = bitcast<vec4<f32>>(w);
        for (var m = 0u; m < M; m++) {
          acc[m] += dot(scaled_piece(m, p), wf);
        }
      } else {
        let lo = vec4<f32>(halves(w.x), halves(w.y));
        let hi = vec4<f32>(halves(w.z), halves(w.w));
        for (var m = 0u; m < M; m++) {
          acc[m] += dot(scaled_piece(m, 2u * p), lo) + dot(scaled_piece(m, 2u * p + 1u), hi);
        }
      }
    }
  }
  if (params.norm_x != 0u) {
    // RMSNorm: the per-row factor 1 / rms comes out of the sum; the subgroup adds up x^2 over the row.
    var squares = vec4<f32>(0.0);
    for (var i = lane; i < x_row; i += lanes) {
      for (var m = 0u; m < M; m++) {
        let v = x_piece(m, i);
        squares[m] += dot(v, v);
      }
    }
    let eps = bitcast<f32>(params.eps_bits);
    acc *= inverseSqrt(subgroupAdd(squares) / f32(K) + eps);
  }
  // Every lane of the subgroup shares n, so the subgroup is uniform here; the sums are taken for all rows.
  let total = subgroupAdd(acc);
  if (n < params.N && lane < M) {
    var value = total[lane];
    if (params.has_bias != 0u) {
      value += bias[n];
    }
    let o = lane * params.out_stride + params.out_col + n;
    if (params.has_residual != 0u) {
      value += residual[o];
    }
    out[o] = value;
  }
}
