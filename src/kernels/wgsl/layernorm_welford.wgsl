// LayerNorm, single pass: the contract of layernorm.wgsl, output[t, d] = (input[t, d] - mean) /
// sqrt(variance + eps) * weight[d] + bias[d] with the mean and biased (1/D) variance of row t, for rows of a
// whole number of vec4s (hidden_size % 4 == 0; the dispatcher runs layernorm.wgsl for other sizes).
// Mean and variance come from one pass of Welford / Chan statistics (count, mean, sum of squared
// deviations M2): numerically stable like the seed's two passes (no E[x^2] - E[x]^2 cancellation), but the
// row is read once. One workgroup of 256 per row: thread i handles the vec4s i, i + 256, ... of its row
// (128-bit loads and stores), keeping the first CACHED in registers for the write, and merges their
// statistics pairwise. The threads' statistics are then combined in Chan's k-way form, two sums
// (workgroup_reduce.wgsl's two-level sum): the mean is sum(n_i mean_i) / D, and
// M2 = sum(M2_i + n_i (mean_i - mean)^2), a sum of terms that are never negative. Sums parallelise where
// pairwise merges chain: merging the 256 threads' statistics 16 at a time, then 16 (31 dependent merges,
// each with a division), ran at 46 % of the copy bandwidth on an H200 (T = 2048, D = 4096; run 79; 56 % with
// the sums, run 80). The statistics are of x - shift, shift the row's first element: the variance does not
// change, and the means summed are then of the row's spread, not its offset (rows of 256 +- 1 in the
// selftest: 3.6e-5 of relative error unshifted, 8e-8 shifted).
// Bindings (group 0): 0 input [T, hidden_size] read, 1 weight [hidden_size] read, 2 bias [hidden_size] read,
//                     3 output [T, hidden_size] read_write, 4 params uniform (eps as f32 bits);
//                     the arrays are bound as vec4<f32>.
// Dispatch: T workgroups, folded as (min(T, 65535), ceil(T / x), 1).

//!include norm_params.wgsl

@group(0) @binding(0) var<storage, read> input: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> weight: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> bias: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> output: array<vec4<f32>>;
@group(0) @binding(4) var<uniform> params: Params;

const WORKGROUP_SIZE: u32 = 256u;
const CACHED: u32 = 4u;  // vec4s per thread kept in registers between the reduction and the write

//!include workgroup_reduce.wgsl

// (count, mean, M2) of a set of values; counts stay exact in f32 up to 2^24 elements.
struct Stats {
  n: f32,
  mean: f32,
  m2: f32,
}

// Chan et al.'s pairwise combination; an empty `b` leaves `a` unchanged, an empty `a` gives `b`.
fn merge(a: Stats, b: Stats) -> Stats {
  if (b.n == 0.0) {
    return a;
  }
  let n = a.n + b.n;
  let delta = b.mean - a.mean;
  let share = b.n / n;
  return Stats(n, a.mean + delta * share, a.m2 + b.m2 + delta * delta * a.n * share);
}

fn stats_of(x: vec4<f32>) -> Stats {
  let mean = (x.x + x.y + x.z + x.w) * 0.25;
  let centred = x - mean;
  return Stats(4.0, mean, dot(centred, centred));
}

// The mean and M2 of the row's x - shift, from each thread's statistics of its part, returned to every thread
// (Chan's k-way combination; see the header). Call once, from uniform control flow.
fn row_stats(lid: u32, s: Stats) -> Stats {
  let n = f32(params.hidden_size);
  let mean = workgroup_sum_two_level(lid, s.n * s.mean) / n;
  let deviation = s.mean - mean;
  let m2 = workgroup_sum_two_level(lid, s.m2 + s.n * deviation * deviation);
  return Stats(n, mean, m2);
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  // The whole workgroup shares its row, so this return keeps the barriers in uniform control flow.
  let row = wid.x + wid.y * nwg.x;
  if (row >= params.seq_len) {
    return;
  }
  let D4 = params.hidden_size / 4u;
  let base = row * D4;

  // Everything below works on x - shift (see the header); the same element for every thread, one broadcast.
  let shift = vec4<f32>(input[base].x);
  var cache: array<vec4<f32>, CACHED>;
  var stats = Stats(0.0, 0.0, 0.0);
  for (var k: u32 = 0u; k < CACHED; k++) {
    let d4 = lid + k * WORKGROUP_SIZE;
    if (d4 < D4) {
      let x = input[base + d4] - shift;
      cache[k] = x;
      stats = merge(stats, stats_of(x));
    }
  }
  for (var d4 = lid + CACHED * WORKGROUP_SIZE; d4 < D4; d4 += WORKGROUP_SIZE) {
    stats = merge(stats, stats_of(input[base + d4] - shift));
  }
  let totals = row_stats(lid, stats);
  let mean = totals.mean;
  let inv_std = 1.0 / sqrt(totals.m2 / totals.n + bitcast<f32>(params.eps_bits));
  for (var k: u32 = 0u; k < CACHED; k++) {
    let d4 = lid + k * WORKGROUP_SIZE;
    if (d4 < D4) {
      output[base + d4] = (cache[k] - mean) * inv_std * weight[d4] + bias[d4];
    }
  }
  for (var d4 = lid + CACHED * WORKGROUP_SIZE; d4 < D4; d4 += WORKGROUP_SIZE) {
    output[base + d4] = (input[base + d4] - shift - mean) * inv_std * weight[d4] + bias[d4];
  }
}
