// Bandwidth ceiling for `gerbil bench kernels`: dst[i] = src[i] over `count` vec4<f32> (16-byte loads and
// stores, the widest WGSL has). Each thread copies elements idx, idx + threads, idx + 2 * threads, ... so
// neighbouring threads touch neighbouring addresses and every thread has several loads in flight.
// Achievable bandwidth = 2 * 16 * count bytes / time.
// Bindings (group 0): 0 src [count] read, 1 dst [count] read_write, 2 params uniform.
// Dispatch: any number of workgroups of 256, folded as (min(W, 65535), ceil(W / x), 1).

struct Params {
  count: u32,
}

@group(0) @binding(0) var<storage, read> src: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> dst: array<vec4<f32>>;
@group(0) @binding(2) var<uniform> params: Params;

const WORKGROUP_SIZE: u32 = 256u;

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let threads = nwg.x * nwg.y * WORKGROUP_SIZE;
  for (var i = (wid.x + wid.y * nwg.x) * WORKGROUP_SIZE + lid; i < params.count; i += threads) {
    dst[i] = src[i];
  }
}
