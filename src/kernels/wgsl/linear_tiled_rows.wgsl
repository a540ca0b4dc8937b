// linear_tiled.wgsl's tiles for a batched decode step of 17 to 64 rows (one row per sequence; up to 16,
// linear_rows.wgsl): the same contract, bindings, body, shares and dispatch, in tiles of 32 x 256 or 64 x 256
// (GROUP_ROWS 32: groups of 32 x 128, one or two row groups and two column groups) rather than 64-row tiles of up
// to half padding (17 to 32 rows) or of 4 x 8 outputs a thread (33 to 64). Each thread owns 4 x 8 outputs of a
// 32-row tile, fed per k by one vec4 of x and two of W from workgroup memory (32 FMAs), or 8 x 8 of a 64-row one
// (two of x and two of W: 64 FMAs, as linear_tiled.wgsl's 128 x 128 tiles); the threads of a warp read one or
// two addresses of x. Its slabs of W are twice as wide as linear_tiled.wgsl's widest (each thread stages 4 k of
// two rows of W), so its workgroup arrays take 20 KiB: more than the 16 KiB every WebGPU adapter offers, so the
// dispatcher (kernels::use_batch_tiles) takes it only where maxComputeWorkgroupStorageSize holds them.
// Products are f32, as in linear_tiled.wgsl.

alias Product = f32;
const SLAB_SUMS = false;
const X_SLOTS: u32 = 16u;  // tiles of up to 64 rows
const W_SLOTS: u32 = 64u;  // and 256 columns

//!include linear_tiled_body.wgsl
