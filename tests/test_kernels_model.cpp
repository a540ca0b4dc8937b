// The model kernels (kernels/model.h) against their float64 references (reference/model.h) on fresh random
// inputs, GPTQ decoding on the real int4 fixture, the dispatch grids, and the dispatchers' shape checks.
#include <cmath>
#include <cstring>
#include <fstream>
#include <random>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gerbil/error.h"
#include "checks/check_support.h"
#include "kernels/model.h"
#include "kernels/tuning.h"
#include "reference/model.h"
#include "support/kernel_checks.h"
#include "support/paths.h"
#include "support/device.h"
#include "support/int4_layer.h"

namespace gerbil::kernels {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::ThrowsMessage;

using test::device;
using test::kH200;

class ModelKernel : public ::testing::TestWithParam<std::string> {};

TEST_P(ModelKernel, MatchesFloat64Reference) {
  test::expect_check_passes(device(), model_kernel_checks(test::cpu_adapter(device())), GetParam());
}

INSTANTIATE_TEST_SUITE_P(All, ModelKernel,
                         ::testing::Values("embed", "linear", "linear_f16", "linear_int4", "gated_act",
                                           "qkv_rope_store", "flash_attention", "argmax", "sample", "linear_fused",
                                           "linear_qkv_rope"));

// The same checks on a device without subgroups, for the kernels whose fast paths need them: decoding then
// runs linear.wgsl's workgroup-memory matrix-vector path instead of linear_matvec_sg.wgsl, and per-query
// attention flash_attention.wgsl (one key per thread) instead of flash_attention_sg.wgsl, split mode
// included; both paths must meet the bound.
TEST(ModelKernels, FallbacksWithoutSubgroups) {
  gpu::Device plain({.allow_subgroups = false});
  ASSERT_FALSE(plain.features().subgroups);
  uint64_t seed = std::random_device{}();
  int checks = 0;
  for (const auto& check : model_kernel_checks(true)) {
    if (check.kernel != "linear" && check.kernel != "flash_attention") continue;
    ++checks;
    SCOPED_TRACE(check.kernel + ", seed " + std::to_string(seed));
    for (const auto& result : run_check(plain, check, seed))
      EXPECT_TRUE(result.passed()) << result.shape << ": relative error " << result.relative_error;
  }
  EXPECT_EQ(checks, 2);
}

// On lavapipe (one resident tile) linear_rows.wgsl takes 4 or 2 columns a thread; with an H200's tuning the same
// checks take 1 or 2 (the narrow products of linear_check's batched decode steps).
TEST(ModelKernels, LinearRowsAtEveryColumnCount) {
  gpu::Device h200;
  h200.set_tuning(kH200);
  test::expect_check_passes(h200, model_kernel_checks(test::cpu_adapter(h200)), "linear");
}

// On lavapipe (one resident tile) flash_attention_block.wgsl takes 4 rows per thread wherever they fit its 32 KiB
// of workgroup memory; with an H200's tuning the check's short prompts take 2 rows per thread, and its prompt
// chunks deep in a long cache split their keys (lavapipe's one resident workgroup never asks for a split: this is
// where the split mode of f32 and f16 caches is checked; q8's in test_kernels_kv_q8).
TEST(ModelKernels, FlashBlocksAtEveryBlocking) {
  gpu::Device h200;
  h200.set_tuning(kH200);
  test::expect_check_passes(h200, model_kernel_checks(test::cpu_adapter(h200)), "flash_attention");
}

// flash_attention_block.wgsl's key tiles by cache type (f32, f16, q8), in lavapipe's 32 KiB of workgroup memory:
// - it stages a K / V tile as cache words, at most 32 a thread: at head_dim 144 a 32-key tile is 36 f32 words a
//   thread, 18 f16 and 9 q8 ones, so an f32 cache takes 16-key tiles where f16 and q8 take 32 (2 rows a thread:
//   with an H200's tuning these prompts' blocks are too few for 4);
// - an f16 cache's tile stays in its words, half the bytes of f32 values, so at head_dim 128 a 64-key tile (4 keys
//   a thread) fits beside 2 rows a thread (30.0 KiB), while f32 and q8 keep 32 keys, and so do heads under 128
//   dims (kFlashFourKeysMinHeadDim: slower there on an H100);
// - with lavapipe's own tuning (4 rows a thread) 4 x 4 needs 43.5 KiB, so f16 takes 4 x 2 (31.3 KiB) where f32
//   values and q8's f32 tile take 4 x 1.
TEST(ModelKernels, FlashBlockTilesByCacheType) {
  ASSERT_EQ(device().limits().maxComputeWorkgroupStorageSize, 32768u);
  gpu::Device h200;
  h200.set_tuning(kH200);
  auto tiles = [](const gpu::Device& d, uint32_t head_dim) {
    FlashAttentionParams p{64, 64, 4, 1, head_dim, 0, 0, 0};
    std::vector<uint32_t> keys;
    for (KvType kv : {KvType::F32, KvType::F16, KvType::Q8}) keys.push_back(flash_attention_key_tile(d, p, kv));
    return keys;
  };
  EXPECT_THAT(tiles(h200, 144), testing::ElementsAre(16u, 32u, 32u));
  EXPECT_THAT(tiles(h200, 128), testing::ElementsAre(32u, 64u, 32u));
  EXPECT_THAT(tiles(h200, 64), testing::ElementsAre(32u, 32u, 32u));
  EXPECT_THAT(tiles(device(), 128), testing::ElementsAre(16u, 32u, 16u));
}

// A requested attention blocking is kept where it fits (the float64 check runs such shapes); one the kernel cannot
// take is refused, naming the blocking and why.
TEST(ModelKernels, FlashBlockingRequestedIsKeptOrRefused) {
  ASSERT_EQ(device().limits().maxComputeWorkgroupStorageSize, 32768u);
  FlashAttentionParams p{64, 64, 4, 1, 64, 0, 0, 0};
  EXPECT_EQ(flash_attention_key_tile(device(), p, KvType::F16, {4, 4}), 64u);
  EXPECT_EQ(flash_attention_key_tile(device(), p, KvType::F32, {2, 1}), 16u);
  EXPECT_THAT([&] { flash_attention_key_tile(device(), p, KvType::F16, {3, 2}); },
              ThrowsMessage<Error>(AllOf(HasSubstr("blocking 3 x 2"), HasSubstr("must each be 1, 2 or 4"))));
  EXPECT_THAT([&] { flash_attention_key_tile(device(), p, KvType::F32, {4, 4}); },
              ThrowsMessage<Error>(AllOf(HasSubstr("blocking 4 x 4"), HasSubstr("more than the device's 32768"))));
  p.head_dim = 256;
  EXPECT_THAT([&] { flash_attention_key_tile(device(), p, KvType::F16, {1, 4}); },
              ThrowsMessage<Error>(HasSubstr("64 cache words a thread, more than the shader's 32")));
  p.T = 8;
  EXPECT_THAT([&] { flash_attention_key_tile(device(), p, KvType::F16, {1, 1}); },
              ThrowsMessage<Error>(HasSubstr("the block kernel runs from 16 queries, not 8")));
}

// f16 arithmetic is a choice for adapters with shader-f16: elsewhere the dispatcher refuses it, naming the
// feature, instead of compiling a shader the device cannot run; products the f16 kernel does not take
// (decoding, batched decode steps, K % 8 != 0) stay f32 and run anywhere.
TEST(ModelKernels, F16ArithmeticNeedsShaderF16) {
  gpu::Device plain({.allow_shader_f16 = false});
  ASSERT_FALSE(plain.features().shader_f16);
  gpu::Tuning one_tile = tuning(plain);  // the shapes below take the same kernels on any adapter
  one_tile.resident_tiles = 1;
  plain.set_tuning(one_tile);
  check::Buffers b{plain};
  auto& buffer = b.input("any", std::vector<float>(64 * 512, 0.5f));
  auto prompt = [&](uint32_t M, uint32_t K) {
    LinearParams p{M, K, 8, 8, 0, 0, 0};
    return linear_split_k(plain, {&buffer}, {&buffer}, {&buffer}, {&buffer}, {&buffer}, p, WeightType::F32,
                          {&buffer}, 0, Arithmetic::F16);
  };
  EXPECT_THAT([&] { prompt(kLinearRowsMax + 1, 64); },
              ThrowsMessage<Error>(AllOf(HasSubstr("linear_tiled_f16"), HasSubstr("shader-f16"))));
  EXPECT_EQ(prompt(16, 60).front().kernel, "linear");                      // K % 8 != 0: linear.wgsl, f32
  EXPECT_EQ(prompt(kLinearRowsMax, 64).front().kernel, "linear_rows");     // a batched decode step: f32
  // ... also of 17 to 64 rows in their own tiles (one tile of 64 slabs: two waves of shares on one resident tile)
  EXPECT_EQ(prompt(kLinearRowsMax + 4, 512).front().kernel, "linear_tiled_rows");
  EXPECT_THAT(prompt(4, 64).front().kernel, Not(HasSubstr("f16")));  // decoding: f32
}

TEST(ModelKernels, AreAllInTheSelftest) {
  std::vector<std::string> names;
  for (const auto& check : kernel_checks(true)) names.push_back(check.kernel);
  EXPECT_THAT(names, ::testing::IsSupersetOf({"embed", "linear", "linear_f16", "linear_int4", "gated_act",
                                              "qkv_rope_store", "flash_attention"}));
}

// --- GPTQ on the fixture ------------------------------------------------------------------------------

// Just enough of safetensors to read whole tensors: an 8-byte header length, a JSON header, the data.
class Safetensors {
 public:
  explicit Safetensors(const std::filesystem::path& path) {
    std::ifstream file(path, std::ios::binary);
    uint64_t header_size = 0;
    file.read(reinterpret_cast<char*>(&header_size), 8);
    std::string header(header_size, '\0');
    file.read(header.data(), std::streamsize(header_size));
    header_ = nlohmann::json::parse(header);
    data_.assign(std::istreambuf_iterator<char>(file), {});
    if (!file.eof() && !file) throw std::runtime_error("cannot read " + path.string());
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (auto& [name, _] : header_.items())
      if (name != "__metadata__") out.push_back(name);
    return out;
  }
  std::vector<uint64_t> shape(const std::string& name) const { return header_.at(name).at("shape"); }
  // The tensor's bytes as T values (a last partial value is zero-padded).
  template <typename T>
  std::vector<T> as(const std::string& name) const {
    auto offsets = header_.at(name).at("data_offsets");
    size_t begin = offsets[0], end = offsets[1];
    std::vector<T> out((end - begin + sizeof(T) - 1) / sizeof(T), T{});
    std::memcpy(out.data(), data_.data() + begin, end - begin);
    return out;
  }

