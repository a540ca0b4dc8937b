// AWQ checkpoints on the GPU, as GPTQ's Q4_G blocks after the load-time repacking: the GPTQ fixture rewritten
// as an AWQ folder matches the fixture's transformers logits (float64) within the GPTQ fixture's bound, and a
// random AWQ layer with zero points of 0 (repacked with negated scales) runs exactly. Act-order GPTQ checkpoints
// (groups scattered over the inputs), requantized to Q8_0 at load, match their own weights dequantized.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "graph/model.h"
#include "model/quant.h"
#include "model/safetensors.h"
#include "reference/model.h"
#include "support/awq_fixture.h"
#include "support/device.h"
#include "support/int4_layer.h"
#include "support/logits.h"
#include "support/paths.h"
#include "test_model_support.h"

namespace gerbil::graph {
namespace {

using test::argmax;
using test::device;
using test::relative_error;

constexpr double kGptqBound = 1e-3;  // test_graph_fixtures' bound for the GPTQ fixture (f16 tensors)

void expect_rows_match(const std::vector<float>& got, const std::vector<float>& want, std::size_t vocab,
                       const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t t = 0; t < want.size() / vocab; ++t) {
    std::span<const float> g(got.data() + t * vocab, vocab), w(want.data() + t * vocab, vocab);
    EXPECT_LT(relative_error(g, w), kGptqBound) << what << ": position " << t;
    EXPECT_EQ(argmax(g), argmax(w)) << what << ": argmax at position " << t;
  }
}

TEST(AwqModel, MatchesTheTransformersLogitsOfTheSameWeights) {
  GERBIL_REQUIRE_FIXTURES();
  std::filesystem::path fixture = test::fixtures_dir() / "qwen2-tiny-gptq-int4";
  test::ScratchDir dir;
  test::write_awq_fixture(dir.path());
  ModelFiles files = ModelFiles::open(dir.path());
  ASSERT_EQ(files.config().gptq->format, Int4Format::Awq);
  Model model(device(), files, ModelOptions{.context = 64});
  auto ids = nlohmann::json::parse(test::read_text(fixture / "ref" / "input_ids.json")).get<std::vector<int32_t>>();
  auto want = test::read_f32(fixture / "ref" / "logits.f32");
  std::size_t vocab = std::size_t(files.config().vocab_size);

  expect_rows_match(model.forward(ids, true), want, vocab, "prefill");  // tiled products

  model.reset();  // the second half one token at a time: matrix-vector products
  const std::size_t split = ids.size() / 2;
  auto got = model.forward(std::span(ids).first(split), true);
  for (std::size_t t = split; t < ids.size(); ++t) {
    auto row = model.forward(std::span(ids).subspan(t, 1), true);
    got.insert(got.end(), row.begin(), row.end());
  }
  expect_rows_match(got, want, vocab, "decode");
}

// With x = the identity, out = W^T: every weight of a random AWQ layer, mirrored groups included, must
// come out of its Q4_G blocks as AWQ's s * (q - z), exactly (an f16 times a small integer is exact in f32).
TEST(AwqModel, RepackedLayerWithZeroPointsOfZeroRunsExactly) {
  uint64_t seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937_64 random(seed);
  const uint32_t K = 96, N = 32, group = 32, G = K / group;
  std::uniform_int_distribution<int> nibble(0, 15);
  std::vector<uint8_t> q(K * N), z(G * N);
  for (auto& v : q) v = uint8_t(nibble(random));
  for (auto& v : z) v = uint8_t(nibble(random) % 3);  // a third of the zeros 0
  std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
  std::vector<uint16_t> scales(G * N);
  for (auto& s : scales) s = f32_to_f16(scale(random));
  std::vector<uint32_t> qweight = test::pack_awq(q, K, N), qzeros = test::pack_awq(z, G, N);
  GptqInt4 gptq = repack_awq_gemm(std::as_bytes(std::span(qweight)), std::as_bytes(std::span(qzeros)),
                                  std::as_bytes(std::span(scales)), DType::F16, {K, N, group}, "layer");
  auto transposed = test::gptq_layer_transposed(std::as_bytes(std::span(gptq.qweight)),
                                                std::as_bytes(std::span(gptq.qzeros)), gptq.scales, {K, N, group});
  int mismatches = 0;
  for (uint32_t k = 0; k < K; ++k)
    for (uint32_t n = 0; n < N; ++n) {
      float want = f16_to_f32(scales[(k / group) * N + n]) * float(int(q[k * N + n]) - int(z[(k / group) * N + n]));
      if (transposed[std::size_t(k) * N + n] != want && mismatches++ < 5)
        ADD_FAILURE() << "W[k " << k << ", n " << n << "] = " << transposed[std::size_t(k) * N + n] << ", AWQ gives "
                      << want;
    }
  EXPECT_EQ(mismatches, 0);
}

// The GPTQ fixture made act-order: each layer's inputs dealt to its groups by a shuffle (g_idx[k] = shuffled[k] /
// group size, as AutoGPTQ's desc_act leaves them), qweight, zeros and scales unchanged; but k_proj keeps its groups
// in order, so that the fused q|k|v holds both kinds of rows (Q8_0, int4 blocks, Q8_0).
void write_act_order_fixture(const std::filesystem::path& dir, std::vector<std::vector<int32_t>>& kept) {
  test::copy_fixture(
      "qwen2-tiny-gptq-int4", dir,
      [&](std::vector<TensorSource>& sources) {
        std::mt19937 shuffle(7);
        for (TensorSource& source : sources) {
          if (!source.name.ends_with(".g_idx") || source.name.ends_with("k_proj.g_idx")) continue;
          std::vector<int32_t>& g_idx = kept.emplace_back(std::size_t(source.shape[0]));
          std::iota(g_idx.begin(), g_idx.end(), 0);
          std::shuffle(g_idx.begin(), g_idx.end(), shuffle);
          for (int32_t& g : g_idx) g /= 32;  // the fixture's group size
          source = tensor_from_bytes(source.name, DType::I32, source.shape, std::as_bytes(std::span(g_idx)));
        }
      },
      [](nlohmann::json& config) { config["quantization_config"]["desc_act"] = true; });
}

// The act-order checkpoint in DIR with every int4 layer dequantized in float64 (reference::dequantize_gptq with its
// g_idx) and stored in f32 as `.weight`, into F32_DIR.
void write_dequantized(const std::filesystem::path& dir, const std::filesystem::path& f32_dir,
                       std::vector<std::vector<float>>& kept) {
  Safetensors act = Safetensors::open(dir / "model.safetensors");
  std::vector<TensorSource> sources;
  for (const auto& [name, view] : act.tensors()) {
    if (name.ends_with(".qzeros") || name.ends_with(".scales") || name.ends_with(".g_idx")) continue;
    if (!name.ends_with(".qweight")) {
      sources.push_back(tensor_from_bytes(name, view.dtype, view.shape, view.bytes));
      continue;
    }
    std::string base = name.substr(0, name.size() - std::string(".qweight").size());
    const TensorView &scales = act.at(base + ".scales"), &g_idx = act.at(base + ".g_idx");
    std::size_t K = std::size_t(view.shape[0]) * 8, N = std::size_t(view.shape[1]);
    std::vector<double> scale_values(std::size_t(scales.numel()));
    for (std::size_t i = 0; i < scale_values.size(); ++i) {
      uint16_t bits;
      std::memcpy(&bits, scales.bytes.data() + 2 * i, 2);
      scale_values[i] = f16_to_f32(bits);
    }
    std::vector<int32_t> groups(K);
    std::memcpy(groups.data(), g_idx.bytes.data(), 4 * K);
    auto W = reference::dequantize_gptq(test::words_of(view), test::words_of(act.at(base + ".qzeros")), scale_values,
                                        K, N, 32, groups);
    std::vector<float>& stored = kept.emplace_back(W.begin(), W.end());
    sources.push_back(tensor_from_bytes(base + ".weight", DType::F32, {int64_t(N), int64_t(K)},
                                        std::as_bytes(std::span(stored))));
  }
  nlohmann::json config = nlohmann::json::parse(test::read_text(dir / "config.json"));
  config.erase("quantization_config");
  test::write_json_file(f32_dir / "config.json", config);
  write_safetensors(f32_dir / "model.safetensors", sources);
}

// Prefill (tiled products) and one-token steps (matrix-vector products) of an act-order checkpoint against the same
// weights dequantized: stored in f16 (--weights f16) within the f16 fixtures' bound with every argmax kept, and
// requantized to Q8_0 (the default) within the q8 bound of test_graph_fixtures' q8 KV cache. On this model, whose
// logits are sensitive (q/k scales as large as the fixtures'), Q8_0 lands at 1.0e-2 to 1.5e-2 and flips an argmax
// whose margin is small: the memory it saves has that price, and f16 is there to avoid it.
class GptqActOrder : public ::testing::TestWithParam<WeightPolicy> {};

TEST_P(GptqActOrder, MatchesItsWeightsDequantized) {
  GERBIL_REQUIRE_FIXTURES();
  const bool f16 = GetParam() == WeightPolicy::F16;
  const double bound = f16 ? 1e-3 : 2e-2;
  test::ScratchDir act_dir, f32_dir;
  std::vector<std::vector<int32_t>> g_idx;
  std::vector<std::vector<float>> weights;
  write_act_order_fixture(act_dir.path(), g_idx);
  write_dequantized(act_dir.path(), f32_dir.path(), weights);
  ModelFiles act = ModelFiles::open(act_dir.path()), f32 = ModelFiles::open(f32_dir.path());
  ASSERT_TRUE(act.weights().get(0, Role::Q).gptq->act_order);
  ASSERT_FALSE(act.weights().get(0, Role::K).gptq->act_order);
  auto ids = nlohmann::json::parse(test::read_text(test::fixtures_dir() / "qwen2-tiny-gptq-int4" / "ref" / "input_ids.json"))
                 .get<std::vector<int32_t>>();
  std::size_t vocab = std::size_t(act.config().vocab_size);
  Model reference(device(), f32, ModelOptions{.context = 64});
  auto want = reference.forward(ids, true);

  Model model(device(), act, ModelOptions{.context = 64, .weights = GetParam()});
  auto check = [&](const std::vector<float>& got, const char* what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (std::size_t t = 0; t < want.size() / vocab; ++t) {
      std::span<const float> g(got.data() + t * vocab, vocab), w(want.data() + t * vocab, vocab);
      EXPECT_LT(relative_error(g, w), bound) << what << ": position " << t;
      if (f16) {
        EXPECT_EQ(argmax(g), argmax(w)) << what << ": argmax at position " << t;
      }
    }
  };
  check(model.forward(ids, true), "prefill");
  model.reset();
  auto got = model.forward(std::span(ids).first(ids.size() / 2), true);
  for (std::size_t t = ids.size() / 2; t < ids.size(); ++t) {
    auto row = model.forward(std::span(ids).subspan(t, 1), true);
    got.insert(got.end(), row.begin(), row.end());
  }
  check(got, "decode");
}

INSTANTIATE_TEST_SUITE_P(Policies, GptqActOrder, ::testing::Values(WeightPolicy::Checkpoint, WeightPolicy::F16),
                         [](const auto& info) { return info.param == WeightPolicy::F16 ? "f16" : "q8_0"; });

}  // namespace
}  // namespace gerbil::graph
