// Vectorised replacements for the bandwidth-bound seed kernels (RMSNorm, LayerNorm, add, mul, SiLU, GELU):
// the same contracts, bindings and Params as the seed dispatchers in kernels/seed.h, so a caller switches
// by renaming the function. Each reads and writes 128-bit vec4<f32> pieces, which needs rows
// (hidden_size) or counts that are a multiple of 4; for other shapes the dispatcher returns the seed
// kernel's dispatch instead (Dispatch::kernel then names the seed kernel), so every shape works.
// Binding offsets are WebGPU storage offsets (multiples of at least 32 bytes), hence 16-byte aligned.
// None of them needs the subgroups feature: the norms reduce in workgroup memory.
#pragma once

#include "kernels/seed.h"

namespace gerbil::kernels {

// Whether the vec4 kernels (rather than their seed fallbacks) serve rows / counts of `n` elements.
inline bool vec4_fits(uint32_t n) { return n % 4 == 0; }

// rmsnorm_vec4.wgsl: out[t, d] = x[t, d] / sqrt(mean(x[t, :]^2) + eps) * weight[d]; one workgroup per
// row, as rmsnorm.wgsl (Params: RmsNormParams, the WGSL struct Params {seq_len, hidden_size, eps_bits, _pad}).
Grid rmsnorm_vec4_grid(const RmsNormParams& p);
Dispatch rmsnorm_vec4(gpu::Device& device, BufferBinding input, BufferBinding weight, BufferBinding output,
                      const RmsNormParams& p);

// layernorm_welford.wgsl: out[t, d] = (x[t, d] - mean) / sqrt(var + eps) * weight[d] + bias[d], mean and
// biased variance from single-pass Welford statistics; one workgroup per row (Params: LayerNormParams).
Grid layernorm_welford_grid(const LayerNormParams& p);
Dispatch layernorm_welford(gpu::Device& device, BufferBinding input, BufferBinding weight, BufferBinding bias,
                           BufferBinding output, const LayerNormParams& p);

// elementwise_vec4.wgsl (override OP): one vec4 per thread over `count` (Params: ElementwiseParams, the
// WGSL struct Params {count}). SiLU and GELU-tanh as silu.wgsl / gelu.wgsl; add / mul as add.wgsl / mul.wgsl.
Grid elementwise_vec4_grid(const ElementwiseParams& p);
Dispatch silu_vec4(gpu::Device& device, BufferBinding input, BufferBinding output, const ElementwiseParams& p);
Dispatch gelu_vec4(gpu::Device& device, BufferBinding input, BufferBinding output, const ElementwiseParams& p);
Dispatch add_vec4(gpu::Device& device, BufferBinding a, BufferBinding b, BufferBinding output,
                  const ElementwiseParams& p);
Dispatch mul_vec4(gpu::Device& device, BufferBinding a, BufferBinding b, BufferBinding output,
                  const ElementwiseParams& p);

// The WGSL uniform structs these kernels declare, byte for byte.
static_assert(sizeof(RmsNormParams) == 16 && sizeof(LayerNormParams) == 16 && sizeof(ElementwiseParams) == 4);

}  // namespace gerbil::kernels