 private:
  nlohmann::json header_;
  std::vector<char> data_;
};

// An IEEE half (no infinities or NaNs in the fixture's scales).
double f16_value(uint16_t half) {
  int exponent = (half >> 10) & 0x1F, mantissa = half & 0x3FF;
  double magnitude = exponent == 0 ? std::ldexp(mantissa, -24) : std::ldexp(1024 + mantissa, exponent - 25);
  return half & 0x8000 ? -magnitude : magnitude;
}

// Every GPTQ layer of qwen2-tiny-gptq-int4, repacked into Q4_G blocks and run with x = the identity so that
// out = W^T exactly, must equal the reference dequantisation, and stay within quantisation error (~8% relative)
// of the float32 weights of qwen2-tiny it was made from. A wrong zero-point convention (no "+1") gives ~29%, a
// wrong layout ~140%.
TEST(LinearInt4, DecodesTheFixtureWeights) {
  GERBIL_REQUIRE_FIXTURES();
  auto folder = test::fixtures_dir();
  GERBIL_REQUIRE_PATH(folder / "qwen2-tiny-gptq-int4" / "model.safetensors", "the GPTQ fixture");
  Safetensors gptq(folder / "qwen2-tiny-gptq-int4" / "model.safetensors");
  Safetensors original(folder / "qwen2-tiny" / "model.safetensors");
  int layers = 0;
  for (const auto& name : gptq.names()) {
    const std::string suffix = ".qweight";
    if (!name.ends_with(suffix)) continue;
    std::string base = name.substr(0, name.size() - suffix.size());
    SCOPED_TRACE(base);
    auto qweight_shape = gptq.shape(base + ".qweight");
    uint32_t K = uint32_t(qweight_shape[0] * 8), N = uint32_t(qweight_shape[1]);
    uint32_t group = K / uint32_t(gptq.shape(base + ".scales")[0]);
    auto qweight = gptq.as<uint32_t>(base + ".qweight");
    auto qzeros = gptq.as<uint32_t>(base + ".qzeros");
    auto scale_halves = gptq.as<uint16_t>(base + ".scales");
    auto transposed = test::gptq_layer_transposed(std::as_bytes(std::span(qweight)),
                                                  std::as_bytes(std::span(qzeros)),
                                                  std::as_bytes(std::span(scale_halves)), {K, N, group});  // [K, N]

    std::vector<double> scales;
    for (uint16_t half : scale_halves) scales.push_back(f16_value(half));
    auto W = reference::dequantize_gptq(qweight, qzeros, scales, K, N, group);
    auto weight = original.as<float>(base + ".weight");  // [N, K]
    ASSERT_EQ(weight.size(), W.size());
    double diff = 0, norm = 0, quantisation = 0;
    for (uint32_t n = 0; n < N; ++n) {
      for (uint32_t k = 0; k < K; ++k) {
        double gpu = transposed[size_t(k) * N + n], ref = W[size_t(n) * K + k];
        double f32 = weight[size_t(n) * K + k];
        diff += (gpu - ref) * (gpu - ref);
        quantisation += (gpu - f32) * (gpu - f32);
        norm += f32 * f32;
      }
    }
    EXPECT_EQ(diff, 0.0) << "the kernel's weights differ from the reference dequantisation";
    EXPECT_LT(std::sqrt(quantisation / norm), 0.12) << "dequantised weights are far from the original ones";
    ++layers;
  }
  EXPECT_EQ(layers, 14) << "2 layers of q, k, v, o, gate, up and down projections";
}

// --- grids --------------------------------------------------------------------------------------------

TEST(LinearGrid, MatrixVectorUpToFourRowsTilesBeyond) {
  // 8 columns per workgroup up to M = 4: the LM head N = 151936 needs 18992 workgroups.
  EXPECT_EQ(linear_grid({1, 896, 151936, 151936, 0, 0, 0}, kH200.resident_tiles), (Grid{18992, 1, 1}));
  EXPECT_EQ(linear_grid({4, 896, 896, 896, 0, 0, 0}, kH200.resident_tiles), (Grid{112, 1, 1}));
  EXPECT_EQ(linear_grid({1, 4, 600000, 600000, 0, 0, 0}, kH200.resident_tiles), (Grid{65535, 2, 1}));  // folded
  // Tiles from M = 5: 64x64 when K % 8 != 0 (linear.wgsl); for K % 8 == 0 (linear_tiled.wgsl) the largest of
  // 128x128, 128x64, 64x128 that gives 128 workgroups, else 64x64.
  EXPECT_EQ(linear_grid({5, 896, 896, 896, 0, 0, 0}, kH200.resident_tiles), (Grid{14, 1, 1}));
  EXPECT_EQ(linear_grid({kLinearRowsMax + 1, 896, 896, 896, 0, 0, 0}, kH200.resident_tiles), (Grid{14, 1, 1}));
  EXPECT_EQ(linear_grid({512, 896, 896, 896, 0, 0, 0}, kH200.resident_tiles), (Grid{112, 1, 1}));       // 64x64
  EXPECT_EQ(linear_grid({2048, 896, 896, 896, 0, 0, 0}, kH200.resident_tiles), (Grid{224, 1, 1}));      // 128x64
  EXPECT_EQ(linear_grid({4033, 24, 131, 131, 0, 0, 0}, kH200.resident_tiles), (Grid{128, 1, 1}));       // 64x128
  EXPECT_EQ(linear_grid({512, 4096, 4096, 4096, 0, 0, 0}, kH200.resident_tiles), (Grid{128, 1, 1}));    // 128x128
  EXPECT_EQ(linear_grid({200, 896, 151936, 151936, 0, 0, 0}, kH200.resident_tiles), (Grid{2374, 1, 1}));
  EXPECT_EQ(linear_grid({200, 897, 151936, 151936, 0, 0, 0}, kH200.resident_tiles), (Grid{9496, 1, 1}));
}

// linear_rows.wgsl takes unfused products of M = kLinearRowsMin to kLinearRowsMax rows with K % 8 == 0 (block types:
// rows of whole blocks): 4 columns per thread up to 8 rows, then 2, in slices of 32 columns where they make the resident tiles'
// 264 workgroups (two per H200 SM), else of 16, else of 8, then fewer columns per thread (2, 1) where 8-column
// slices still make fewer than 132 (one per SM), and 4 / columns pieces a slice at a time.
TEST(LinearGrid, BatchedDecodeStepsTakeLinearRows) {
  device().set_tuning(kH200);
  for (WeightType type : {WeightType::F32, WeightType::F16, WeightType::BF16}) {
    EXPECT_TRUE(use_linear_rows(device(), {kMatvecRows + 1, 64, 8, 8, 0, 0, 0}, type));
    EXPECT_TRUE(use_linear_rows(device(), {kLinearRowsMax, 64, 8, 8, 0, 0, 0}, type));
    EXPECT_FALSE(use_linear_rows(device(), {1, 4096, 28672, 28672, 0, 0, 0}, type));  // decoding: matrix-vector
    EXPECT_FALSE(use_linear_rows(device(), {kLinearRowsMax + 1, 64, 8, 8, 0, 0, 0}, type));  // a prompt: tiles
    EXPECT_FALSE(use_linear_rows(device(), {8, 60, 8, 8, 0, 0, 0}, type));                   // K % 8 != 0: linear.wgsl
  }
  for (WeightType type : {WeightType::Q8_0, WeightType::Q4_0, WeightType::Q5_1, WeightType::Q6_K}) {
    EXPECT_TRUE(use_linear_rows(device(), {kMatvecRows + 1, 256, 8, 8, 0, 0, 0}, type));
    EXPECT_TRUE(use_linear_rows(device(), {kLinearRowsMax, 4096, 14336, 14336, 0, 0, 0}, type));
    EXPECT_FALSE(use_linear_rows(device(), {1, 4096, 28672, 28672, 0, 0, 0}, type));  // decoding: matrix-vector
    EXPECT_FALSE(use_linear_rows(device(), {kLinearRowsMax + 1, 256, 8, 8, 0, 0, 0}, type));  // a prompt: tiles
  }
  EXPECT_FALSE(use_linear_rows(device(), {8, 64, 8, 8, 0, 0, 0}, WeightType::Q4_K));  // not whole blocks: refused
  // linear_rows.wgsl fuses a gate but no norm: a product that fuses a norm is never its own.
  EXPECT_TRUE(use_linear_rows(device(), {kLinearRowsMax, 64, 8, 8, 0, 0, 0, 1}, WeightType::F16));
  EXPECT_FALSE(use_linear_rows(device(), {kLinearRowsMax, 64, 8, 8, 0, 0, 0, 0, kNormWeighted}, WeightType::F16));
  EXPECT_FALSE(use_linear_rows(device(), {kLinearRowsMax, 64, 8, 8, 0, 0, 0, 0, 0, 0, 0, 1}, WeightType::F16));
  // From kLinearRowsMin to kMatvecRows rows, products of at least 24 KiB of weights per resident workgroup
  // (1,056 x 24 KiB = 24.75 MiB here): Llama-3-8B's o (32 MiB of f16), not Qwen2.5-0.5B's gate_up (17 MiB);
  // f32 weights count their 4 bytes, K-quants (at kMatvecRows rows only) their packed rows; formats of 32-element
  // blocks stay on linear_q_matvec (Llama-3-8B's Q4_0 gate_up, 63 MiB, too). Those products fuse nothing in a
  // model's step; the others still do.
  constexpr WeightType F16 = WeightType::F16;
  for (uint32_t M = kLinearRowsMin; M <= kMatvecRows; ++M) {
    EXPECT_TRUE(use_linear_rows(device(), {M, 4096, 4096, 4096, 0, 0, 0}, F16));
    EXPECT_FALSE(use_linear_rows(device(), {M, 896, 9728, 9728, 0, 0, 0}, F16));
    EXPECT_TRUE(use_linear_rows(device(), {M, 896, 9728, 9728, 0, 0, 0}, WeightType::F32));
    EXPECT_TRUE(use_linear_rows(device(), {M, 8, 1584 * 1024, 1584 * 1024, 0, 0, 0}, F16));   // exactly 24 KiB
    EXPECT_FALSE(use_linear_rows(device(), {M, 8, 1584 * 1024 - 1, 1584 * 1024, 0, 0, 0}, F16));  // a row short
    EXPECT_FALSE(use_linear_rows(device(), {M, 4096, 28672, 28672, 0, 0, 0}, WeightType::Q4_0));
    EXPECT_FALSE(use_linear_rows(device(), {M, 4096, 28672, 28672, 0, 0, 0}, WeightType::Q8_0));
    EXPECT_EQ(use_linear_rows(device(), {M, 4096, 28672, 28672, 0, 0, 0}, WeightType::Q6_K), M == kMatvecRows);
    // K-quants at kMatvecRows rows: 24 KiB of 256-element rows, 1,056 x 24,576 / 144 bytes of Q4_K = 180,224 rows.
    EXPECT_EQ(use_linear_rows(device(), {M, 256, 180224, 180224, 0, 0, 0}, WeightType::Q4_K), M == kMatvecRows);
    EXPECT_FALSE(use_linear_rows(device(), {M, 256, 180223, 180224, 0, 0, 0}, WeightType::Q4_K));
  }
  if (linear_can_fuse(device(), 1, 4096, F16)) {
    EXPECT_TRUE(linear_fuses(device(), 1, 4096, 4096, F16));
    EXPECT_TRUE(linear_can_fuse(device(), kMatvecRows, 4096, F16));
    EXPECT_FALSE(linear_fuses(device(), kMatvecRows, 4096, 4096, F16));
    EXPECT_FALSE(linear_fuses(device(), kLinearRowsMin, 4096, 4096, F16));
    EXPECT_TRUE(linear_fuses(device(), kMatvecRows, 896, 9728, F16));
  }
  EXPECT_EQ(linear_rows_blocking(device(), kLinearRowsMin, 9728, F16).columns, 4u);
  EXPECT_EQ(linear_rows_blocking(device(), 8, 9728, F16).columns, 4u);
  EXPECT_EQ(linear_rows_blocking(device(), 8, 9728, F16).unroll, 1u);
  EXPECT_EQ(linear_rows_blocking(device(), 9, 9728, F16).columns, 2u);
  EXPECT_EQ(linear_rows_blocking(device(), kLinearRowsMax, 9728, F16).columns, 2u);
  EXPECT_EQ(linear_rows_blocking(device(), kLinearRowsMax, 9728, F16).unroll, 2u);
  // Qwen2.5-0.5B's o and down: 28 workgroups of 4 columns a thread, 56 of 2, 112 of 1 (4 pieces at a time).
  EXPECT_EQ(linear_rows_blocking(device(), 5, 896, F16).columns, 1u);
  EXPECT_EQ(linear_rows_blocking(device(), 5, 896, F16).unroll, 4u);
  EXPECT_EQ(linear_rows_blocking(device(), kLinearRowsMax, 896, F16).columns, 1u);
  EXPECT_EQ(linear_rows_grid(device(), {5, 896, 896, 896, 0, 0, 0}, F16), (Grid{112, 1, 1}));      // 8-column slices
  EXPECT_EQ(linear_rows_grid(device(), {16, 4096, 4096, 4096, 0, 0, 0}, F16), (Grid{256, 1, 1}));  // Llama's o: 8
  EXPECT_EQ(linear_rows_grid(device(), {9, 4096, 4096, 4096, 0, 0, 0}, F16), (Grid{256, 1, 1}));
  EXPECT_EQ(linear_rows_blocking(device(), 8, 4096, F16).columns, 2u);  // 128 workgroups of 4 columns, 256 of 2
  EXPECT_EQ(linear_rows_grid(device(), {8, 4096, 4096, 4096, 0, 0, 0}, F16), (Grid{256, 1, 1}));
  // Slices of 8 columns, however many workgroups that makes (Llama's gate_up: 1,792 of 2 columns a thread).
  EXPECT_EQ(linear_rows_grid(device(), {16, 4096, 28672, 28672, 0, 0, 0}, F16), (Grid{1792, 1, 1}));
  EXPECT_EQ(linear_rows_grid(device(), {8, 4096, 20000, 20000, 0, 0, 0}, F16), (Grid{625, 1, 1}));
  EXPECT_EQ(linear_rows_blocking(device(), 8, 20000, F16).lanes, 8u);
  // Block rows take one piece (a chunk's 16 bytes of quants) a column at a time, whatever the columns.
  for (WeightType type : {WeightType::Q4_0, WeightType::Q8_0, WeightType::Q4_K, WeightType::Q6_K}) {
    EXPECT_EQ(linear_rows_blocking(device(), kLinearRowsMax, 896, type).columns, 1u);
    EXPECT_EQ(linear_rows_blocking(device(), kLinearRowsMax, 896, type).unroll, 1u);
    EXPECT_EQ(linear_rows_blocking(device(), kLinearRowsMax, 28672, type).unroll, 1u);
  }
  // A requested blocking is kept; one the kernel cannot take is refused, naming the field.
  RowsBlocking asked = linear_rows_blocking(device(), 8, 4096, F16, {1, 32, 2});
  EXPECT_EQ(asked.columns, 1u);
  EXPECT_EQ(asked.lanes, 32u);
  EXPECT_EQ(asked.unroll, 2u);
  EXPECT_THAT([] { linear_rows_blocking(device(), 8, 4096, F16, {8, 0, 0}); },
              ThrowsMessage<Error>(HasSubstr("8 columns a thread")));
  EXPECT_THAT([] { linear_rows_blocking(device(), 8, 4096, F16, {0, 64, 0}); },
              ThrowsMessage<Error>(HasSubstr("slices of 64 columns")));
  EXPECT_THAT([] { linear_rows_blocking(device(), 8, 4096, F16, {0, 0, 3}); },
              ThrowsMessage<Error>(HasSubstr("3 pieces a slice")));
}

// A product of 17 to 64 rows (a batched decode step) takes tiles no taller than its rows rounded up to 64: a
// 128-row tile would be half padding. Here, from 33 rows, linear_tiled_rows.wgsl's 64 x 256 (its rule holds for
// Llama-3-8B's gate|up). From 65 rows the 128-row tiles come back. (The tile shows in the partial sums' scratch:
// two tile-sized slots per worker.)
TEST(LinearGrid, FewRowsTakeNoTallerTileThanTheirRows) {
  device().set_tuning(kH200);
  LinearParams gate_up{64, 4096, 28672, 28672, 0, 0, 0};
  EXPECT_EQ(linear_split_scratch_floats(device(), gate_up, 1), 2u * 64 * 256);
  gate_up.M = 33;
  EXPECT_EQ(linear_split_scratch_floats(device(), gate_up, 1), 2u * 64 * 256);
  gate_up.M = 65;
  EXPECT_EQ(linear_split_scratch_floats(device(), gate_up, 1), 2u * 128 * 128);
}

// --- shape errors -------------------------------------------------------------------------------------

struct ShapeErrors : ::testing::Test {
  gpu::Buffer buf = device().create_buffer("buf", 1 << 16);
  BufferBinding any{&buf};
  KvBlocks blocks{any, 1};  // one block of 256 tokens: pools of up to 64 elements a row fit `buf`
};

TEST_F(ShapeErrors, LinearChecksColumnsWeightTypeAndWeightBytes) {
  auto project = [&](LinearParams p, WeightType type, BufferBinding weight) {
    linear(device(), any, weight, any, any, any, p, type);
  };
  EXPECT_THAT([&] { project({2, 8, 8, 16, 10, 0, 0}, WeightType::F32, any); },
              ThrowsMessage<Error>(AllOf(HasSubstr("kernel 'linear'"), HasSubstr("[10, 18)"),
                                         HasSubstr("out_stride 16"))));
  EXPECT_THAT([&] { project({0, 8, 8, 8, 0, 0, 0}, WeightType::F32, any); },
              ThrowsMessage<Error>(HasSubstr("must be positive")));
  EXPECT_THAT([&] { project({1, 8, 8, 8, 0, 0, 0}, WeightType(19), any); },
              ThrowsMessage<Error>(HasSubstr("weight type 19")));
  // A block type's rows are whole blocks.
  EXPECT_THAT([&] { project({1, 8, 8, 8, 0, 0, 0}, WeightType::Q8_0, any); },
              ThrowsMessage<Error>(HasSubstr("rows of Q8_0 hold whole blocks of 32 elements, not 8")));
  // 3 x 3 f16 weights are 18 bytes: a 16-byte buffer is too small, an 18-byte one (allocated as 20) fits.
  auto small = device().create_buffer("W16", 16), exact = device().create_buffer("W18", 18);
  EXPECT_THAT([&] { project({1, 3, 3, 3, 0, 0, 0}, WeightType::F16, {&small}); },
              ThrowsMessage<Error>(AllOf(HasSubstr("operand 'W' needs 9 elements (18 bytes)"),
                                         HasSubstr("buffer 'W16' provides 16 bytes"))));
  EXPECT_NO_THROW(project({1, 3, 3, 3, 0, 0, 0}, WeightType::F16, {&exact}));
}

TEST_F(ShapeErrors, LinearGateActChecksPairsAndOutputColumns) {
  if (!linear_can_fuse(device(), 1, 64, WeightType::F32)) GTEST_SKIP() << "the adapter lacks subgroups";
  auto project = [&](LinearParams p, MatvecBlocking blocking = {}) {
    linear(device(), any, any, any, any, any, p, WeightType::F32, {}, blocking);
  };
  // 32 gate|up rows: 16 act(gate) * up columns.
  EXPECT_THAT([&] { project({1, 64, 32, 16, 0, 0, 0, 3}); },
              ThrowsMessage<Error>(AllOf(HasSubstr("kernel 'linear'"), HasSubstr("gate_act must be 0, 1"))));
  EXPECT_THAT([&] { project({1, 64, 31, 16, 0, 0, 0, 1}); }, ThrowsMessage<Error>(HasSubstr("an even count")));
  EXPECT_THAT([&] { project({1, 64, 32, 16, 0, 0, 1, 1}); }, ThrowsMessage<Error>(HasSubstr("takes no residual")));
  EXPECT_THAT([&] { project({1, 64, 32, 16, 4, 0, 0, 1}); }, ThrowsMessage<Error>(HasSubstr("[4, 20)")));
  EXPECT_THAT([&] { project({1, 64, 32, 16, 0, 0, 0, 2}, {4, 0}); },
              ThrowsMessage<Error>(HasSubstr("groups rows in 2 columns, 4 requested")));
  EXPECT_NO_THROW(project({1, 64, 32, 16, 0, 0, 0, 2}));
  // A batched step's linear_rows.wgsl gates (at least 2 columns a thread: a gate row and its up row); the tiled
  // prompt kernels have no gate epilogue.
  EXPECT_NO_THROW(project({5, 64, 32, 16, 0, 0, 0, 1}));
  EXPECT_THAT([&] { project({5, 64, 32, 16, 0, 0, 0, 1}, {1, 8, 1}); },
              ThrowsMessage<Error>(HasSubstr("a gated projection takes 2 or 4")));
  EXPECT_THAT([&] { project({kLinearRowsMax + 1, 64, 32, 16, 0, 0, 0, 1}); },
              ThrowsMessage<Error>(HasSubstr("needs the subgroup decode variant")));
}

TEST_F(ShapeErrors, LinearNormFusionsNeedTheirOperands) {
  if (!linear_can_fuse(device(), 1, 64, WeightType::F32)) GTEST_SKIP() << "the adapter lacks subgroups";
  auto other = device().create_buffer("other", 4096), prepared = device().create_buffer("prepared", 4096);
  auto project = [&](LinearParams p, LinearNorm norm) {
    linear(device(), any, any, any, any, any, p, WeightType::F32, norm);
  };
  LinearParams plain{1, 64, 32, 32, 0, 0, 0};
  auto with = [&](auto set) {
    LinearParams p = plain;
    set(p);
    return p;
  };
  EXPECT_THAT([&] { project(with([](auto& p) { p.norm_x = 3; }), {{&other}}); },
              ThrowsMessage<Error>(HasSubstr("norm_x must be 0, 1")));
  EXPECT_THAT([&] { project(with([](auto& p) { p.norm_x = kNormPrepared; }), {{&other}}); },
              ThrowsMessage<Error>(HasSubstr("norm_x 2 needs the raw x operand")));
  EXPECT_THAT([&] { project(with([](auto& p) { p.norm_out = 1; }), {{&other}}); },
              ThrowsMessage<Error>(HasSubstr("norm_out needs the next norm's weight and a prepared output")));
  EXPECT_THAT([&] { project(with([](auto& p) { p.norm_out = 2; }), {{&other}, {}, {&prepared}}); },
              ThrowsMessage<Error>(HasSubstr("norm_out must be 0 or 1")));
  EXPECT_THAT([&] { project(with([](auto& p) { p.norm_out = 1, p.norm_x = kNormWeighted; }), {{&other}, {}, {&prepared}}); },
              ThrowsMessage<Error>(HasSubstr("norm_out goes with a plain product")));
  // A prepared output too short for the [M, out_stride] it receives.
  auto short_prepared = device().create_buffer("short prepared", 64);
  EXPECT_THAT([&] { project(with([](auto& p) { p.norm_out = 1; }), {{&other}, {}, {&short_prepared}}); },
              ThrowsMessage<Error>(HasSubstr("operand 'prepared'")));
  EXPECT_NO_THROW(project(with([](auto& p) { p.norm_out = 1; }), {{&other}, {}, {&prepared}}));
  EXPECT_NO_THROW(project(with([](auto& p) { p.norm_x = kNormPrepared; }), {{}, {&other}, {}}));
  // Prompts fuse no norm.
  EXPECT_THAT([&] { project(with([](auto& p) { p.M = 5, p.norm_out = 1; }), {{&other}, {}, {&prepared}}); },
              ThrowsMessage<Error>(HasSubstr("needs the subgroup decode variant")));
}

TEST_F(ShapeErrors, LinearQkvRopeChecksHeadsCacheAndInputs) {
  if (!linear_can_fuse(device(), 1, 64, WeightType::F32)) GTEST_SKIP() << "the adapter lacks subgroups";
  auto project = [&](LinearParams p, QkvHeads heads) {
    linear_qkv_rope(device(), any, any, any, any, any, any, any, blocks, p, WeightType::F32, {}, heads);
  };
  // 2 q heads and 1 kv head of 8 dims: N = 32.
  EXPECT_THAT([&] { project({1, 64, 30, 30, 0, 0, 0}, {2, 1, 8, 8, 4}); },
              ThrowsMessage<Error>(AllOf(HasSubstr("kernel 'linear_qkv_rope'"), HasSubstr("N must be"))));
  EXPECT_THAT([&] { project({1, 64, 28, 28, 0, 0, 0}, {2, 1, 7, 0, 4}); },
              ThrowsMessage<Error>(HasSubstr("head_dim must be even")));
  EXPECT_THAT([&] { project({1, 64, 32, 32, 0, 0, 0}, {2, 1, 8, 10, 4}); },
              ThrowsMessage<Error>(HasSubstr("at most head_dim")));
  EXPECT_THAT([&] { project({2, 64, 32, 32, 0, 0, 0, 0, 0, 0, 3}, {2, 1, 8, 8, 4}); },
              ThrowsMessage<Error>(HasSubstr("positions 3..4 lie past the cache capacity of 4")));
  EXPECT_THAT([&] { project({1, 64, 32, 32, 0, 0, 1}, {2, 1, 8, 8, 4}); },
              ThrowsMessage<Error>(HasSubstr("no residual")));
  EXPECT_THAT([&] { project({1, 64, 32, 32, 0, 0, 0, 0, 1}, {2, 1, 8, 8, 4}); },
              ThrowsMessage<Error>(HasSubstr("norm_x 1 needs the norm's weight operand")));
  EXPECT_NO_THROW(project({1, 64, 32, 32, 0, 0, 0, 0, 0, 0, 3}, {2, 1, 8, 8, 4}));
  // A rotary pair's two rows are one group: a blocking of other than 2 columns is refused.
  EXPECT_THAT([&] {
    linear_qkv_rope(device(), any, any, any, any, any, any, any, blocks, {1, 64, 32, 32, 0, 0, 0}, WeightType::F32, {},
                    {2, 1, 8, 8, 4}, {4, 0});
  }, ThrowsMessage<Error>(AllOf(HasSubstr("kernel 'linear_qkv_rope'"),
                                HasSubstr("the rotary epilogue groups rows in 2 columns, 4 requested"))));
  // An f16 cache: groups of two pairs (4 columns), whole words of neighbouring dims: head_dim and rotary_dim
  // multiples of 4.
  EXPECT_THAT([&] {
    linear_qkv_rope(device(), any, any, any, any, any, any, any, blocks, {1, 64, 32, 32, 0, 0, 0}, WeightType::F32, {},
                    {2, 1, 8, 8, 4, KvType::F16}, {2, 0});
  }, ThrowsMessage<Error>(HasSubstr("the rotary epilogue groups rows in 4 columns, 2 requested")));
  EXPECT_THAT([&] { project({1, 64, 24, 24, 0, 0, 0}, {2, 1, 6, 6, 4, KvType::F16}); },
              ThrowsMessage<Error>(HasSubstr("an f16 cache needs head_dim and rotary_dim multiples of 4")));
  EXPECT_THAT([&] { project({1, 64, 32, 32, 0, 0, 0}, {2, 1, 8, 6, 4, KvType::F16}); },
              ThrowsMessage<Error>(HasSubstr("an f16 cache needs head_dim and rotary_dim multiples of 4")));
  EXPECT_NO_THROW(project({1, 64, 32, 32, 0, 0, 0}, {2, 1, 8, 4, 4, KvType::F16}));
}

// An f16 cache holds dims in pairs: an odd head_dim is refused by every kernel that stores or reads it.
TEST_F(ShapeErrors, F16CacheNeedsAnEvenHeadDim) {
  EXPECT_THAT([&] {
    qkv_rope_store(device(), any, any, any, any, any, any, any, blocks, {1, 2, 1, 7, 0, 0, 0, 0}, 4, KvType::F16);
  }, ThrowsMessage<Error>(AllOf(HasSubstr("kernel 'qkv_rope_store'"), HasSubstr("head_dim must be even, not 7"))));
  EXPECT_THAT([&] { flash_attention(device(), any, any, any, any, blocks, {1, 1, 2, 1, 7, 0, 0, 0}, KvType::F16); },
              ThrowsMessage<Error>(AllOf(HasSubstr("kernel 'flash_attention'"), HasSubstr("head_dim must be even"))));
  EXPECT_NO_THROW(flash_attention(device(), any, any, any, any, blocks, {1, 1, 2, 1, 8, 0, 0, 0}, KvType::F16));
}

TEST_F(ShapeErrors, MatvecBlockingRejectsEmptyShapesAndBlockingsOutOfRange) {
  EXPECT_THAT([] { linear_matvec_blocking(device(), 0, 8, WeightType::F16); },
              ThrowsMessage<Error>(AllOf(HasSubstr("kernel 'linear_matvec_sg' (K=0 N=8 type=f16)"),
                                         HasSubstr("must be positive"))));
  EXPECT_THAT([] { linear_matvec_blocking(device(), 64, 8, WeightType::F32, {5, 1}); },
              ThrowsMessage<Error>(HasSubstr("5 columns per group requested, at most 4")));
  EXPECT_THAT([] { linear_matvec_blocking(device(), 64, 8, WeightType::F32, {1, 3}); },
              ThrowsMessage<Error>(HasSubstr("split 3 must be a power of two")));
  EXPECT_THAT([] { linear_matvec_blocking(device(), 64, 8, WeightType::F32, {1, 1024}); },
              ThrowsMessage<Error>(HasSubstr("split 1024 must be a power of two of at most")));
  EXPECT_THAT([] { linear_matvec_blocking(device(), 64, 8, WeightType::F32, {1, 1, 9}); },
              ThrowsMessage<Error>(HasSubstr("9 loads in flight per lane requested, at most 8")));
}

// The dispatcher's choices follow the rules fitted to the H200 sweeps (docs/PERFORMANCE.md): a decode
// task of at most 16 KiB of weights and about 8192 tasks; prompt products shared out over one wave of workgroups
// where whole tiles leave the last wave less than 1 / 1.1 full.
TEST(DispatcherChoices, FollowTheMeasuredRules) {
  device().set_tuning(kH200);
  if (!linear_can_fuse(device(), 1, 4096, WeightType::F16)) GTEST_SKIP() << "the adapter lacks subgroups";
  // Splits are bounded by 256 / lanes: these expectations hold for subgroups of up to 32 lanes.
  if (device().adapter().subgroup_max_size > 32) GTEST_SKIP() << "subgroups wider than 32 lanes";
  auto blocking = [](uint32_t K, uint32_t N, MatvecBlocking requested = {}, bool norm = false) {
    MatvecBlocking b = linear_matvec_blocking(device(), K, N, WeightType::F16, requested, norm);
    return std::vector<uint32_t>{b.columns, b.split, b.unroll, b.workgroups};
  };
  // Rows of 8 KiB and more: split 8 (one column group per workgroup at 32 lanes), at most 1,056 workgroups.
  EXPECT_EQ(blocking(4096, 4096), (std::vector<uint32_t>{1, 8, 1, 1056}));         // Llama's o
  EXPECT_EQ(blocking(4096, 4096, {}, true), (std::vector<uint32_t>{1, 8, 1, 1056}));  // ... with a fused norm
  EXPECT_EQ(blocking(14336, 4096), (std::vector<uint32_t>{1, 8, 1, 1056}));        // its down
  EXPECT_EQ(blocking(4096, 128256), (std::vector<uint32_t>{2, 8, 1, 1056}));       // its LM head: pairs
  EXPECT_EQ(blocking(4096, 6144, {2}), (std::vector<uint32_t>{2, 8, 1, 1056}));    // its q|k|v pairs
  EXPECT_EQ(blocking(4864, 896), (std::vector<uint32_t>{1, 8, 1, 1056}));          // Qwen's down (896 units)
  EXPECT_EQ(blocking(4096, 28672, {2, 2}), (std::vector<uint32_t>{2, 2, 4, 0}));   // a split asked for: no cap
  // Shorter rows: tasks of at most 16 KiB, about 8192 of them, one workgroup per unit.
  EXPECT_EQ(blocking(2048, 4096), (std::vector<uint32_t>{1, 2, 1, 0}));    // 4096 rows, each in 2
  EXPECT_EQ(blocking(2048, 4096, {}, true), (std::vector<uint32_t>{1, 1, 1, 0}));  // ... a fused norm: whole
  EXPECT_EQ(blocking(896, 151936), (std::vector<uint32_t>{2, 1, 1, 0}));   // Qwen's LM head: pairs
  EXPECT_EQ(blocking(896, 9728, {2}), (std::vector<uint32_t>{2, 1, 1, 0}));  // its gate|up pairs: never split
  EXPECT_EQ(blocking(3072, 4096, {4}), (std::vector<uint32_t>{4, 2, 4, 0}));  // 24 KiB groups split: 4 loads
  // Block-quantized decode products: four columns a team, one chunk in flight, where that leaves half the
  // resident workgroups (528): Llama's gate|up (896 workgroups) and LM head; two columns, two chunks elsewhere.
  auto quant = [](uint32_t N) {
    MatvecBlocking b = linear_q_matvec_blocking(device(), N, WeightType::Q4_0, {});
    return std::vector<uint32_t>{b.columns, b.split, b.unroll};
  };
  EXPECT_EQ(quant(28672), (std::vector<uint32_t>{4, 32, 1}));   // Llama's gate|up
  EXPECT_EQ(quant(128256), (std::vector<uint32_t>{4, 32, 1}));  // its LM head
  EXPECT_EQ(quant(16896), (std::vector<uint32_t>{4, 32, 1}));   // 528 workgroups of 4 columns
  EXPECT_EQ(quant(16864), (std::vector<uint32_t>{2, 32, 2}));   // 527
  EXPECT_EQ(quant(6144), (std::vector<uint32_t>{2, 32, 2}));    // its q|k|v: 384 workgroups of 2 columns
  EXPECT_EQ(quant(4096), (std::vector<uint32_t>{2, 32, 2}));    // its o and down
  EXPECT_EQ(quant(9728), (std::vector<uint32_t>{2, 32, 2}));    // Qwen's gate|up
  EXPECT_EQ(quant(896), (std::vector<uint32_t>{2, 128, 2}));    // its o: teams of 128 until the grid has an SM each
  auto workers = [](uint32_t M, uint32_t K, uint32_t N) { return linear_split_workers(device(), {M, K, N, N, 0, 0, 0}); };
  EXPECT_EQ(workers(512, 4096, 6144), 264u);   // 192 tiles of 128 x 128: one wave of shares
  EXPECT_EQ(workers(512, 4096, 4096), 264u);   // 128
  EXPECT_EQ(workers(512, 896, 9728), 264u);    // 304: 1.2 waves
  EXPECT_EQ(workers(512, 4096, 28672), 264u);  // 896: 3.4 waves, the last 39 % full
  EXPECT_EQ(workers(512, 4096, 17920), 264u);  // 560: 2.1 waves
  EXPECT_EQ(workers(2048, 896, 9728), 0u);     // 1216: 4.6 waves, the last 61 % full: whole tiles
  EXPECT_EQ(workers(512, 64, 896), 0u);        // 112 tiles of 64 x 64, 8 slabs each: too short for shares
  EXPECT_EQ(workers(24, 1024, 64), 4u);        // one tile of 128 slabs: 4 shares of 32
  // Qwen's down projection: 28 tiles of 128 x 128, 608 slabs each, make a wave of shares, so the large tile is
  // taken (two 128 x 128 slots of partial sums per share) where whole tiles would be 112 of 64 x 64.
  EXPECT_EQ(workers(512, 4864, 896), 264u);
  EXPECT_EQ(linear_split_scratch_floats(device(), {512, 4864, 896, 896, 0, 0, 0}), 2u * 264 * 128 * 128);
  EXPECT_EQ(linear_grid({512, 4864, 896, 896, 0, 0, 0}, kH200.resident_tiles).x, 112u);  // linear(): whole tiles, 64 x 64
  EXPECT_EQ(linear_split_scratch_floats(device(), {512, 896, 896, 896, 0, 0, 0}), 2u * 264 * 64 * 64);  // K = 896: small
  // ... but not where the large tile would pad the rows (M = 50: 128 rows for 64) or make shorter shares than 64
  // slabs (Qwen's o at M = 2048: 112 tiles of 112 slabs), both measured slower.
  EXPECT_EQ(linear_split_scratch_floats(device(), {50, 4864, 896, 896, 0, 0, 0}), 2u * 264 * 64 * 64);
  EXPECT_EQ(linear_split_scratch_floats(device(), {2048, 896, 896, 896, 0, 0, 0}), 2u * 264 * 128 * 64);
}

// The model allocates linear_split_scratch_bound(device()) once for all its prompt products: every split the
// dispatcher can choose must fit.
TEST(LinearSplit, ScratchBoundCoversEveryProduct) {
  device().set_tuning(kH200);
  for (uint32_t M : {5u, 17u, 64u, 300u, 512u, 2048u})
    for (uint32_t N : {8u, 40u, 896u, 1152u, 4096u, 9728u, 151936u})
      for (uint32_t K : {64u, 256u, 896u, 4864u, 14336u, 67584u}) {
        LinearParams p{M, K, N, N, 0, 0, 0};
        EXPECT_LE(linear_split_workers(device(), p), 264u) << "M=" << M << " K=" << K << " N=" << N;
        EXPECT_LE(linear_split_scratch_floats(device(), p), linear_split_scratch_bound(device()))
            << "M=" << M << " K=" << K << " N=" << N;
      }
  EXPECT_EQ(linear_split_workers(device(), {2, 4096, 64, 64, 0, 0, 0}), 0u);   // decoding never splits
  EXPECT_EQ(linear_split_workers(device(), {20, 2048, 40, 40, 0, 0, 0}), 8u);  // one tile of 256 slabs: 8 shares
  EXPECT_EQ(linear_split_workers(device(), {20, 128, 40, 40, 0, 0, 0}), 0u);   // too short a K to split
  EXPECT_EQ(linear_split_workers(device(), {20, 2048, 40, 40, 0, 0, 0}, 5), 5u);   // requested
  // Requests are bounded by 128 MiB of partial sums (two 128 x 128 tiles per worker: 1,024 workers) and by
  // 4,096 workers (64 x 64 tiles), each named in the error.
  LinearParams large{512, 4096, 4096, 4096, 0, 0, 0};
  EXPECT_EQ(linear_split_workers(device(), large, 1024), 1024u);
  EXPECT_THAT([&] { linear_split_workers(device(), large, 1025); },
              ThrowsMessage<Error>(AllOf(HasSubstr("1025 split workers requested"), HasSubstr("128 MiB"))));
  LinearParams narrow{512, 4096, 256, 256, 0, 0, 0};  // 8 x 4 tiles of 64 x 64
  EXPECT_EQ(linear_split_workers(device(), narrow, 4096), 4096u);
  EXPECT_THAT([&] { linear_split_workers(device(), narrow, 4097); },
              ThrowsMessage<Error>(AllOf(HasSubstr("4097 split workers requested"), HasSubstr("4096 workgroups"))));
}

TEST(LinearSplit, RejectsShortScratchAndFusions) {
  device().set_tuning(kH200);
  LinearParams p{20, 2048, 40, 40, 0, 0, 0};  // one 64 x 64 tile: 8 workers, 2 slots of partial sums each
  ASSERT_EQ(linear_split_scratch_floats(device(), p), 2u * 8 * 64 * 64);
  auto x = device().create_buffer("x", 4ull * 20 * 2048), W = device().create_buffer("W", 2ull * 40 * 2048);
  auto out = device().create_buffer("out", 4ull * 20 * 40);
  auto short_scratch = device().create_buffer("scratch", 4ull * (2 * 8 * 64 * 64 - 1));
  EXPECT_THAT([&] { linear_split_k(device(), {&x}, {&W}, {&x}, {&x}, {&out}, p, WeightType::F16, {&short_scratch}); },
              ThrowsMessage<Error>(AllOf(HasSubstr("workers=8"), HasSubstr("operand 'partials'"))));
  LinearParams gated = p;
  gated.gate_act = 1;
  EXPECT_THAT([&] { linear_split_k(device(), {&x}, {&W}, {&x}, {&x}, {&out}, gated, WeightType::F16, {&short_scratch}); },
              ThrowsMessage<Error>(HasSubstr("fuse no norm or gate")));
  // A requested count of workers: at most one per slab (256 here), and never for decoding's matrix-vector rows.
  auto scratch = device().create_buffer("scratch", 4ull * 2 * 257 * 64 * 64);
  EXPECT_THAT([&] { linear_split_k(device(), {&x}, {&W}, {&x}, {&x}, {&out}, p, WeightType::F16, {&scratch}, 257); },
              ThrowsMessage<Error>(HasSubstr("257 split workers requested")));
  LinearParams decoding{2, 2048, 40, 40, 0, 0, 0};
  EXPECT_THAT([&] { linear_split_k(device(), {&x}, {&W}, {&x}, {&x}, {&out}, decoding, WeightType::F16, {&scratch}, 2); },
              ThrowsMessage<Error>(HasSubstr("splits M > 4 rows")));
  LinearParams batch{kLinearRowsMax, 2048, 40, 40, 0, 0, 0};
  EXPECT_THAT([&] { linear_split_k(device(), {&x}, {&W}, {&x}, {&x}, {&out}, batch, WeightType::F16, {&scratch}, 2); },
              ThrowsMessage<Error>(HasSubstr("linear_rows.wgsl, which shares nothing out")));
}

// A batched decode step runs linear_rows.wgsl whole, where the tiled kernel would share its one tile out: 16-bit
// and block-quantized weights alike.
TEST(LinearSplit, BatchedDecodeStepsShareNothingOut) {
  device().set_tuning(kH200);
  LinearParams p{kLinearRowsMax, 2048, 40, 40, 0, 0, 0};
  ASSERT_EQ(linear_split_workers(device(), p), 8u);  // the tiled kernel's choice
  auto x = device().create_buffer("x", 4ull * kLinearRowsMax * 2048);
  auto W = device().create_buffer("W", 2ull * 40 * 2048);  // f16 rows, longer than Q8_0 ones
  auto out = device().create_buffer("out", 4ull * kLinearRowsMax * 40);
  auto scratch = device().create_buffer("scratch", 4 * linear_split_scratch_floats(device(), p));
  auto rows = linear_split_k(device(), {&x}, {&W}, {&x}, {&x}, {&out}, p, WeightType::F16, {&scratch});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows.front().kernel, "linear_rows");
  auto blocks = linear_split_k(device(), {&x}, {&W}, {&x}, {&x}, {&out}, p, WeightType::Q8_0, {&scratch});
  ASSERT_EQ(blocks.size(), 1u);
  EXPECT_EQ(blocks.front().kernel, "linear_rows");
}

