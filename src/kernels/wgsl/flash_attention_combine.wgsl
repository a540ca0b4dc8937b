// The second half of split-KV flash attention: merges the SPLITS partial records that flash_attention.wgsl
// or flash_attention_sg.wgsl (split mode) wrote for each (query t, q head) into the normalised output,
//   m* = max_i m_i,  out[d] = sum_i exp(m_i - m*) acc_i[d] / sum_i exp(m_i - m*) l_i.
// The per-query kernels write no record for a chunk without keys (FIRST_CHUNKS_ONLY: only the first
// chunks_with_keys records are read). The block kernel writes one for every chunk: a row without keys in its
// chunk carries m_i = LOWEST_F32 and l_i = acc_i = 0, so its weight exp(m_i - m*) is 0 (every query sees at least
// one key, which lies in chunk 0, so m* is a real score).
// Bindings (group 0): 0 partials [T, num_q_heads, SPLITS, head_dim + 2] read, 1 out [T, Hq * head_dim]
//                     read_write, 2 params uniform (flash_attention.wgsl's, unchanged).
// Dispatch: (T, num_q_heads, 1); thread d < head_dim writes output dim d.

//!include flash_params.wgsl

@group(0) @binding(0) var<storage, read> partials: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;

override SPLITS: u32 = 2u;
override FIRST_CHUNKS_ONLY: bool = false;  // the records of flash_attention(_sg).wgsl, not the block kernel's
const WORKGROUP_SIZE: u32 = 256u;  // >= the largest head_dim

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let t = wid.x;
  let h = wid.y;
  let D = params.head_dim;
  if (t >= params.T || lid >= D) {
    return;
  }
  let record_size = D + 2u;
  let first_record = (t * params.num_q_heads + h) * SPLITS * record_size;
  let records = select(SPLITS, chunks_with_keys(params.position_offset + t, SPLITS), FIRST_CHUNKS_ONLY);
  var global_max = LOWEST_F32;
  for (var s: u32 = 0u; s < records; s++) {
    global_max = max(global_max, partials[first_record + s * record_size]);
  }
  var numerator: f32 = 0.0;
  var denominator: f32 = 0.0;
  for (var s: u32 = 0u; s < records; s++) {
    let record = first_record + s * record_size;
    let weight = exp(partials[record] - global_max);
    denominator += weight * partials[record + 1u];
    numerator += weight * partials[record + 2u + lid];
  }
  out[(t * params.num_q_heads + h) * D + lid] = numerator / denominator;
}
