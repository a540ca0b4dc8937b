// The uniform struct of the flash attention kernels (kernels::FlashAttentionParams), the causal window rule
// and the split-KV key chunks they share, for flash_attention.wgsl, flash_attention_sg.wgsl,
// flash_attention_block.wgsl and flash_attention_combine.wgsl.
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

// The keys [x, y] the query at `position` sees in chunk `chunk_index` of `splits` (splits 1: all its keys);
// empty (x > y) for chunks past its last key.
fn chunk_keys(position: u32, chunk_index: u32, splits: u32) -> vec2<u32> {
  let first = first_key(position);
  if (splits < 2u) {
    return vec2<u32>(first, position);
  }
  let chunk = (position - first) / (splits * CHUNK_GRANULE) * CHUNK_GRANULE + CHUNK_GRANULE;
  let start = first + chunk_index * chunk;
  return vec2<u32>(start, min(position, start + chunk - 1u));
}