// Products of 17 to 64 rows take linear_tiled_rows.wgsl's tiles, of 32 x 256 up to 32 rows and 64 x 256 above,
// where their iterations make three quarters of a wave of shares of 32 slabs (an H200's 264 resident tiles: 6,336
// iterations), linear_tiled.wgsl's tiles where they make fewer and from 65 rows, and linear_rows.wgsl up to 16 rows. The
// scratch of the shares (two tile-sized slots each) shows the tile's rows.
TEST(LinearSplit, StepsOf17To64RowsTakeBatchTiles) {
  device().set_tuning(kH200);
  auto kernel = [](uint32_t M, uint32_t K, uint32_t N) {
    LinearParams p{M, K, N, N, 0, 0, 0};
    auto x = device().create_buffer("x", 4ull * M * K);
    auto W = device().create_buffer("W", 2ull * N * K);
    auto out = device().create_buffer("out", 4ull * M * N);
    auto scratch = device().create_buffer("scratch", 4 * std::max<uint64_t>(1, linear_split_scratch_floats(device(), p)));
    return linear_split_k(device(), {&x}, {&W}, {&x}, {&x}, {&out}, p, WeightType::F16, {&scratch}).front().kernel;
  };
  EXPECT_EQ(kernel(32, 3168, 4096), "linear_tiled_rows");  // 16 tiles of 396 slabs: 6,336 iterations
  EXPECT_EQ(kernel(kLinearRowsMax + 1, 3168, 4096), "linear_tiled_rows");
  EXPECT_EQ(kernel(33, 3168, 4096), "linear_tiled_rows");
  EXPECT_EQ(kernel(kBatchTileRows, 3168, 4096), "linear_tiled_rows");
  EXPECT_EQ(kernel(32, 3160, 4096), "linear_tiled");              // 6,320
  EXPECT_EQ(kernel(kBatchTileRows, 3160, 4096), "linear_tiled");
  EXPECT_EQ(kernel(kBatchTileRows, 896, 9728), "linear_tiled");   // Qwen2.5-0.5B's gate|up: 38 tiles of 112 slabs
  EXPECT_EQ(kernel(kBatchTileRows + 1, 3168, 4096), "linear_tiled");
  EXPECT_EQ(kernel(kLinearRowsMax, 3168, 4096), "linear_rows");
  auto tile_floats = [](uint32_t M) {
    LinearParams p{M, 3168, 4096, 4096, 0, 0, 0};
    return linear_split_scratch_floats(device(), p) / (2 * linear_split_workers(device(), p));
  };
  EXPECT_EQ(tile_floats(kLinearRowsMax + 1), 32u * 256);
  EXPECT_EQ(tile_floats(32), 32u * 256);
  EXPECT_EQ(tile_floats(33), 64u * 256);
  EXPECT_EQ(tile_floats(kBatchTileRows), 64u * 256);
  EXPECT_EQ(tile_floats(kBatchTileRows + 1), 128u * 64);  // linear_tiled.wgsl's
}

