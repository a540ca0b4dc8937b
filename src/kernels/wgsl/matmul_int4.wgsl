// MatMulInt4: C[M, N] = A[M, K] * dequant(B_q)[K, N], dequantized on the fly; untiled, one thread per
// element of C. Element flat = k * N + n of B is nibble flat % 8 of word B_q[flat / 8] (lowest bits =
// lowest index), worth (nibble - zeros[g]) * scales[g] with g = flat / group_size.
// Bindings (group 0): 0 A [M, K] read, 1 B_q [ceil(K * N / 8)] u32 read, 2 scales [groups] read,
//                     3 zeros [groups] read, 4 C [M, N] read_write, 5 params uniform.
// Dispatch: (ceil(N / 16), ceil(M / 16), 1) workgroups of 16x16; a y count over 65535 is folded into
// (y, z) with tile row = wid.y + wid.z * num_workgroups.y.

struct Params {
  M: u32,
  K: u32,
  N: u32,
  group_size: u32,
}

@group(0) @binding(0) var<storage, read> A: array<f32>;
@group(0) @binding(1) var<storage, read> B_q: array<u32>;
@group(0) @binding(2) var<storage, read> scales: array<f32>;
@group(0) @binding(3) var<storage, read> zeros: array<f32>;
@group(0) @binding(4) var<storage, read_write> C: array<f32>;
@group(0) @binding(5) var<uniform> params: Params;

const TILE: u32 = 16u;

fn extract_nibble(packed: u32, pos: u32) -> f32 {
  let shift = pos * 4u;
  let nibble = (packed >> shift) & 0xFu;
  return f32(nibble);
}

@compute @workgroup_size(TILE, TILE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  let row = (wid.y + wid.z * nwg.y) * TILE + lid.y;
  let col = wid.x * TILE + lid.x;
  if (row >= params.M || col >= params.N) {
    return;
  }
  var acc: f32 = 0.0;
  for (var k: u32 = 0u; k < params.K; k++) {
    let flat_idx = k * params.N + col;
    let group_idx = flat_idx / params.group_size;
    let nibble = extract_nibble(B_q[flat_idx / 8u], flat_idx % 8u);
    acc += A[row * params.K + k] * ((nibble - zeros[group_idx]) * scales[group_idx]);
  }
  C[row * params.N + col] = acc;
}
