// MatMul: C[M, N] = A[M, K] * B[K, N], all f32 row-major. Each 16x16 workgroup computes one 16x16 tile
// of C, walking K in 16-wide steps through tiles of A and B staged in workgroup memory.
// Bindings (group 0): 0 A [M, K] read, 1 B [K, N] read, 2 C [M, N] read_write, 3 params uniform.
// Dispatch: (ceil(N / 16), ceil(M / 16), 1); a y count over 65535 is folded into (y, z) with
// tile row = wid.y + wid.z * num_workgroups.y.

struct Params {
  M: u32,
  K: u32,
  N: u32,
}

@group(0) @binding(0) var<storage, read> A: array<f32>;
@group(0) @binding(1) var<storage, read> B: array<f32>;
@group(0) @binding(2) var<storage, read_write> C: array<f32>;
@group(0) @binding(3) var<uniform> params: Params;

const TILE: u32 = 16u;

var<workgroup> tile_a: array<array<f32, TILE>, TILE>;
var<workgroup> tile_b: array<array<f32, TILE>, TILE>;

@compute @workgroup_size(TILE, TILE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
  // The whole workgroup shares its tile row, so this return keeps the barriers below in uniform flow.
  let tile_row = wid.y + wid.z * nwg.y;
  if (tile_row * TILE >= params.M) {
    return;
  }
  let row = tile_row * TILE + lid.y;
  let col = wid.x * TILE + lid.x;

  var acc: f32 = 0.0;
  for (var k0: u32 = 0u; k0 < params.K; k0 += TILE) {
    // Out-of-range threads load zeros instead of returning: every thread must reach the barriers.
    var a: f32 = 0.0;
    if (row < params.M && k0 + lid.x < params.K) {
      a = A[row * params.K + k0 + lid.x];
    }
    var b: f32 = 0.0;
    if (k0 + lid.y < params.K && col < params.N) {
      b = B[(k0 + lid.y) * params.N + col];
    }
    tile_a[lid.y][lid.x] = a;
    tile_b[lid.y][lid.x] = b;
    workgroupBarrier();
    for (var k: u32 = 0u; k < TILE; k++) {
      acc += tile_a[lid.y][k] * tile_b[k][lid.x];
    }
    workgroupBarrier();
  }
  if (row < params.M && col < params.N) {
    C[row * params.N + col] = acc;
  }
}
