// ggml block formats: the production dequantizer (src/model/quant.cpp) against the float64 reference written
// from the format descriptions (src/reference/quant.cpp), bit for bit, on random blocks with extreme scales;
// the test quantizers' round trips; the type table and its errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>

#include "gerbil/error.h"
#include "model/dtype.h"
#include "model/quant.h"
#include "reference/quant.h"
#include "support/logits.h"
#include "support/paths.h"
#include "test_model_support.h"

namespace gerbil {
namespace {

using test::error_of;
using ::testing::HasSubstr;

// Where each block format keeps its f16 scales (byte offsets within a block).
struct BlockFormat {
  GgmlType type;
  std::vector<std::size_t> half_offsets;
};

const std::vector<BlockFormat> kBlockFormats = {
    {GgmlType::Q8_0, {0}},    {GgmlType::Q4_0, {0}},    {GgmlType::Q4_1, {0, 2}},   {GgmlType::Q5_0, {0}},
    {GgmlType::Q5_1, {0, 2}}, {GgmlType::Q4_K, {0, 2}}, {GgmlType::Q5_K, {0, 2}}, {GgmlType::Q6_K, {208}},
    {GgmlType::Q3_K, {108}},  {GgmlType::Q2_K, {80, 82}}, {GgmlType::IQ4_NL, {0}},  {GgmlType::IQ4_XS, {0}},
    {GgmlType::IQ3_XXS, {0}}, {GgmlType::IQ3_S, {0}},
};

// f16 scales the blocks are made with: the largest finite (+-65504), subnormals (smallest, largest,
// negative), zeros of both signs, one, and ordinary values.
constexpr uint16_t kExtremeHalves[] = {0x7bff, 0xfbff, 0x0001, 0x03ff, 0x8001, 0x0000, 0x8000, 0x3c00, 0x2e66, 0xb800};

// Random bytes, then every f16 field set to a scale drawn from kExtremeHalves or a random finite f16.
// Block 0 has its other bytes set to 0, 1, 2, ... so that every nibble and byte value appears.
std::vector<uint8_t> random_blocks(const BlockFormat& format, std::size_t count, std::mt19937& rng) {
  const GgmlTypeInfo& info = ggml_type_info(format.type);
  std::vector<uint8_t> bytes(count * info.block_bytes);
  for (uint8_t& b : bytes) b = uint8_t(rng());
  for (std::size_t i = 0; i < info.block_bytes; ++i) bytes[i] = uint8_t(i * 37 + 11);
  for (std::size_t block = 0; block < count; ++block) {
    for (std::size_t offset : format.half_offsets) {
      uint16_t half = rng() % 3 == 0 ? uint16_t(rng() & 0xfbff)  // exponent < 31: finite
                                     : kExtremeHalves[rng() % std::size(kExtremeHalves)];
      bytes[block * info.block_bytes + offset] = uint8_t(half & 0xff);
      bytes[block * info.block_bytes + offset + 1] = uint8_t(half >> 8);
    }
  }
  return bytes;
}

TEST(Quant, DequantizationMatchesTheFloat64ReferenceBitForBit) {
  std::mt19937 rng(20261201);
  for (const BlockFormat& format : kBlockFormats) {
    const GgmlTypeInfo& info = ggml_type_info(format.type);
    const std::size_t blocks = 400;
    std::vector<uint8_t> bytes = random_blocks(format, blocks, rng);
    std::vector<float> got(blocks * info.block_size);
    dequantize(format.type, std::as_bytes(std::span(bytes)), got, "test tensor");
    std::vector<double> want = reference::dequantize_blocks(info.name, bytes);
    ASSERT_EQ(want.size(), got.size());
    std::size_t nonzero = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      float expected = float(want[i]);
      nonzero += expected != 0;
      if (std::isnan(expected)) {
        ASSERT_TRUE(std::isnan(got[i])) << info.name << " element " << i;
        continue;
      }
      ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(expected))
          << info.name << " block " << i / info.block_size << " element " << i % info.block_size << ": got "
          << got[i] << ", want " << want[i];
    }
    EXPECT_GT(nonzero, got.size() / 2) << info.name;  // the blocks exercise real values, not zeros
  }
}

