// How linear_tiled.wgsl shares a prompt product's work out when WORKERS > 0 (the dispatcher's "split"): the
// product's iterations, i = tile * slabs + slab (slabs of 8 k, tiles in linear_tiled.wgsl's order), are cut
// into WORKERS consecutive shares of nearly equal length, one per workgroup, so the workgroups all finish
// together whatever the count of tiles (a product of 896 tiles on 264 resident workgroups would otherwise run
// a last wave 39 % full). A share may cover the end of one tile, whole tiles, and the start of another: whole
// tiles are finished in place, and a tile cut between shares is left as partial sums, each in the slot
// partial_slot() names, for linear_split_sum.wgsl to add up. Both kernels take the tile and the shares from
// the override constants below, and number the iterations by tiling() and tile_corner(), so they agree.
// The including kernel declares params (linear's Params: M, K, N).

override GROUP_ROWS: u32 = 64u;  // rows of a group: 64 (linear_tiled.wgsl) or 32 (linear_tiled_rows.wgsl); its
                                 // columns GROUP_COLS = 4096 / GROUP_ROWS (256 threads' 4 x 4 outputs each)
override GROUP_COLS: u32 = 4096u / GROUP_ROWS;
override ROW_GROUPS: u32 = 2u;  // groups down a tile
override COL_GROUPS: u32 = 2u;  // groups across a tile
override TILE_M: u32 = GROUP_ROWS * ROW_GROUPS;
override TILE_N: u32 = GROUP_COLS * COL_GROUPS;
override WORKERS: u32 = 0u;     // 0: one tile per workgroup (linear_tiled.wgsl); else the count of shares
const TILE_K: u32 = 8u;         // k per slab

// The product's tiles, column tiles fastest, then row tiles, each K / TILE_K slabs long.
struct Tiling {
  tiles_n: u32,     // tiles per row of tiles
  tiles: u32,
  slabs: u32,       // per tile
  iterations: u32,  // tiles * slabs
}

fn tiling() -> Tiling {
  let tiles_n = (params.N + TILE_N - 1u) / TILE_N;
  let tiles = tiles_n * ((params.M + TILE_M - 1u) / TILE_M);
  let slabs = params.K / TILE_K;
  return Tiling(tiles_n, tiles, slabs, tiles * slabs);
}

// The first row and column of tile `tile`.
fn tile_corner(t: Tiling, tile: u32) -> vec2<u32> {
  return vec2<u32>((tile / t.tiles_n) * TILE_M, (tile % t.tiles_n) * TILE_N);
}

// The first iteration of worker w's share, floor(w * iterations / WORKERS), without overflowing u32: the
// dispatcher keeps WORKERS <= 4096, so w * (iterations % WORKERS) < 2^24.
fn share_start(w: u32, iterations: u32) -> u32 {
  let workers = max(WORKERS, 1u);  // WORKERS = 0 (unshared) must not divide by zero, even where unused
  return w * (iterations / workers) + (w * (iterations % workers)) / workers;
}

// Each worker has two slots of partial sums, one tile's worth each: 2w for the first tile of its share (the
// share starts inside or at the start of that tile) and 2w + 1 for the last; a share cuts at most those two.
// `tile_start` is the tile's first iteration.
fn partial_slot(w: u32, iterations: u32, tile_start: u32) -> u32 {
  return 2u * w + select(1u, 0u, share_start(w, iterations) >= tile_start);
}
