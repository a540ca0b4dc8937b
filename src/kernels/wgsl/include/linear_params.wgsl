// linear's uniform struct (kernels::LinearParams) and weight decoding, shared by linear.wgsl,
// linear_tiled.wgsl and linear_matvec_sg.wgsl.
struct Params {
  M: u32,
  K: u32,
  N: u32,
  out_stride: u32,
  out_col: u32,
  has_bias: u32,
  has_residual: u32,
  x_gate: u32,    // linear_matvec_sg.wgsl's fusions (X_GATE / NORM_X overrides mirror them); 0 elsewhere
  norm_x: u32,
  eps_bits: u32,
  position: u32,  // linear_matvec_sg.wgsl ROPE only: the rotary position of row 0
  _pad: u32,
}

override WEIGHT_TYPE: u32 = 0u;  // 0 f32, 1 f16, 2 bf16

// The two 16-bit weights packed in one word, lower index first.
fn halves(word: u32) -> vec2<f32> {
  if (WEIGHT_TYPE == 1u) {
    return unpack2x16float(word);
  }
  return bitcast<vec2<f32>>(vec2<u32>(word << 16u, word & 0xFFFF0000u));
}
