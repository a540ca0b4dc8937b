// linear_tiled.wgsl with its arithmetic in f16, for adapters with shader-f16 (gerbil's opt-in --arithmetic f16
// for prompt products): the same contract, bindings, tiles, shares and dispatch. Where a GPU runs f16 at
// twice the f32 rate or more (packed f16 FMA), the prompt products are arithmetic-bound and gain from it;
// the workgroup tiles also shrink to half (two buffers of 8 x 128 halves each for x and W: 8 KiB).
// What is lost, and why the option is not the default:
// * x and W are rounded to f16 as they are staged (relative error up to 2^-11 each; f16 and bf16 weights
//   keep their values, bf16 ones unless they lie outside f16's range, f32 ones are rounded), and an x or W
//   value above 65504 in magnitude becomes infinite;
// * the 8 products of a slab (TILE_K) are summed in f16, then added to an f32 sum: the sum over K does not
//   accumulate f16 rounding (a K = 4096 sum in f16 would lose ~6 bits), so the error stays that of a few
//   f16 roundings per term, bounded in the selftest.
enable f16;

alias Product = f16;
const SLAB_SUMS = true;

//!include linear_tiled_body.wgsl
