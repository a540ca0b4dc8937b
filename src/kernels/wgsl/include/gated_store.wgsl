// The epilogue of a gated MLP's gate|up projection (linear_matvec_sg.wgsl, linear_rows.wgsl): W = [gate rows; up
// rows] (params.N / 2 each), and output column g of row m is act(gate) * up of the pair (g, N / 2 + g), biases
// added before the activation. The including kernel declares GATE_ACT (1 SiLU, 2 GELU-tanh) and includes
// linear_store.wgsl and activations.wgsl.

fn store_gated(m: u32, g: u32, gate_sum: f32, up_sum: f32) {
  var gate = gate_sum;
  var up = up_sum;
  if (params.has_bias != 0u) {
    gate += bias[g];
    up += bias[params.N / 2u + g];
  }
  let act = select(gelu(gate), silu(gate), GATE_ACT == 1u);
  out[output_index(m, g)] = act * up;
}