// Only a top-k below the count or a top-p below 1 is a cut for the levels after the first to narrow down; one
// cut needs fewer levels than both (GpuSampling.FlatRowsDrawTheHostSamplersTokens runs the worst cases with the
// levels these leave).
TEST(SampleLevels, OnlySettingsWithACutNeedTheLevelsAfterTheFirst) {
  SampleParams p{1000, 0, 0, 0, 1.0f, 0.f, 1.f};
  EXPECT_EQ(sample_levels(p), 1u);
  p.min_p = 0.1f, p.inv_temperature = 2.f, p.repetition_penalty = 1.3f;
  EXPECT_EQ(sample_levels(p), 1u);
  p.top_k = 1000;  // keeps every token
  EXPECT_EQ(sample_levels(p), 1u);
  p.top_k = 999;
  EXPECT_EQ(sample_levels(p), kSampleLevelsOneCut);
  p.top_p = 0.9f;
  EXPECT_EQ(sample_levels(p), kSampleLevels);
  p.top_k = 0, p.top_p = std::nextafter(1.0f, 0.0f);
  EXPECT_EQ(sample_levels(p), kSampleLevelsOneCut);
  p.top_k = 1000;  // no cut of its own
  EXPECT_EQ(sample_levels(p), kSampleLevelsOneCut);
}

