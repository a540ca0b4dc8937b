// The tiled variant of linear.wgsl (M > its MATVEC_ROWS) and its entry point.
// Tiled: each workgroup of 256 computes a 64 x 64 tile of out as a 16 x 16 grid of threads, each owning rows
// ty + 16i and columns tx + 16j (i, j < 4), so neighbouring threads write neighbouring columns; K is walked
// in steps of TILE_K through x and W tiles staged transposed (k-major) in workgroup memory. The kernel
// provides stage_w_tile(n0, k0, lid), which writes w_tile[kk * PITCH + n] = W[n0 + n, k0 + kk] (zeros
// outside W), store(m, n, sum), x, params (M, K, N), WORKGROUP_SIZE = 256, and for its matrix-vector
// variant (the MATVEC override) matvec(block, lid) covering COLS columns per workgroup.
const TILE: u32 = 64u;
const TILE_K: u32 = 16u;
const PITCH: u32 = TILE + 1u;  // one pad float per k row: the transposed stores fall in distinct banks
var<workgroup> x_tile: array<f32, TILE_K * PITCH>;  // x_tile[k * PITCH + m]
var<workgroup> w_tile: array<f32, TILE_K * PITCH>;  // w_tile[k * PITCH + n]

fn tiled(tile: u32, lid: u32) {
  let M = params.M;
  let K = params.K;
  let N = params.N;
  let tiles_n = (N + TILE - 1u) / TILE;
  let m0 = (tile / tiles_n) * TILE;
  let n0 = (tile % tiles_n) * TILE;
  let tx = lid % 16u;
  let ty = lid / 16u;

  var acc: array<vec4<f32>, 4>;  // acc[i][j]: row m0 + ty + 16i, column n0 + tx + 16j
  for (var k0: u32 = 0u; k0 < K; k0 += TILE_K) {
    // Each thread stages 4 elements of the x tile; 16 neighbouring threads read 16 consecutive k of one row.
    // Out-of-range elements are zeros, and no thread returns early: all must reach the barriers.
    for (var r: u32 = 0u; r < 4u; r++) {
      let idx = lid + r * WORKGROUP_SIZE;
      let row = idx / TILE_K;
      let kk = idx % TILE_K;
      var xv: f32 = 0.0;
      if (m0 + row < M && k0 + kk < K) {
        xv = x[(m0 + row) * K + k0 + kk];
      }
      x_tile[kk * PITCH + row] = xv;
    }
    stage_w_tile(n0, k0, lid);
    workgroupBarrier();
    for (var kk: u32 = 0u; kk < TILE_K; kk++) {
      let base = kk * PITCH;
      let b = vec4<f32>(w_tile[base + tx], w_tile[base + tx + 16u], w_tile[base + tx + 32u],
                        w_tile[base + tx + 48u]);
      for (var i: u32 = 0u; i < 4u; i++) {
        acc[i] += x_tile[base + ty + 16u * i] * b;
      }
    }
    workgroupBarrier();
  }
  for (var i: u32 = 0u; i < 4u; i++) {
    for (var j: u32 = 0u; j < 4u; j++) {
      let m = m0 + ty + 16u * i;
      let n = n0 + tx + 16u * j;
      if (m < M && n < N) {
        store(m, n, acc[i][j]);
      }
    }
  }
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  // The whole workgroup shares its block, so these returns keep the barriers in uniform control flow.
  let block = wid.x + wid.y * nwg.x;
  if (MATVEC) {
    if (block * COLS >= params.N) {
      return;
    }
    matvec(block, lid);
  } else {
    let tiles = ((params.N + TILE - 1u) / TILE) * ((params.M + TILE - 1u) / TILE);
    if (block >= tiles) {
      return;
    }
    tiled(block, lid);
  }
}
