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
const ROUNDS: u32 = 4u;

// The CHAINS = 8 chains are eight named variables, not an array: an array indexed in a loop may live in
// memory rather than registers, and then the loads and stores, not the FMAs, bound the kernel.
@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let a = vec4<f32>(params.a);
  let b = vec4<f32>(params.b);
  let seed = vec4<f32>(f32(gid.x % 97u), 0.0, 0.5, 0.25) * 0.01;
  var c0 = seed;
  var c1 = seed + 0.01;
  var c2 = seed + 0.02;
  var c3 = seed + 0.03;
  var c4 = seed + 0.04;
  var c5 = seed + 0.05;
  var c6 = seed + 0.06;
  var c7 = seed + 0.07;
  for (var i = 0u; i < params.iterations; i++) {
    for (var r = 0u; r < ROUNDS; r++) {
      c0 = fma(c0, a, b);
      c1 = fma(c1, a, b);
      c2 = fma(c2, a, b);
      c3 = fma(c3, a, b);
      c4 = fma(c4, a, b);
      c5 = fma(c5, a, b);
      c6 = fma(c6, a, b);
      c7 = fma(c7, a, b);
    }
  }
  out[gid.x] = ((c0 + c1) + (c2 + c3)) + ((c4 + c5) + (c6 + c7));
}
