// AWQ (AutoAWQ GEMM) int4 checkpoints: the repacking into GPTQ's layout against hand-written words and
// against AWQ's own dequantisation of random layers; the quantization_config fields gerbil refuses; and
// the GPTQ fixture rewritten as AWQ, loaded into exactly the fixture's GPTQ tensors, with bad shapes refused.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include <fmt/format.h>

#include "gerbil/error.h"
#include "model/config.h"
#include "model/quant.h"
#include "model/weights.h"
#include "reference/model.h"
#include "reference/quant.h"
#include "support/awq_fixture.h"
#include "test_model_support.h"

namespace gerbil {
namespace {

using nlohmann::json;
using test::error_of;
using test::ScratchDir;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr uint16_t kF16One = 0x3C00, kF16MinusOne = 0xBC00;

std::span<const std::byte> bytes_of(const auto& values) { return std::as_bytes(std::span(values)); }

std::vector<uint16_t> f16_words(std::span<const std::byte> bytes) {
  std::vector<uint16_t> words(bytes.size() / 2);
  std::memcpy(words.data(), bytes.data(), bytes.size());
  return words;
}

// One word per row of an 8 x 8 layer with a single group of 8.
GptqInt4 repack_8x8(const std::vector<uint32_t>& qweight, uint32_t qzeros) {
  std::vector<uint32_t> zeros{qzeros};
  std::vector<uint16_t> scales(8, kF16One);
  return repack_awq_gemm(bytes_of(qweight), bytes_of(zeros), bytes_of(scales), DType::F16, {8, 8, 8}, "layer");
}

// Nibble i of an AWQ word holds column [0, 2, 4, 6, 1, 3, 5, 7][i]: written out by hand, 0x76543210 in row 0
// puts 0 in column 0, 1 in column 2, 2 in column 4, 3 in column 6, 4 in column 1, ... 7 in column 7. GPTQ
// keeps row 0 in the lowest nibble of each column's word. Zeros 0xFEDCBA98 give columns 0..7 the real zeros
// 8, 12, 9, 13, 10, 14, 11, 15, stored one less and in column order: nibbles 7, B, 8, C, 9, D, A, E.
TEST(AwqRepack, MovesEachNibbleToTheColumnTheInterleaveNames) {
  GptqInt4 gptq = repack_8x8({0x76543210u, 0, 0, 0, 0, 0, 0, 0}, 0xFEDCBA98u);
  EXPECT_THAT(gptq.qweight, ElementsAre(0u, 4u, 1u, 5u, 2u, 6u, 3u, 7u));
  EXPECT_THAT(gptq.qzeros, ElementsAre(0xEAD9C8B7u));
  EXPECT_THAT(f16_words(gptq.scales), ::testing::Each(kF16One));
}

// Rows are the K index: AWQ row k lands in nibble k % 8 of GPTQ's word k / 8.
TEST(AwqRepack, StacksRowsIntoTheNibblesOfOneWord) {
  std::vector<uint32_t> rows(8);
  for (uint32_t k = 0; k < 8; ++k) rows[k] = (k + 1) << 4;  // nibble 1 = column 2, value k + 1
  GptqInt4 gptq = repack_8x8(rows, 0x11111111u);             // real zeros 1: stored 0
  EXPECT_THAT(gptq.qweight, ElementsAre(0u, 0u, 0x87654321u, 0u, 0u, 0u, 0u, 0u));
  EXPECT_THAT(gptq.qzeros, ElementsAre(0u));
}

// AWQ's zero 0 cannot be stored as GPTQ's zero - 1: column 0 (nibble 0 of 0x11111110) is mirrored, its
// quants 15 - q (row 0's 3 becomes C, the other rows' 0 become F), its stored zero 14, its scale -1.
TEST(AwqRepack, MirrorsAZeroOfZero) {
  GptqInt4 gptq = repack_8x8({0x3u, 0, 0, 0, 0, 0, 0, 0}, 0x11111110u);
  EXPECT_THAT(gptq.qweight, ElementsAre(0xFFFFFFFCu, 0u, 0u, 0u, 0u, 0u, 0u, 0u));
  EXPECT_THAT(gptq.qzeros, ElementsAre(0xEu));
  EXPECT_THAT(f16_words(gptq.scales), ElementsAre(kF16MinusOne, kF16One, kF16One, kF16One, kF16One, kF16One,
                                                  kF16One, kF16One));
}

struct RandomLayer {
  int64_t K, N, group;
  DType scale_dtype;
};

// Random quants, zeros (0 included) and scales of both signs, packed the AWQ way by the test's own packer;
// the GPTQ dequantisation of the repacked layer equals AWQ's W = s * (q - z) exactly.
TEST(AwqRepack, DequantisesLikeAwqOnRandomLayers) {
  uint64_t seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937_64 random(seed);
  for (RandomLayer layer : {RandomLayer{64, 32, 16, DType::F16}, RandomLayer{32, 40, 32, DType::BF16},
                            RandomLayer{48, 16, 8, DType::F32}}) {
    auto [K, N, group, dtype] = layer;
    SCOPED_TRACE(::testing::Message() << "K " << K << " N " << N << " group " << group << " "
                                      << dtype_name(dtype));
    int64_t G = K / group;
    std::uniform_int_distribution<int> nibble(0, 15);
    std::vector<uint8_t> q(std::size_t(K * N)), z(std::size_t(G * N));
    for (auto& v : q) v = uint8_t(nibble(random));
    for (auto& v : z) v = uint8_t(nibble(random));
    z[3] = 0;  // at least one mirrored group and column
    std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
    std::vector<float> scale_values(std::size_t(G * N));
    for (auto& s : scale_values) s = scale(random);
    std::vector<std::byte> scale_bytes(scale_values.size() * dtype_size(dtype));
    convert_from_f32(dtype, scale_values, scale_bytes);
    std::vector<float> scales(scale_values.size());  // as stored
    convert_to_f32(dtype, scale_bytes, scales);

    std::vector<uint32_t> qweight = test::pack_awq(q, K, N), qzeros = test::pack_awq(z, G, N);
    GptqInt4 gptq = repack_awq_gemm(bytes_of(qweight), bytes_of(qzeros), scale_bytes, dtype, {K, N, group}, "layer");

    std::vector<float> repacked_scales(scales.size());
    convert_to_f32(dtype, gptq.scales, repacked_scales);
    std::vector<double> W = reference::dequantize_gptq(
        gptq.qweight, gptq.qzeros, std::vector<double>(repacked_scales.begin(), repacked_scales.end()),
        std::size_t(K), std::size_t(N), std::size_t(group));
    int64_t mismatches = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) {
        int64_t g = k / group;
        double want = double(scales[std::size_t(g * N + n)]) *
                      (int(q[std::size_t(k * N + n)]) - int(z[std::size_t(g * N + n)]));
        if (W[std::size_t(n * K + k)] != want && mismatches++ < 5)
          ADD_FAILURE() << "W[k " << k << ", n " << n << "] = " << W[std::size_t(n * K + k)] << ", AWQ gives "
                        << want;
      }
    EXPECT_EQ(mismatches, 0);
  }
}

TEST(AwqRepack, RefusesSizesThatDoNotMatchTheShape) {
  std::vector<uint32_t> qweight(64 * 4), qzeros(2 * 4), wrong(5);
  std::vector<uint16_t> scales(2 * 32);
  auto repack = [&](std::span<const uint32_t> w, std::span<const uint32_t> z, std::span<const uint16_t> s,
                    Int4Shape shape, DType dtype = DType::F16) {
    return error_of([&] { repack_awq_gemm(bytes_of(w), bytes_of(z), bytes_of(s), dtype, shape, "L.qweight"); });
  };
  EXPECT_NO_THROW(repack_awq_gemm(bytes_of(qweight), bytes_of(qzeros), bytes_of(scales), DType::F16, {64, 32, 32},
                                  "L.qweight"));
  EXPECT_THAT(repack(wrong, qzeros, scales, {64, 32, 32}),
              AllOf(HasSubstr("L.qweight"), HasSubstr("AWQ qweight holds 20 bytes"), HasSubstr("I32 [64, 4]")));
  EXPECT_THAT(repack(qweight, wrong, scales, {64, 32, 32}),
              AllOf(HasSubstr("AWQ qzeros holds 20 bytes"), HasSubstr("I32 [2, 4]")));
  EXPECT_THAT(repack(qweight, qzeros, std::span(scales).first(10), {64, 32, 32}),
              AllOf(HasSubstr("AWQ scales holds 20 bytes"), HasSubstr("F16 [2, 32]")));
  EXPECT_THAT(repack(qweight, qzeros, scales, {64, 32, 12}), HasSubstr("group size 12"));
  EXPECT_THAT(repack(qweight, qzeros, scales, {64, 32, 48}), HasSubstr("multiple of the group size"));
  EXPECT_THAT(repack(qweight, qzeros, scales, {64, 30, 32}), HasSubstr("multiples of 8"));
  EXPECT_THAT(repack(qweight, qzeros, scales, {0, 32, 32}), HasSubstr("not a valid shape"));
  EXPECT_THAT(repack(qweight, qzeros, scales, {64, 32, 32}, DType::I16), HasSubstr("scales have dtype I16"));
}

// --- GPTQ groups as Q4_G blocks ----------------------------------------------------------------------

// Outputs 8..23 of a random GPTQ layer (groups of 64: two blocks each) cut into blocks: every element, read by
// the float64 reference of the block format, equals GPTQ's s * (q - (z + 1)).
// Groups of 32 and 64 become 32-element blocks (Q4_G), groups of 128 and 256 128-element ones (Q4_G128: one
// header per 128 weights).
TEST(GptqGroupBlocks, HoldEveryWeightOfTheirOutputs) {
  std::mt19937 rng(std::random_device{}());
  const uint32_t K = 512, N = 32, first = 8, count = 16;
  for (uint32_t group : {32u, 64u, 128u, 256u}) {
    SCOPED_TRACE(fmt::format("group size {}", group));
    const uint32_t G = K / group;
    std::vector<uint32_t> qweight(K / 8 * N), qzeros(G * N / 8);
    for (auto& w : qweight) w = rng();
    for (auto& w : qzeros) w = rng();
    std::vector<uint16_t> scales(G * N);
    for (auto& h : scales) h = f32_to_f16(float(int(rng() % 200) - 100) / 1024.0f);
    const uint64_t elements = int4_block_elements(group);
    EXPECT_EQ(elements, group < 128 ? 32u : 128u);
    std::vector<std::byte> blocks(count * K / elements * int4_block_bytes(elements));
    gptq_group_blocks(bytes_of(qweight), bytes_of(qzeros), bytes_of(scales), {K, N, group}, first, count, blocks,
                      "L");
    std::vector<double> scale_values;
    for (uint16_t h : scales) scale_values.push_back(reference::f16_value(h));
    auto W = reference::dequantize_gptq(qweight, qzeros, scale_values, K, N, group);  // [N, K]
    std::vector<uint8_t> block_bytes(blocks.size());
    std::memcpy(block_bytes.data(), blocks.data(), blocks.size());
    auto got = reference::dequantize_blocks(elements == 128 ? "Q4_G128" : "Q4_G", block_bytes);  // [count, K]
    ASSERT_EQ(got.size(), std::size_t(count) * K);
    for (uint32_t n = 0; n < count; ++n)
      for (uint32_t k = 0; k < K; ++k)
        ASSERT_EQ(got[std::size_t(n) * K + k], W[std::size_t(first + n) * K + k]) << "output " << first + n << " k " << k;
  }
}

TEST(GptqGroupBlocks, RefuseShapesOutsideWholeBlocks) {
  std::vector<uint32_t> qweight(64 / 8 * 16), qzeros(2 * 2);
  std::vector<uint16_t> scales(2 * 16);
  std::vector<std::byte> out(16 * 2 * int4_block_bytes(32));
  auto blocks = [&](Int4Shape shape, uint64_t first = 0, uint64_t count = 16) {
    return error_of([&] {
      gptq_group_blocks(bytes_of(qweight), bytes_of(qzeros), bytes_of(scales), shape, first, count, out, "L.qweight");
    });
  };
  EXPECT_THAT(blocks({64, 16, 16}), AllOf(HasSubstr("L.qweight"), HasSubstr("group size 16"), HasSubstr("32")));
  EXPECT_THAT(blocks({48, 16, 48}), HasSubstr("48 inputs"));
  EXPECT_THAT(blocks({64, 12, 32}), HasSubstr("12 outputs"));
  EXPECT_THAT(blocks({64, 16, 64}), HasSubstr("do not make K = 64, N = 16 in groups of 64"));
  EXPECT_THAT(blocks({64, 16, 32}, 8, 16), HasSubstr("outputs 8 to 24 of 16"));
  EXPECT_NO_THROW(
      gptq_group_blocks(bytes_of(qweight), bytes_of(qzeros), bytes_of(scales), {64, 16, 32}, 0, 16, out, "L"));
}

// --- quantization_config -----------------------------------------------------------------------------

ModelConfig parse_awq(const std::function<void(json&)>& edit) {
  json config = json::parse(test::read_text(test::fixtures_dir() / "qwen2-tiny" / "config.json"));
  config["quantization_config"] = test::awq_quantization_config();
  edit(config["quantization_config"]);
  return parse_config(config, "/models/awq/config.json");
}

TEST(AwqConfig, ReadsAutoAwqGemmSettings) {
  GERBIL_REQUIRE_FIXTURES();
  ModelConfig c = parse_awq([](json&) {});
  ASSERT_TRUE(c.gptq.has_value());
  EXPECT_EQ(c.gptq->format, Int4Format::Awq);
  EXPECT_EQ(c.gptq->bits, 4);
  EXPECT_EQ(c.gptq->group_size, 32);
  // TheBloke's spelling, AutoAWQ's quant_config.json names, and one group over the whole input.
  ModelConfig older = parse_awq([](json& q) {
    q = {{"quant_method", "awq"}, {"w_bit", 4}, {"q_group_size", -1}, {"zero_point", true}, {"version", "GEMM"}};
  });
  EXPECT_EQ(older.gptq->format, Int4Format::Awq);
  EXPECT_EQ(older.gptq->group_size, 0);
  EXPECT_EQ(load_config(test::fixtures_dir() / "qwen2-tiny-gptq-int4").gptq->format, Int4Format::Gptq);
}

// Older AutoAWQ folders keep their settings only in quant_config.json, without quant_method.
TEST(AwqConfig, ReadsQuantConfigJsonWhenConfigJsonHasNone) {
  GERBIL_REQUIRE_FIXTURES();
  ScratchDir dir;
  std::filesystem::copy_file(test::fixtures_dir() / "qwen2-tiny" / "config.json", dir / "config.json");
  test::write_json_file(dir / "quant_config.json",
                        {{"zero_point", true}, {"q_group_size", 32}, {"w_bit", 4}, {"version", "GEMM"}});
  ModelConfig c = load_config(dir.path());
  ASSERT_TRUE(c.gptq.has_value());
  EXPECT_EQ(c.gptq->format, Int4Format::Awq);
  EXPECT_EQ(c.gptq->group_size, 32);
  test::write_json_file(dir / "quant_config.json", {{"zero_point", true}, {"w_bit", 3}, {"version", "gemm"}});
  EXPECT_THAT(error_of([&] { load_config(dir.path()); }),
              AllOf(HasSubstr("quant_config.json"), HasSubstr("\"w_bit\""), HasSubstr("only 4-bit AWQ")));
}

TEST(AwqConfig, RefusesWhatItDoesNotRun) {
  GERBIL_REQUIRE_FIXTURES();
  struct Case {
    std::function<void(json&)> edit;
    std::vector<std::string> message;
  };
  const std::vector<Case> cases = {
      {[](json& q) { q["version"] = "gemv"; }, {"\"quantization_config.version\"", "gemv", "\"gemm\""}},
      {[](json& q) { q["version"] = "exllama"; }, {"\"quantization_config.version\"", "exllama"}},
      {[](json& q) { q["version"] = "marlin"; }, {"\"quantization_config.version\"", "marlin"}},
      {[](json& q) { q["bits"] = 8; }, {"\"quantization_config.bits\"", "is 8", "only 4-bit AWQ"}},
      {[](json& q) { q["zero_point"] = false; }, {"\"quantization_config.zero_point\"", "is false"}},
      {[](json& q) { q["backend"] = "llm-awq"; }, {"\"quantization_config.backend\"", "llm-awq"}},
      {[](json& q) { q["modules_to_not_convert"] = {"visual"}; },
       {"\"quantization_config.modules_to_not_convert\"", "visual"}},
      {[](json& q) { q["group_size"] = 0; }, {"\"quantization_config.group_size\"", "positive or -1"}},
  };
  for (const Case& c : cases) {
    std::string message = error_of([&] { parse_awq(c.edit); });
    SCOPED_TRACE(message);
    for (const std::string& part : c.message) EXPECT_THAT(message, HasSubstr(part));
  }
}

// --- loading an AWQ folder ---------------------------------------------------------------------------

// The GPTQ fixture rewritten as AWQ loads back into the fixture's own GPTQ tensors, bit for bit (its real
// zeros are 1..15, so nothing is mirrored).
TEST(AwqModelFiles, LoadsIntoTheGptqLayoutOfTheSameWeights) {
  GERBIL_REQUIRE_FIXTURES();
  ScratchDir dir;
  test::write_awq_fixture(dir.path());
  ModelFiles awq = ModelFiles::open(dir.path());
  ModelFiles gptq = ModelFiles::open(test::fixtures_dir() / "qwen2-tiny-gptq-int4");
  EXPECT_EQ(awq.config().gptq->format, Int4Format::Awq);
  int layers = 0;
  for (std::size_t layer = 0; layer < gptq.weights().layers.size(); ++layer)
    for (int r = int(Role::Q); r < int(Role::Count); ++r) {
      const RoleTensors& want = gptq.weights().layers[layer][std::size_t(r)];
      if (!want.gptq) continue;
      const RoleTensors& got = awq.weights().layers[layer][std::size_t(r)];
      SCOPED_TRACE(want.gptq->qweight.name);
      ASSERT_TRUE(got.gptq.has_value());
      EXPECT_EQ(got.gptq->group_size, want.gptq->group_size);
      EXPECT_EQ(got.gptq->qweight.shape, want.gptq->qweight.shape);
      EXPECT_EQ(test::words_of(got.gptq->qweight), test::words_of(want.gptq->qweight));
      EXPECT_EQ(test::words_of(got.gptq->qzeros), test::words_of(want.gptq->qzeros));
      EXPECT_EQ(f16_words(got.gptq->scales.bytes), f16_words(want.gptq->scales.bytes));
      EXPECT_TRUE(got.gptq->g_idx.bytes.empty());
      ++layers;
    }
  EXPECT_EQ(layers, 14);  // 2 layers of q, k, v, o, gate, up, down
  // A copy's views stay valid once the ModelFiles that repacked them is gone.
  auto original = std::make_unique<ModelFiles>(ModelFiles::open(dir.path()));
  ModelFiles copy = *original;
  original.reset();
  EXPECT_EQ(test::words_of(copy.weights().get(1, Role::Down).gptq->qweight),
            test::words_of(gptq.weights().get(1, Role::Down).gptq->qweight));
}

void replace(std::vector<TensorSource>& sources, const std::string& name, TensorSource replacement) {
  std::erase_if(sources, [&](const TensorSource& s) { return s.name == name; });
  sources.push_back(std::move(replacement));
}

TEST(AwqModelFiles, RefusesTensorsOfTheWrongShape) {
  GERBIL_REQUIRE_FIXTURES();
  const std::string down = "model.layers.1.mlp.down_proj";  // K 128, N 64, group 32
  struct Case {
    std::string tensor;
    std::vector<int64_t> shape;
    std::string wanted;
  };
  for (const Case& c : {Case{".qweight", {16, 64}, "[128, 8]"},  // GPTQ's layout
                        Case{".qzeros", {4, 64}, "[4, 8]"}, Case{".scales", {4, 8}, "[4, 64]"}}) {
    SCOPED_TRACE(c.tensor);
    ScratchDir dir;
    test::write_awq_fixture(dir.path(), [&](std::vector<TensorSource>& sources, test::AwqFromGptqFixture& awq) {
      std::size_t count = std::size_t(c.shape[0] * c.shape[1]);
      TensorSource wrong = c.tensor == ".scales"
                               ? awq.keep(down + c.tensor, DType::F16, c.shape, std::vector<std::byte>(2 * count))
                               : awq.keep(down + c.tensor, std::vector<uint32_t>(count), c.shape);
      replace(sources, down + c.tensor, std::move(wrong));
    });
    EXPECT_THAT(error_of([&] { ModelFiles::open(dir.path()); }),
                AllOf(HasSubstr("\"" + down + c.tensor + "\""), HasSubstr(c.wanted)));
  }

  ScratchDir stray;  // a GPTQ tensor left in an AWQ folder
  test::write_awq_fixture(stray.path(), [&](std::vector<TensorSource>& sources, test::AwqFromGptqFixture& awq) {
    sources.push_back(awq.keep(down + ".g_idx", std::vector<uint32_t>(128), {128}));
  });
  EXPECT_THAT(error_of([&] { ModelFiles::open(stray.path()); }),
              AllOf(HasSubstr("unexpected"), HasSubstr(down + ".g_idx")));

  ScratchDir group;
  test::write_awq_fixture(group.path(), {}, [](json& c) { c["quantization_config"]["group_size"] = 48; });
  EXPECT_THAT(error_of([&] { ModelFiles::open(group.path()); }),
              AllOf(HasSubstr("AWQ layer model.layers.0.self_attn.q_proj"), HasSubstr("group_size 48")));
}

}  // namespace
}  // namespace gerbil