// Every sampling setting out of range is an error naming it (write_sample_rows checks each row's settings with the
// same function before a step runs with them).
TEST(SampleParamsCheck, NamesEachSettingOutOfRange) {
  auto check = [](auto change) {
    SampleParams p{1000, 0, 20, 0, 0.9f, 0.f, 1.f};
    change(p);
    check_sample_params(p);
  };
  EXPECT_NO_THROW(check([](SampleParams&) {}));
  EXPECT_THAT([&] { check([](SampleParams& p) { p.count = 0; }); }, ThrowsMessage<Error>(HasSubstr("count must be 1..")));
  EXPECT_THAT([&] { check([](SampleParams& p) { p.count = kMaxSampleCount + 1; }); },
              ThrowsMessage<Error>(HasSubstr("count must be 1..524288")));
  EXPECT_NO_THROW(check([](SampleParams& p) { p.top_k = 100000; }));  // any top-k: past the count keeps all
  EXPECT_THAT([&] { check([](SampleParams& p) { p.top_p = 0; }); },
              ThrowsMessage<Error>(HasSubstr("top_p must be in (0, 1], got 0")));
  EXPECT_THAT([&] { check([](SampleParams& p) { p.min_p = 1.5f; }); },
              ThrowsMessage<Error>(HasSubstr("min_p must be in [0, 1], got 1.5")));
  EXPECT_THAT([&] { check([](SampleParams& p) { p.inv_temperature = INFINITY; }); },
              ThrowsMessage<Error>(HasSubstr("inv_temperature must be positive and finite")));
  EXPECT_THAT([&] { check([](SampleParams& p) { p.repetition_penalty = 0; }); },
              ThrowsMessage<Error>(HasSubstr("repetition_penalty positive (got 0, 0, 0)")));
  EXPECT_THAT([&] { check([](SampleParams& p) { p.frequency_penalty = NAN; }); },
              ThrowsMessage<Error>(HasSubstr("penalties must be finite")));
}

