// GPTQ v1 int4 layers run as the graph runs them: repacked into Q4_G blocks (model/quant.h's gptq_group_blocks,
// kernels::pack_rows) and multiplied by kernels::linear on the test device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "checks/check_support.h"
#include "kernels/model.h"
#include "model/quant.h"
#include "support/device.h"

namespace gerbil::test {

// The layer's W^T [K, N], read out as x W^T with x the identity [K, K] (K rows: the prompt kernels, or the decode
// kernel for K <= 4). `scales`: f16 [G, N].
inline std::vector<float> gptq_layer_transposed(std::span<const std::byte> qweight, std::span<const std::byte> qzeros,
                                                std::span<const std::byte> scales, Int4Shape shape) {
  auto K = uint32_t(shape.in), N = uint32_t(shape.out);
  std::vector<std::byte> blocks(std::size_t(N) * K / 32 * kInt4GroupBlockBytes);
  gptq_group_blocks(qweight, qzeros, scales, shape, 0, N, blocks, "test layer");
  std::vector<uint32_t> packed(std::size_t(N) * kernels::weight_row_bytes(kernels::WeightType::Q4_G, K) / 4);
  kernels::pack_rows(kernels::WeightType::Q4_G, blocks, N, K, "test layer", std::as_writable_bytes(std::span(packed)));
  std::vector<float> identity(std::size_t(K) * K, 0.f);
  for (uint32_t k = 0; k < K; ++k) identity[std::size_t(k) * K + k] = 1.f;
  kernels::check::Buffers b{device()};
  auto& x = b.input("x", identity);
  auto& out = b.poisoned("out", std::size_t(K) * N);
  kernels::run(device(), kernels::linear(device(), {&x}, {&b.input("W", packed)}, {&x}, {&x}, {&out},
                                         {K, K, N, N, 0, 0, 0}, kernels::WeightType::Q4_G));
  return b.read(out, std::size_t(K) * N);
}

}  // namespace gerbil::test
