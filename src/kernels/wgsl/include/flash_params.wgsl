// The uniform struct of the flash attention kernels (kernels::FlashAttentionParams), the causal window rule
// and the split-KV key chunks they share, for flash_attention.wgsl, flash_attention_sg.wgsl,
// flash_attention_block.wgsl and flash_attention_combine.wgsl; and the work of one workgroup of the
// per-query kernels (flash_attention.wgsl, flash_attention_sg.wgsl).
struct Params {
  T: u32,
  S: u32,
  num_q_heads: u32,
  num_kv_heads: u32,
  head_dim: u32,
  position_offset: u32,
  window: u32,
  scale_bits: u32,
}

const LOWEST_F32: f32 = -3.4028234e38;  // stands in for -inf, which WGSL cannot write as a constant

// The first key the query at `position` attends: max(0, position - window + 1), 0 without a window.
fn first_key(position: u32) -> u32 {
  if (params.window != 0u && position >= params.window) {
    return position + 1u - params.window;
  }
  return 0u;
}

const CHUNK_GRANULE: u32 = 128u;  // kernels/model.cpp kSplitGranule: split chunks are whole multiples of it

// The keys of each of `splits` (> 1) chunks for the query at `position`: its keys split evenly, in whole
// multiples of CHUNK_GRANULE.
fn chunk_length(position: u32, splits: u32) -> u32 {
  return (position - first_key(position)) / (splits * CHUNK_GRANULE) * CHUNK_GRANULE + CHUNK_GRANULE;
}

// The keys [x, y] the query at `position` sees in chunk `chunk_index` of `splits` (splits 1: all its keys);
// empty (x > y) for chunks past its last key.
fn chunk_keys(position: u32, chunk_index: u32, splits: u32) -> vec2<u32> {
  let first = first_key(position);
  if (splits < 2u) {
    return vec2<u32>(first, position);
  }
  let chunk = chunk_length(position, splits);
  let start = first + chunk_index * chunk;
  return vec2<u32>(start, min(position, start + chunk - 1u));
}

// How many of the chunks hold keys for the query at `position`: the first ones; chunk_keys leaves the others
// empty. The per-query kernels write records for those alone, which flash_attention_combine.wgsl reads.
fn chunks_with_keys(position: u32, splits: u32) -> u32 {
  if (splits < 2u) {
    return 1u;
  }
  return (position - first_key(position)) / chunk_length(position, splits) + 1u;
}

// A per-query workgroup's work: query t, q head h and its kv head, and the keys [first, last] of its chunk
// (empty when first > last). The grid is (min(T, 65535), num_q_heads, ceil(T / 65535)), query t =
// wid.x + wid.z * num_workgroups.x, or in split mode (splits > 1) (T, num_q_heads, splits), chunk = wid.z.
// t may lie past T in the last row of a folded grid: the caller returns for those.
struct QueryTask {
  t: u32,
  h: u32,
  kv: u32,
  chunk: u32,
  first: u32,
  last: u32,
}

fn query_task(wid: vec3<u32>, nwg: vec3<u32>, splits: u32) -> QueryTask {
  let split_mode = splits > 1u;
  let t = select(wid.x + wid.z * nwg.x, wid.x, split_mode);
  let chunk = select(0u, wid.z, split_mode);
  let keys = chunk_keys(params.position_offset + t, chunk, splits);
  return QueryTask(t, wid.y, wid.y / (params.num_q_heads / params.num_kv_heads), chunk, keys.x, keys.y);
}

// Where split mode writes a task's record [running max, denominator, acc[head_dim]] (unnormalised), as
// flash_attention_combine.wgsl reads it.
fn partial_record(task: QueryTask, splits: u32, head_dim: u32) -> u32 {
  return ((task.t * params.num_q_heads + task.h) * splits + task.chunk) * (head_dim + 2u);
}