// Against an implementation written apart from both: llama.cpp's gguf-py (numpy), whose values for random blocks
// of every type gerbil decodes tools/make_quant_vectors.py wrote to tests/data/quant. Equal bit for bit, but for
// the sign of a zero.
TEST(Quant, DequantizationMatchesGgufPyVectors) {
  for (const BlockFormat& format : kBlockFormats) {
    const GgmlTypeInfo& info = ggml_type_info(format.type);
    std::filesystem::path dir = test::project_root() / "tests" / "data" / "quant";
    std::string blocks = test::read_text(dir / (std::string(info.name) + ".blocks"));
    std::vector<float> want = test::read_f32(dir / (std::string(info.name) + ".f32"));
    ASSERT_EQ(blocks.size() / info.block_bytes * info.block_size, want.size()) << info.name;
    std::vector<float> got(want.size());
    dequantize(format.type, std::as_bytes(std::span(blocks.data(), blocks.size())), got, "vectors");
    size_t nonzero = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      nonzero += want[i] != 0;
      ASSERT_EQ(got[i], want[i]) << info.name << " block " << i / info.block_size << " element "
                                 << i % info.block_size;
    }
    EXPECT_GT(nonzero, got.size() / 2) << info.name;
  }
}

TEST(Quant, ReferenceKnownBlocks) {
  // Q8_0 with d = 0.5: quants -128, 127 give -64, 63.5.
  std::vector<uint8_t> q8(34, 0);
  q8[1] = 0x38;  // f16 0.5
  q8[2] = 0x80;
  q8[3] = 0x7f;
  std::vector<double> v = reference::dequantize_blocks("Q8_0", q8);
  EXPECT_EQ(v[0], -64.0);
  EXPECT_EQ(v[1], 63.5);
  EXPECT_EQ(v[2], 0.0);
  // Q4_0 with d = 1: byte 0x9f holds element 0 = 15 - 8 = 7 and element 16 = 9 - 8 = 1.
  std::vector<uint8_t> q4(18, 0x88);
  q4[0] = 0x00;
  q4[1] = 0x3c;
  q4[2] = 0x9f;
  v = reference::dequantize_blocks("Q4_0", q4);
  EXPECT_EQ(v[0], 7.0);
  EXPECT_EQ(v[16], 1.0);
  EXPECT_EQ(v[1], 0.0);
  // Q3_K with d = 1: scale bytes zero make every scale 0 - 32 and codes zero (third bit clear) -4, so 128; scale 2
  // set to 33 (low nibble 1 in byte 2, top bits 2 in byte 10) is 1; element 33 (sub-block 2, shift 2, byte 1) with
  // low bits 3 and its third bit (hmask byte 1, bit 1) is 3 + 4 - 4 = 3; element 32 of the same sub-block is -4.
  std::vector<uint8_t> q3(110, 0);
  q3[109] = 0x3c;
  q3[96 + 2] = 0x01;
  q3[104 + 2] = 0x02;
  q3[32 + 1] = 0x0c;
  q3[1] = 0x02;
  v = reference::dequantize_blocks("Q3_K", q3);
  EXPECT_EQ(v[0], 128.0);
  EXPECT_EQ(v[33], 3.0);
  EXPECT_EQ(v[32], -4.0);
  EXPECT_EQ(v[160], 128.0);
  EXPECT_EQ(v[255], 128.0);
  EXPECT_EQ(reference::f16_value(0x0001), std::ldexp(1.0, -24));
  EXPECT_EQ(reference::f16_value(0xfbff), -65504.0);
}

TEST(Quant, FloatTypesConvert) {
  std::vector<float> values = {1.5f, -2.25f, 65504.0f, std::ldexp(1.0f, -24)};
  for (GgmlType type : {GgmlType::F32, GgmlType::F16, GgmlType::BF16}) {
    std::vector<std::byte> bytes = quantize(type, values);
    std::vector<float> back(values.size());
    dequantize(type, bytes, back, "t");
    for (std::size_t i = 0; i < values.size(); ++i) {
      float expected = type == GgmlType::BF16 ? bf16_to_f32(f32_to_bf16(values[i])) : values[i];
      EXPECT_EQ(back[i], expected) << ggml_type_name(type) << " " << i;
    }
  }
}

