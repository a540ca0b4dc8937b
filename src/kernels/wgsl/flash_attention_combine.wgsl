// The second half of split-KV flash attention: merges the SPLITS partial records that flash_attention.wgsl
// or flash_attention_sg.wgsl (split mode) wrote for each (query t, q head) into the normalised output,
//   m* = max_i m_i,  out[d] = sum_i exp(m_i - m*) acc_i[d] / sum_i exp(m_i - m*) l_i.
// Empty chunks carry m_i = LOWEST_F32 and l_i = acc_i = 0, so their weight exp(m_i - m*) is 0 (every query
// sees at least one key, which lies in chunk 0, so m* is a real score).
// Bindings (group 0): 0 partials [T, num_q_heads, SPLITS, head_dim + 2] read, 1 out [T, Hq * head_dim]
//                     read_write, 2 params uniform (flash_attention.wgsl's, unchanged).
// Dispatch: (T, num_q_heads, 1). The records are read in parallel: thread s < SPLITS reads record s's max and
// denominator, and each output dim is summed by WORKGROUP_SIZE / head_dim threads, each over every such split,
// then added up in workgroup memory. (One thread per dim walking all SPLITS records took 13.7 us per layer on
// the H200 at 64 splits, a chain of dependent loads, as long as the split attention before it.)

//!include flash_params.wgsl

@group(0) @binding(0) var<storage, read> partials: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;

override SPLITS: u32 = 2u;         // at most WORKGROUP_SIZE
const WORKGROUP_SIZE: u32 = 256u;  // >= the largest head_dim

var<workgroup> weights: array<f32, WORKGROUP_SIZE>;       // [SPLITS] exp(m_s - m*)
var<workgroup> denominators: array<f32, WORKGROUP_SIZE>;  // [SPLITS] exp(m_s - m*) l_s
var<workgroup> numerators: array<f32, WORKGROUP_SIZE>;    // [groups][head_dim] partial sums

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let t = wid.x;
  let h = wid.y;
  if (t >= params.T) {
    return;
  }
  let D = params.head_dim;
  let record_size = D + 2u;
  let first_record = (t * params.num_q_heads + h) * SPLITS * record_size;
  var split_max = LOWEST_F32;
  if (lid < SPLITS) {
    split_max = partials[first_record + lid * record_size];
    weights[lid] = split_max;
  }
  workgroupBarrier();
  var global_max = LOWEST_F32;
  for (var s = 0u; s < SPLITS; s++) {
    global_max = max(global_max, weights[s]);
  }
  workgroupBarrier();  // every thread has read the maxes before they become weights
  if (lid < SPLITS) {
    let weight = exp(split_max - global_max);
    weights[lid] = weight;
    denominators[lid] = weight * partials[first_record + lid * record_size + 1u];
  }
  workgroupBarrier();
  // Thread (g, d) of groups = WORKGROUP_SIZE / D sums dim d over the splits g, g + groups, ...
  let groups = WORKGROUP_SIZE / D;
  let d = lid % D;
  let g = lid / D;
  if (g < groups) {
    var numerator: f32 = 0.0;
    for (var s = g; s < SPLITS; s += groups) {
      numerator += weights[s] * partials[first_record + s * record_size + 2u + d];
    }
    numerators[lid] = numerator;
  }
  workgroupBarrier();
  if (lid >= D) {
    return;
  }
  var numerator: f32 = 0.0;
  for (var k = 0u; k < groups; k++) {
    numerator += numerators[k * D + lid];
  }
  var denominator: f32 = 0.0;
  for (var s = 0u; s < SPLITS; s++) {
    denominator += denominators[s];
  }
  out[(t * params.num_q_heads + h) * D + lid] = numerator / denominator;
}
