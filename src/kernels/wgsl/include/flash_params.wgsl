// The uniform struct of the flash attention kernels (kernels::FlashAttentionParams) and the causal window
// rule they share, for flash_attention.wgsl, flash_attention_block.wgsl and flash_attention_combine.wgsl.
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