// The sampler's chain and its rows' settings are checked against the buffers before anything runs, each error
// naming what does not fit: a chain of no rows or of more rows than its scratch holds, a row with more logits than
// the chain, logits or counts past their buffers, a slot past next_ids, rows past the settings buffer, a setting
// out of range.
TEST_F(ShapeErrors, TheSamplerRefusesRowsOutsideItsBuffers) {
  constexpr uint32_t count = 3000;
  auto logits = device().create_buffer("logits", 4 * 2 * count);
  auto ids = device().create_buffer("ids", 4 * 2);
  auto scratch = device().create_buffer("scratch", 4 * 2 * sample_candidates_words(count));
  auto counts = device().create_buffer("counts", 4 * count);
  auto settings = device().create_buffer("rows", 2 * sizeof(SampleParams));
  const SampleBuffers b{{&logits}, {&ids}, {&ids}, {&scratch}, {&counts}, {&settings}};
  EXPECT_THAT([&] { sample(device(), b, count, 0); }, ThrowsMessage<Error>(HasSubstr("rows must be 1..65535")));
  EXPECT_THAT([&] { sample(device(), b, 0, 1); }, ThrowsMessage<Error>(HasSubstr("count must be 1..524288")));
  EXPECT_THAT([&] { sample(device(), b, count, 3); },
              ThrowsMessage<Error>(HasSubstr("operand 'candidates' needs")));

  const SampleParams row{count, 0, 20, 0, 0.9f, 0.f, 1.f};
  auto with = [&](auto change) {
    SampleParams p = row;
    change(p);
    return p;
  };
  auto write = [&](std::vector<SampleParams> rows) { write_sample_rows(device(), b, count, rows); };
  const SampleParams second = with([](SampleParams& p) { p.logits_offset = count, p.slot = 1; });
  EXPECT_NO_THROW(write({row, second}));
  EXPECT_THAT([&] { write({}); }, ThrowsMessage<Error>(HasSubstr("no rows to write")));
  EXPECT_THAT([&] { write({row, second, row}); },
              ThrowsMessage<Error>(HasSubstr("3 rows of 3000 logits do not fit its buffers (2 rows of settings")));
  EXPECT_THAT([&] { write({row, with([](SampleParams& p) { p.count = count + 1; })}); },
              ThrowsMessage<Error>(HasSubstr("row 1 (count=3001 slot=0 top_k=20 top_p=0.9 min_p=0 inv_temperature=1): "
                                             "more logits than the chain's 3000")));
  EXPECT_THAT([&] { write({with([](SampleParams& p) { p.logits_offset = count + 1; })}); },
              ThrowsMessage<Error>(HasSubstr("its logits end past the 6000 in the buffer")));
  EXPECT_THAT([&] { write({with([](SampleParams& p) { p.counts_offset = 1; })}); },
              ThrowsMessage<Error>(HasSubstr("counts_offset 1 ends past the 3000 counts in the buffer")));
  EXPECT_THAT([&] { write({with([](SampleParams& p) { p.slot = 2; })}); },
              ThrowsMessage<Error>(HasSubstr("slot 2 lies past next_ids or history")));
  EXPECT_THAT([&] { write({row, with([](SampleParams& p) { p.top_p = 0; })}); },
              ThrowsMessage<Error>(HasSubstr("top_p must be in (0, 1], got 0")));
}

