// AWQ checkpoints for tests, written from AutoAWQ's GEMM format (awq/modules/linear/gemm.py,
// WQLinear_GEMM.from_linear) rather than from gerbil's reader: int4 matrices packed in AWQ's interleaved
// order, and the GPTQ fixture rewritten as an AWQ folder with the same dequantised weights.
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/safetensors.h"
#include "test_model_support.h"

namespace gerbil::test {

// AutoAWQ's order_map: nibble i of a word (lowest bits first) holds column kAwqOrderMap[i] of its 8 columns.
inline constexpr int kAwqOrderMap[8] = {0, 2, 4, 6, 1, 3, 5, 7};

// Packs VALUES (row-major [rows, cols], each 0..15) along columns as AutoAWQ does: [rows, cols / 8] words.
inline std::vector<uint32_t> pack_awq(const std::vector<uint8_t>& values, int64_t rows, int64_t cols) {
  std::vector<uint32_t> words(std::size_t(rows * cols / 8), 0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t w = 0; w < cols / 8; ++w)
      for (int i = 0; i < 8; ++i)
        words[std::size_t(r * (cols / 8) + w)] |= uint32_t(values[std::size_t(r * cols + 8 * w + kAwqOrderMap[i])])
                                                  << (4 * i);
  return words;
}

// An int32 tensor's words (safetensors data may sit at any offset).
inline std::vector<uint32_t> words_of(const TensorView& view) {
  std::vector<uint32_t> words(view.bytes.size() / 4);
  std::memcpy(words.data(), view.bytes.data(), view.bytes.size());
  return words;
}

inline uint8_t nibble_of(uint32_t word, int64_t i) { return uint8_t((word >> (4 * i)) & 0xf); }

// The quantised layers of qwen2-tiny-gptq-int4 as AWQ GEMM tensors: q[k][n] and real zeros (GPTQ's stored
// zero + 1, fixtures README) repacked along N, scales as they are, no g_idx.
class AwqFromGptqFixture {
 public:
  // Rewrites SOURCES (the GPTQ fixture's tensors) in place; the new tensors' bytes live in this object.
  void convert(std::vector<TensorSource>& sources) {
    Safetensors gptq = Safetensors::open(fixtures_dir() / "qwen2-tiny-gptq-int4" / "model.safetensors");
    std::vector<TensorSource> out;
    for (TensorSource& source : sources) {
      const std::string& name = source.name;
      if (name.ends_with(".g_idx") || name.ends_with(".qzeros")) continue;  // qzeros: written with qweight
      if (!name.ends_with(".qweight")) {
        out.push_back(std::move(source));
        continue;
      }
      std::string base = name.substr(0, name.size() - std::string(".qweight").size());
      const TensorView& qweight = gptq.at(name);
      int64_t K = qweight.shape[0] * 8, N = qweight.shape[1], G = gptq.at(base + ".scales").shape[0];
      std::vector<uint32_t> gptq_q = words_of(qweight), gptq_z = words_of(gptq.at(base + ".qzeros"));
      std::vector<uint8_t> q(std::size_t(K * N)), z(std::size_t(G * N));
      for (int64_t k = 0; k < K; ++k)
        for (int64_t n = 0; n < N; ++n) q[std::size_t(k * N + n)] = nibble_of(gptq_q[std::size_t(k / 8 * N + n)], k % 8);
      for (int64_t g = 0; g < G; ++g)
        for (int64_t n = 0; n < N; ++n)
          z[std::size_t(g * N + n)] = uint8_t(nibble_of(gptq_z[std::size_t(g * (N / 8) + n / 8)], n % 8) + 1);
      out.push_back(keep(name, pack_awq(q, K, N), {K, N / 8}));
      out.push_back(keep(base + ".qzeros", pack_awq(z, G, N), {G, N / 8}));
    }
    sources = std::move(out);
  }

  // A tensor whose bytes this object keeps until the file is written.
  TensorSource keep(const std::string& name, DType dtype, std::vector<int64_t> shape, std::vector<std::byte> bytes) {
    kept_.push_back(std::move(bytes));
    return tensor_from_bytes(name, dtype, std::move(shape), kept_.back());
  }
  TensorSource keep(const std::string& name, const std::vector<uint32_t>& words, std::vector<int64_t> shape) {
    auto bytes = std::as_bytes(std::span(words));
    return keep(name, DType::I32, std::move(shape), {bytes.begin(), bytes.end()});
  }

 private:
  std::vector<std::vector<std::byte>> kept_;  // moving the outer vector leaves each buffer where it is
};

// AutoAWQ's quantization_config for the fixture's group size.
inline nlohmann::json awq_quantization_config() {
  return {{"quant_method", "awq"}, {"bits", 4},          {"group_size", 32},
          {"zero_point", true},    {"version", "gemm"}, {"modules_to_not_convert", nullptr}};
}

// Writes qwen2-tiny-gptq-int4 into DIR as an AWQ GEMM checkpoint; EDIT_TENSORS and EDIT_CONFIG then make
// bad inputs out of it.
inline void write_awq_fixture(const std::filesystem::path& dir,
                              const std::function<void(std::vector<TensorSource>&, AwqFromGptqFixture&)>&
                                  edit_tensors = {},
                              const std::function<void(nlohmann::json&)>& edit_config = {}) {
  AwqFromGptqFixture awq;
  copy_fixture(
      "qwen2-tiny-gptq-int4", dir,
      [&](std::vector<TensorSource>& sources) {
        awq.convert(sources);
        if (edit_tensors) edit_tensors(sources, awq);
      },
      [&](nlohmann::json& config) {
        config["quantization_config"] = awq_quantization_config();
        if (edit_config) edit_config(config);
      });
}

}  // namespace gerbil::test
