// Compute ceiling for `gerbil bench kernels`: every thread advances CHAINS independent vec4<f32> chains
// c = fma(c, a, b), ROUNDS times per loop trip (so the loop counter costs little), `iterations` trips.
// The chains are independent so the FMA units never wait on a previous result; a and b come from the
// uniform so the compiler cannot fold the arithmetic, and the sum of the chains is stored so it cannot
// drop it. With a = 0.999, b = 0.001 the values tend to 1 and stay finite.
// FLOPs = 2 * 4 * CHAINS * ROUNDS * iterations per thread (an FMA is two operations).
// Bindings (group 0): 0 out [threads] vec4<f32> read_write, 1 params uniform.
// Dispatch: (workgroups, 1, 1) workgroups of 256.

struct Params {
  iterations: u32,
  a: f32,
  b: f32,
  _pad: u32,
}

@group(0) @binding(0) var<storage, read_write> out: array<vec4<f32>>;
@group(0) @binding(1) var<uniform> params: Params;

const WORKGROUP_SIZE: u32 = 256u;
const CHAINS: u32 = 8u;
const ROUNDS: u32 = 4u;

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let a = vec4<f32>(params.a);
  let b = vec4<f32>(params.b);
  var c: array<vec4<f32>, CHAINS>;
  for (var j = 0u; j < CHAINS; j++) {
    c[j] = vec4<f32>(f32(gid.x % 97u), f32(j), 0.5, 0.25) * 0.01;
  }
  for (var i = 0u; i < params.iterations; i++) {
    for (var r = 0u; r < ROUNDS; r++) {
      for (var j = 0u; j < CHAINS; j++) {
        c[j] = fma(c[j], a, b);
      }
    }
  }
  var sum = vec4<f32>(0.0);
  for (var j = 0u; j < CHAINS; j++) {
    sum += c[j];
  }
  out[gid.x] = sum;
}
