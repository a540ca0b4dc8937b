// The resident-workgroup probe of kernels/tuning.cpp: each workgroup of 256 invocations stays resident for
// `rounds` rounds in which one invocation runs a chain of dependent FMAs and the others wait at the barrier,
// so a workgroup costs the GPU time, not issue slots: WORKGROUPS of them take one round's time while the GPU
// holds them all at once, and twice that once it holds fewer (a second wave).
//
// Bindings (group 0): 0 out [workgroups] read_write (keeps the chain from being optimised away),
// 1 uniform Params. Dispatch: (workgroups, 1, 1).

struct Params {
  rounds: u32,
  seed: f32,
}

@group(0) @binding(0) var<storage, read_write> out: array<f32>;
@group(0) @binding(1) var<uniform> p: Params;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  var x = p.seed + f32(wid.x);
  for (var round = 0u; round < p.rounds; round++) {
    if (lid == 0u) {
      for (var i = 0u; i < 64u; i++) {
        x = fma(x, 0.999, 0.001);
      }
    }
    workgroupBarrier();
  }
  if (lid == 0u) {
    out[wid.x] = x;
  }
}
