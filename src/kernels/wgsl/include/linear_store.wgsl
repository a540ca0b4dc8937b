// The epilogue of the linear kernels: out[m, out_col + n] = sum + bias[n] (+ residual[m, out_col + n]).
// The including kernel declares params (with has_bias, has_residual, out_stride, out_col), bias, residual
// and out.
fn store(m: u32, n: u32, sum: f32) {
  var value = sum;
  if (params.has_bias != 0u) {
    value += bias[n];
  }
  let o = m * params.out_stride + params.out_col + n;
  if (params.has_residual != 0u) {
    value += residual[o];
  }
  out[o] = value;
}
