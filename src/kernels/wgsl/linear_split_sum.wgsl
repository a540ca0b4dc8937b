// The second pass of a prompt linear whose work linear_tiled.wgsl shared out over WORKERS workgroups
// (linear_shares.wgsl): adds up the partial sums of each tile cut between shares and applies linear's
// epilogue,
//   out[m, out_col + n] = sum over the shares w that cut the tile of partials[slot(w), m - m0, n - n0]
//                         + bias[n] (+ residual[m, out_col + n]).
// Tiles no boundary between shares falls inside were finished by the first pass and are left alone.
// Bindings (group 0): 0 partials [2 WORKERS, TILE_M, TILE_N] read, 1 bias [N] read,
//                     2 residual [M, out_stride] read, 3 out [M, out_stride] read_write,
//                     4 params uniform (linear's LinearParams).
// Dispatch: (WORKERS - 1) * TILE_M * TILE_N / 256 workgroups of 256, folded as (min(W, 65535), ceil(W / 65535),
// 1): one tile's worth of threads per boundary between shares (boundary b starts share b); the tile is summed
// by the threads of the first boundary inside it, one output each.

//!include linear_params.wgsl

@group(0) @binding(0) var<storage, read> partials: array<f32>;
@group(0) @binding(1) var<storage, read> bias: array<f32>;
@group(0) @binding(2) var<storage, read> residual: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<uniform> params: Params;

const WORKGROUP_SIZE: u32 = 256u;

//!include linear_store.wgsl
//!include linear_shares.wgsl

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let t = tiling();
  let slabs = t.slabs;
  let iterations = t.iterations;
  let tile_outputs = TILE_M * TILE_N;
  let index = wid.x + wid.y * nwg.x;
  let per_tile = tile_outputs / WORKGROUP_SIZE;
  let boundary = 1u + index / per_tile;
  if (boundary >= WORKERS) {
    return;
  }
  let cut = share_start(boundary, iterations);
  let tile = cut / slabs;
  let tile_start = tile * slabs;
  // Not inside a tile, or not the tile's first boundary (the share before this one starts inside it too).
  if (cut == tile_start || share_start(boundary - 1u, iterations) > tile_start) {
    return;
  }
  let e = (index % per_tile) * WORKGROUP_SIZE + lid;  // the output within the tile, row-major
  let corner = tile_corner(t, tile);
  let m = corner.x + e / TILE_N;
  let n = corner.y + e % TILE_N;
  if (m >= params.M || n >= params.N) {
    return;
  }
  // The shares that cut the tile: from the one the boundary ends to the last that starts inside the tile.
  var sum: f32 = 0.0;
  for (var w = boundary - 1u; w < WORKERS && share_start(w, iterations) < tile_start + slabs; w++) {
    sum += partials[partial_slot(w, iterations, tile_start) * tile_outputs + e];
  }
  store(m, n, sum);
}