// Per-query attention takes the subgroup kernel where it can, the portable one for other head sizes.
TEST_F(ShapeErrors, PerQueryAttentionPicksTheSubgroupKernelWhereItApplies) {
  if (!linear_can_fuse(device(), 1, 64, WeightType::F32)) GTEST_SKIP() << "the adapter lacks subgroups";
  gpu::Buffer pool = device().create_buffer("pool", 1 << 17);  // a block of 256 keys of head_dim 128
  auto kernel_for = [&](uint32_t head_dim) {
    FlashAttentionParams p{1, 8, 2, 1, head_dim, 7, 0, 0x3e000000u};  // scale 0.125
    return flash_attention(device(), any, {&pool}, {&pool}, any, blocks, p).kernel;
  };
  EXPECT_EQ(kernel_for(64), "flash_attention_sg");
  EXPECT_EQ(kernel_for(128), "flash_attention_sg");
  EXPECT_EQ(kernel_for(18), "flash_attention");  // rows that are not whole vec4s
}

// A prompt chunk's attention gets the split variant (query blocks, then the combine) once the capacity reaches
// 2,048 keys, and a step takes it from 2,048 keys on; a decode step past one 128-key chunk. The block kernel
// splits only where its blocks are fewer than a wave of the adapter's resident workgroups (an H200's 1,056).
TEST_F(ShapeErrors, PromptChunksSplitTheirKeysDeepInALongCache) {
  device().set_tuning(kH200);
  gpu::Buffer big = device().create_buffer("big", 8 << 20);
  BufferBinding b{&big};
  FlashAttentionParams p{40, 100, 14, 2, 64, 60, 0, 0x3e000000u};
  auto kernels_for = [&](uint32_t capacity) {
    std::vector<std::string> names;
    for (const Dispatch& d : flash_attention(device(), b, b, b, b, {b, 32}, p, b, capacity)) names.push_back(d.kernel);
    return names;
  };
  EXPECT_THAT(kernels_for(8192), ElementsAre("flash_attention_block", "flash_attention_combine"));
  EXPECT_THAT(kernels_for(2047), ElementsAre("flash_attention_block"));
  device().set_tuning({.resident_workgroups = 16, .resident_tiles = 4});  // the chunk's 18 blocks fill a wave
  EXPECT_THAT(kernels_for(8192), ElementsAre("flash_attention_block"));
  device().set_tuning(kH200);
  EXPECT_FALSE(flash_attention_split_serves(p, 2047));
  EXPECT_TRUE(flash_attention_split_serves(p, 2048));
  p.T = 1;
  EXPECT_FALSE(flash_attention_split_serves(p, 128));
  EXPECT_TRUE(flash_attention_split_serves(p, 129));
}

