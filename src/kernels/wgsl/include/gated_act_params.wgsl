// The uniform struct of gated_act.wgsl and gated_act_vec4.wgsl (kernels::GatedActParams).
struct Params {
  seq_len: u32,
  intermediate: u32,
  activation: u32,
  _pad: u32,
}
