// The order in which the GPU token pickers (argmax.wgsl, sample.wgsl) rank logits, shared so both agree with
// each other and with generate/sampler.cpp: larger value first, lower index first among equal values; NONE
// (no token) after every token.
const NONE: u32 = 0xFFFFFFFFu;

// Whether candidate (v, i) comes before (w, j).
fn before(v: f32, i: u32, w: f32, j: u32) -> bool {
  return i != NONE && (j == NONE || v > w || (v == w && i < j));
}

// Whether v is NaN, by its bits: a compiler may assume floats are never NaN (WGSL allows it) and fold a test
// like v != v to false.
fn is_nan(v: f32) -> bool {
  return (bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u;
}
