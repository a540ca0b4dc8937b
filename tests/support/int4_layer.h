// GPTQ v1 int4 layers run as the graph runs them: repacked into int4 group blocks (graph::pack_gptq_rows) and
// multiplied by kernels::linear on the test device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "checks/check_support.h"
#include "graph/gpu_weights.h"
#include "kernels/model.h"
#include "model/quant.h"
#include "support/device.h"

namespace gerbil::test {

// The layer's W^T [K, N], read out as x W^T with x the identity [K, K] (K rows: the prompt kernels, or the decode
// kernel for K <= 4). `scales`: f16 [G, N].
inline std::vector<float> gptq_layer_transposed(std::span<const std::byte> qweight, std::span<const std::byte> qzeros,
                                                std::span<const std::byte> scales, Int4Shape shape) {
  auto K = uint32_t(shape.in), N = uint32_t(shape.out);
  kernels::WeightType type = graph::gptq_block_type(shape);
  std::vector<uint32_t> packed(std::size_t(N) * kernels::weight_row_bytes(type, K) / 4);
  graph::pack_gptq_rows(qweight, qzeros, scales, shape, 0, N, std::as_writable_bytes(std::span(packed)), "test layer");
  std::vector<float> identity(std::size_t(K) * K, 0.f);
  for (uint32_t k = 0; k < K; ++k) identity[std::size_t(k) * K + k] = 1.f;
  kernels::check::Buffers b{device()};
  auto& x = b.input("x", identity);
  auto& out = b.poisoned("out", std::size_t(K) * N);
  kernels::run(device(), kernels::linear(device(), {&x}, {&b.input("W", packed)}, {&x}, {&x}, {&out},
                                         {K, K, N, N, 0, 0, 0}, type));
  return b.read(out, std::size_t(K) * N);
}

}  // namespace gerbil::test