TEST_F(ShapeErrors, EmbedRejectsPositionsPastTheTable) {
  EmbedParams p{3, 8, 0, 10, 0x3f800000u, 2, 1};
  EXPECT_THAT([&] { embed(device(), any, any, any, any, p, WeightType::F32, 4); },
              ThrowsMessage<Error>(AllOf(HasSubstr("kernel 'embed'"), HasSubstr("positions 2..4"),
                                         HasSubstr("4 rows"))));
  EXPECT_NO_THROW(embed(device(), any, any, any, any, p, WeightType::F32, 5));
}

// Rows of whole vec4s take the vectorised gather, others the per-element one; the checks pass either way, so
// the choice itself is pinned here.
TEST_F(ShapeErrors, EmbedTakesTheVec4KernelForWholeVec4Rows) {
  auto kernel_for = [&](uint32_t D) {
    return embed(device(), any, any, any, any, {2, D, 0, 4, 0x3f800000u, 0, 0}, WeightType::F16, 0).kernel;
  };
  EXPECT_EQ(kernel_for(36), "embed_vec4");
  EXPECT_EQ(kernel_for(33), "embed");
}

TEST_F(ShapeErrors, GatedActRejectsUnknownActivations) {
  EXPECT_THAT([&] { gated_act(device(), any, any, {1, 8, 2}); },
              ThrowsMessage<Error>(HasSubstr("activation must be 0 (SiLU) or 1 (GELU-tanh)")));
}

TEST_F(ShapeErrors, QkvRopeStoreChecksHeadDimRotaryAndCapacity) {
  auto store = [&](QkvRopeParams p, uint32_t capacity) {
    qkv_rope_store(device(), any, any, any, any, any, any, any, blocks, p, capacity);
  };
  EXPECT_THAT([&] { store({1, 2, 1, 320, 64, 0, 0, 0}, 8); },
              ThrowsMessage<Error>(HasSubstr("head_dim must be at most 256")));
  EXPECT_THAT([&] { store({1, 2, 1, 16, 15, 0, 0, 0}, 8); },
              ThrowsMessage<Error>(HasSubstr("rotary_dim must be even")));
  EXPECT_THAT([&] { store({1, 2, 1, 16, 32, 0, 0, 0}, 8); },
              ThrowsMessage<Error>(HasSubstr("at most head_dim")));
  EXPECT_THAT([&] { store({3, 2, 1, 16, 16, 6, 0, 0}, 8); },
              ThrowsMessage<Error>(HasSubstr("positions 6..8 lie past the cache capacity of 8")));
  EXPECT_NO_THROW(store({2, 2, 1, 16, 16, 6, 0, 0}, 8));
}

TEST_F(ShapeErrors, FlashAttentionChecksKeysHeadsAndHeadDim) {
  auto attend = [&](FlashAttentionParams p) { flash_attention(device(), any, any, any, any, blocks, p); };
  EXPECT_THAT([&] { attend({2, 4, 4, 4, 16, 3, 0, 0}); }, ThrowsMessage<Error>(HasSubstr("only S=4 keys")));
  EXPECT_THAT([&] { attend({1, 4, 6, 4, 16, 0, 0, 0}); },
              ThrowsMessage<Error>(HasSubstr("multiple of kv_heads")));
  EXPECT_THAT([&] { attend({1, 4, 4, 4, 512, 0, 0, 0}); },
              ThrowsMessage<Error>(HasSubstr("head_dim must be in 1..256")));
  EXPECT_NO_THROW(attend({1, 4, 4, 4, 16, 3, 2, 0}));
}

// A batched argmax needs rows that do not overlap and at least one of them.
TEST_F(ShapeErrors, ArgmaxChecksRows) {
  auto pick = [&](ArgmaxParams p) { argmax(device(), any, any, any, any, p); };
  EXPECT_THAT([&] { pick({8, 0, 0, 0}); }, ThrowsMessage<Error>(HasSubstr("rows must be 1 to")));
  EXPECT_THAT([&] { pick({8, 0, 3, 7}); }, ThrowsMessage<Error>(HasSubstr("rows of 8 logits overlap at a stride of 7")));
  EXPECT_NO_THROW(pick({8, 0, 3, 8}));
  EXPECT_NO_THROW(pick({8, 0, 1, 0}));  // one row: no stride
}

}  // namespace
}  // namespace gerbil::kernels
