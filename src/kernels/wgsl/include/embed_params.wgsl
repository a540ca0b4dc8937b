// The uniform struct of embed.wgsl and embed_vec4.wgsl (kernels::EmbedParams).
struct Params {
  seq_len: u32,
  hidden_size: u32,
  vocab_offset: u32,
  vocab_rows: u32,
  scale_bits: u32,
  position_offset: u32,
  use_positions: u32,
  first_row: u32,
}
