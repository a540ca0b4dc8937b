// linear's uniform struct (kernels::LinearParams), shared by linear.wgsl,
// linear_tiled.wgsl and linear_matvec_sg.wgsl.
struct Params {
  M: u32,
  K: u32,
  N: u32,
  out_stride: u32,
  out_col: u32,
  has_bias: u32,
  has_residual: u32,
  gate_act: u32,  // linear_matvec_sg.wgsl's fusions (GATE_ACT / NORM_X / NORM_OUT overrides mirror them);
  norm_x: u32,    // 0 elsewhere
  eps_bits: u32,
  position: u32,  // linear_matvec_sg.wgsl ROPE only: the rotary position of row 0
  norm_out: u32,
}
