// SiLU and GELU (tanh approximation), scalar and vec4, for silu.wgsl, gated_act.wgsl, elementwise_vec4.wgsl
// and linear_matvec_sg.wgsl's fused gate.
const SQRT_2_OVER_PI: f32 = 0.7978845608;
const GELU_COEFF: f32 = 0.044715;

// x * sigmoid(x) with exp of a non-positive argument only: no overflow, no inf / inf for very negative x.
fn silu(x: f32) -> f32 {
  let e = exp(-abs(x));
  return select(x * e, x, x >= 0.0) / (1.0 + e);
}

// x * 0.5 * (1 + tanh(u)) written as x / (1 + exp(-2u)), u = sqrt(2 / pi) (x + 0.044715 x^3): the same
// function without the cancellation of 1 + tanh(u); the exponent is capped so it never overflows.
fn gelu(x: f32) -> f32 {
  let u = SQRT_2_OVER_PI * (x + GELU_COEFF * x * x * x);
  return x / (1.0 + exp(min(-2.0 * u, 80.0)));
}

fn silu4(x: vec4<f32>) -> vec4<f32> {
  let e = exp(-abs(x));
  return select(x * e, x, x >= vec4<f32>(0.0)) / (1.0 + e);
}

fn gelu4(x: vec4<f32>) -> vec4<f32> {
  let u = SQRT_2_OVER_PI * (x + GELU_COEFF * x * x * x);
  return x / (1.0 + exp(min(-2.0 * u, vec4<f32>(80.0))));
}
