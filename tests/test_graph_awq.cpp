// AWQ checkpoints on the GPU, as GPTQ's Q4_G blocks after the load-time repacking: the GPTQ fixture rewritten
// as an AWQ folder matches the fixture's transformers logits (float64) within the GPTQ fixture's bound, and a
// random AWQ layer with zero points of 0 (repacked with negated scales) runs exactly.
#include <random>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "graph/model.h"
#include "model/quant.h"
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

}  // namespace
}  // namespace gerbil::graph
