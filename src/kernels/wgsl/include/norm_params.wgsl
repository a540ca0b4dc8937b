// The uniform struct of the row norms (kernels::RmsNormParams / LayerNormParams): rmsnorm.wgsl,
// layernorm.wgsl and their vectorised variants.
struct Params {
  seq_len: u32,
  hidden_size: u32,
  eps_bits: u32,  // epsilon, f32 bits
  _pad: u32,
}
