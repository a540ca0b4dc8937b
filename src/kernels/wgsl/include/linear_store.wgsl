// The epilogue of the linear kernels: out[m, out_col + n] = sum + bias[n] (+ residual[m, out_col + n]).
// The including kernel declares params (with has_bias, has_residual, out_stride, out_col), bias, residual
// and out.

// Where output (m, n) lies in out (and in residual).
fn output_index(m: u32, n: u32) -> u32 {
  return m * params.out_stride + params.out_col + n;
}

// What the epilogue adds to the sum of output (m, n): its bias, and its residual. A kernel may load it before
// the sum is ready (linear_matvec_sg.wgsl does).
fn epilogue_addend(m: u32, n: u32) -> f32 {
  var addend = 0.0;
  if (params.has_bias != 0u) {
    addend += bias[n];
  }
  if (params.has_residual != 0u) {
    addend += residual[output_index(m, n)];
  }
  return addend;
}

fn store(m: u32, n: u32, sum: f32) {
  out[output_index(m, n)] = sum + epilogue_addend(m, n);
}
