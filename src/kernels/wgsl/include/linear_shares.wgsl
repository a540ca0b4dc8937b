// How linear_tiled.wgsl shares a prompt product's work out when WORKERS > 0 (the dispatcher's "split"): the
// product's iterations, i = tile * slabs + slab (slabs of 8 k, tiles in linear_tiled.wgsl's order), are cut
// into WORKERS consecutive shares of nearly equal length, one per workgroup, so the workgroups all finish
// together whatever the count of tiles (a product of 896 tiles on 264 resident workgroups would otherwise run
// a last wave 39 % full). A share may cover the end of one tile, whole tiles, and the start of another: whole
// tiles are finished in place, and a tile cut between shares is left as partial sums, each in the slot
// partial_slot() names, for linear_split_sum.wgsl to add up. The including kernel declares WORKERS.

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
