// linear_tiled.wgsl's tiles for a batched decode step of 17 to 32 rows (one row per sequence; up to 16,
// linear_rows.wgsl): the same contract, bindings, body, shares and dispatch, in tiles of 32 x 256 (GROUP_ROWS 32:
// groups of 32 x 128, two column groups) rather than 64-row tiles half of padding. Each thread owns 4 x 8 outputs
// of a tile, fed per k by one vec4 of x and two of W from workgroup memory (32 FMAs); the threads of a warp read
// one or two addresses of x. Its slabs of W are twice as wide as linear_tiled.wgsl's widest (each thread stages 4
// k of two rows of W), so its workgroup arrays take 18 KiB: more than the 16 KiB every WebGPU adapter offers, so
// the dispatcher (kernels::use_batch_tiles) takes it only where maxComputeWorkgroupStorageSize holds them.
// Products are f32, as in linear_tiled.wgsl.

alias Product = f32;
const SLAB_SUMS = false;
const X_SLOTS: u32 = 8u;   // tiles of up to 32 rows
const W_SLOTS: u32 = 64u;  // and 256 columns

//!include linear_tiled_body.wgsl