// Quantizing random weights and dequantizing gives each value back to within the format's resolution.
TEST(Quant, QuantizersRoundTripWithinTheirResolution) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  struct Case {
    GgmlType type;
    double bound;  // of |x - dequantized| over the block's largest |x|
  };
  // Q3_K: half a step of 1/4 of the largest |x| of 16, or a whole step where a sub-block's largest and smallest are
  // opposite and equal (its +4 is clamped to 3).
  for (Case c : {Case{GgmlType::Q8_0, 0.6 / 127}, Case{GgmlType::Q4_0, 1.01 / 8}, Case{GgmlType::Q4_K, 1.0 / 8},
                 Case{GgmlType::Q6_K, 1.0 / 32}, Case{GgmlType::Q3_K, 1.01 / 4}, Case{GgmlType::Q2_K, 1.0 / 3}}) {
    const GgmlTypeInfo& info = ggml_type_info(c.type);
    std::vector<float> values(info.block_size * 64);
    for (float& x : values) x = normal(rng) * 0.02f;
    values[5] = 0;  // an exact zero and a lone outlier
    values[info.block_size + 3] = 0.5f;
    std::vector<float> back(values.size());
    dequantize(c.type, quantize(c.type, values), back, "t");
    double worst = 0;
    for (std::size_t block = 0; block < values.size() / info.block_size; ++block) {
      double amax = 0;
      for (std::size_t i = 0; i < info.block_size; ++i) amax = std::max(amax, double(std::fabs(values[block * info.block_size + i])));
      for (std::size_t i = 0; i < info.block_size; ++i) {
        std::size_t k = block * info.block_size + i;
        worst = std::max(worst, std::fabs(double(values[k]) - back[k]) / amax);
      }
    }
    EXPECT_LE(worst, c.bound) << info.name;
    EXPECT_GT(worst, 0.0) << info.name;  // lossy formats do lose something: the round trip really ran
  }
}

TEST(Quant, AllZeroBlocksQuantizeToZero) {
  for (GgmlType type :
       {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q6_K}) {
    std::vector<float> zeros(256, 0.0f), back(256, 1.0f);
    dequantize(type, quantize(type, zeros), back, "t");
    for (float v : back) ASSERT_EQ(v, 0.0f) << ggml_type_name(type);
  }
}

TEST(Quant, TypeTable) {
  ASSERT_NE(find_ggml_type(12), nullptr);
  EXPECT_EQ(find_ggml_type(12)->name, "Q4_K");
  EXPECT_EQ(find_ggml_type(14)->block_bytes, 210u);
  EXPECT_EQ(find_ggml_type(30)->name, "BF16");
  EXPECT_EQ(find_ggml_type(4), nullptr);  // Q4_2, retired
  EXPECT_EQ(find_ggml_type(31), nullptr);
  EXPECT_EQ(find_ggml_type(1000), nullptr);
  EXPECT_EQ(ggml_byte_size(GgmlType::Q4_K, 512), 288u);
  EXPECT_THAT(error_of([] { ggml_byte_size(GgmlType::Q8_0, 33); }), HasSubstr("not a whole number of Q8_0 blocks"));
}

TEST(Quant, UnsupportedTypeNamesTensorAndType) {
  std::vector<std::byte> bytes(136);
  std::vector<float> out(256);
  EXPECT_THAT(error_of([&] { dequantize(GgmlType::IQ2_XXS, std::span(bytes).first(66), out, "tensor \"blk.0.attn_q.weight\""); }),
              AllOf(HasSubstr("blk.0.attn_q.weight"), HasSubstr("IQ2_XXS"), HasSubstr("not supported")));
  EXPECT_THAT(error_of([&] { dequantize(GgmlType::Q8_0, std::span(bytes).first(30), std::span(out).first(32), "x"); }),
              HasSubstr("do not hold 32 elements"));
  EXPECT_THAT(error_of([] { quantize(GgmlType::Q5_K, std::vector<float>(256)); }), HasSubstr("no quantizer for ggml type Q5_K"));
}

}  // namespace
}  // namespace gerbil
