// linear_tiled.wgsl with its arithmetic in f16, for adapters with shader-f16 (gerbil's opt-in --arithmetic f16
// for prompt products): the same contract, bindings, tiles, shares and dispatch, and half the workgroup
// memory (two buffers of 8 x 128 halves each for x and W: 8 KiB). Prompt products are arithmetic-bound, so
// where a GPU runs f16 at twice the f32 rate or more (packed f16 FMA) this variant is expected to be faster;
// that is not measured yet: the H200's Dawn build offers no shader-f16, and lavapipe only emulates f16.
// What is lost, and why the option is not the default:
// * x and W are rounded to f16 as they are staged (relative error up to 2^-11 each for values in f16's normal
//   range; values below 6.1e-5 in magnitude keep fewer bits, or become zero where the GPU flushes f16
//   subnormals, and values above 65504 become infinite); f16 weights keep their values, bf16 ones too inside
//   f16's range, f32 ones are rounded;
// * the 8 products of a slab (TILE_K) are summed in f16, then added to an f32 sum: the sum over K does not
//   accumulate f16 rounding (summed in f16 alone, a K = 4096 product's error grew from 5e-4 to 9e-3 in the
//   selftest), so the error stays that of a few f16 roundings per term, bounded in the selftest.
enable f16;

alias Product = f16;
const SLAB_SUMS = true;

const X_SLOTS: u32 = 32u;  // tiles of up to 128 rows and 128 columns
const W_SLOTS: u32 = 32u;

//!include linear_tiled_body.wgsl
