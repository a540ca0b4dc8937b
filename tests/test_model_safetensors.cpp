// Safetensors reading/writing and dtype conversions, against the fixture files and crafted bad files.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "gerbil/error.h"
#include "model/dtype.h"
#include "model/safetensors.h"
#include "test_model_support.h"

namespace gerbil {
namespace {

using test::error_of;
using test::floats_of;

using test::fixtures_dir;
using test::ScratchDir;
using test::write_raw_safetensors;
using ::testing::HasSubstr;

// --- conversions -----------------------------------------------------------------------------------

TEST(DType, NamesAndSizes) {
  DType dtype;
  ASSERT_TRUE(parse_dtype("BF16", dtype));
  EXPECT_EQ(dtype, DType::BF16);
  EXPECT_EQ(dtype_size(DType::BF16), 2u);
  EXPECT_EQ(dtype_size(DType::I32), 4u);
  EXPECT_EQ(dtype_name(DType::U8), "U8");
  EXPECT_FALSE(parse_dtype("F8_E4M3", dtype));
  EXPECT_FALSE(parse_dtype("f32", dtype));
}

TEST(DType, F16KnownValues) {
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xc000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(f16_to_f32(0x0400), std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_TRUE(std::isinf(f16_to_f32(0x7c00)));
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7e00)));
  EXPECT_EQ(std::bit_cast<uint32_t>(f16_to_f32(0x8000)), 0x80000000u);  // -0 keeps its sign
}

TEST(DType, F16RoundTripsEveryValue) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    float value = f16_to_f32(uint16_t(bits));
    if (std::isnan(value)) {
      EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(value)))) << bits;
      continue;
    }
    ASSERT_EQ(f32_to_f16(value), bits) << "f16 bits 0x" << std::hex << bits;
  }
}

TEST(DType, F32ToF16RoundsToNearestEven) {
  float one = 1.0f, ulp = std::ldexp(1.0f, -10);                       // f16 spacing at 1
  EXPECT_EQ(f32_to_f16(one + ulp / 2), 0x3c00);                        // tie, even stays
  EXPECT_EQ(f32_to_f16(one + ulp + ulp / 2), 0x3c02);                  // tie, odd rounds up
  EXPECT_EQ(f32_to_f16(std::nextafter(one + ulp / 2, 2.0f)), 0x3c01);  // above the tie
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7bff);                             // below the overflow threshold
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);                             // ties up to infinity
  EXPECT_EQ(f32_to_f16(1e10f), 0x7c00);
  EXPECT_EQ(f32_to_f16(-1e10f), 0xfc00);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);  // half the smallest subnormal: tie to 0
  EXPECT_EQ(f32_to_f16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(f32_to_f16(std::ldexp(3.0f, -25)), 0x0002);     // 1.5 subnormal units: tie to even 2
  EXPECT_EQ(f32_to_f16(std::ldexp(1023.5f, -24)), 0x0400);  // subnormal rounding into the normals
  EXPECT_EQ(f32_to_f16(1e-30f), 0x0000);
  EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(DType, BF16Rounding) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3f808000u)), 0x3f80);  // tie, even stays
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3f818000u)), 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3f808001u)), 0x3f81);
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x7f7fffffu)), 0x7f80);  // max float rounds to infinity
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::bit_cast<float>(0x7f800001u)))));  // NaN stays NaN
}

// The -f16 / -bf16 fixtures are the float32 weights rounded by torch (nearest even): our rounding must
// reproduce every stored bit.
TEST(DType, RoundingMatchesTorchOnFixtures) {
  GERBIL_REQUIRE_FIXTURES();
  for (const std::string family : {"qwen2-tiny", "llama-tiny"}) {
    Safetensors f32 = Safetensors::open(fixtures_dir() / family);
    for (const auto& [suffix, dtype] : {std::pair{"-f16", DType::F16}, std::pair{"-bf16", DType::BF16}}) {
      Safetensors rounded = Safetensors::open(fixtures_dir() / (family + suffix));
      ASSERT_EQ(rounded.names(), f32.names());
      for (const auto& [name, view] : f32.tensors()) {
        const TensorView& low = rounded.at(name);
        ASSERT_EQ(low.dtype, dtype) << name;
        std::vector<std::byte> ours(low.bytes.size());
        convert_from_f32(dtype, floats_of(view), ours);
        EXPECT_EQ(std::memcmp(ours.data(), low.bytes.data(), ours.size()), 0)
            << family << suffix << " " << name;
      }
    }
  }
}

// --- reading the fixtures ------------------------------------------------------------------------

TEST(Safetensors, OpensEveryFixtureWithTheManifestTensors) {
  GERBIL_REQUIRE_FIXTURES();
  for (const auto& model : test::manifest()["models"]) {
    std::string folder = model["folder"];
    Safetensors tensors = Safetensors::open(fixtures_dir() / folder);
    ASSERT_EQ(tensors.files().size(), 1u);
    EXPECT_EQ(tensors.files()[0], fixtures_dir() / folder / "model.safetensors");
    EXPECT_EQ(tensors.metadata().at("format"), "pt");
    ASSERT_EQ(tensors.tensors().size(), model["tensors"].size()) << folder;
    for (const auto& [name, spec] : model["tensors"].items()) {
      const TensorView& view = tensors.at(name);
      EXPECT_EQ(dtype_name(view.dtype), spec["dtype"].get<std::string>()) << folder << " " << name;
      EXPECT_EQ(view.shape, spec["shape"].get<std::vector<int64_t>>()) << folder << " " << name;
      EXPECT_EQ(int64_t(view.bytes.size()), view.numel() * int64_t(dtype_size(view.dtype)));
    }
  }
}

TEST(Safetensors, ReadsValuesAndLooksUpByName) {
  GERBIL_REQUIRE_FIXTURES();
  Safetensors tensors = Safetensors::open(fixtures_dir() / "qwen2-tiny" / "model.safetensors");
  EXPECT_EQ(tensors.find("lm_head.weight"), nullptr);
  EXPECT_THAT(error_of([&] { tensors.at("lm_head.weight"); }),
              AllOf(HasSubstr("lm_head.weight"), HasSubstr("qwen2-tiny/model.safetensors")));
  // The tied model's final norm is zero-mean randn (README); the layer norms are 1 + 0.1 randn.
  std::vector<float> norm = floats_of(tensors.at("model.layers.0.input_layernorm.weight"));
  double mean = 0;
  for (float v : norm) mean += v / double(norm.size());
  EXPECT_NEAR(mean, 1.0, 0.05);
  EXPECT_EQ(tensors.total_bytes(), 430952u - 8u - 2656u);  // file size minus length and header
}

// --- writing -------------------------------------------------------------------------------------

TEST(Safetensors, WriterRoundTrip) {
  ScratchDir dir;
  std::vector<float> a = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f, -8.5f};
  std::vector<int32_t> b = {7, -9};
  std::vector<TensorSource> sources = {
      tensor_from_bytes("a", DType::F32, {2, 3}, std::as_bytes(std::span(a))),
      tensor_from_bytes("b", DType::I32, {2}, std::as_bytes(std::span(b))),
      tensor_from_bytes("empty", DType::F16, {0, 4}, {}),
  };
  write_safetensors(dir / "x.safetensors", sources, {{"format", "pt"}, {"note", "hi"}});
  EXPECT_FALSE(std::filesystem::exists(dir / "x.safetensors.partial"));
  Safetensors read = Safetensors::open(dir / "x.safetensors");
  EXPECT_EQ(read.metadata().at("note"), "hi");
  EXPECT_EQ(read.names(), (std::vector<std::string>{"a", "b", "empty"}));
  EXPECT_EQ(read.at("a").shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(floats_of(read.at("a")), a);
  int32_t b1;
  std::memcpy(&b1, read.at("b").bytes.data() + 4, 4);
  EXPECT_EQ(b1, -9);
  EXPECT_EQ(read.at("empty").numel(), 0);
  // The header is padded so the data section starts 8-byte aligned, as transformers writes it.
  std::string file = test::read_text(dir / "x.safetensors");
  uint64_t header_length;
  std::memcpy(&header_length, file.data(), 8);
  EXPECT_EQ(header_length % 8, 0u);
  EXPECT_EQ(file.size(), 8 + header_length + 6 * 4 + 2 * 4);
}

TEST(Safetensors, WriterStreamsLargeTensorsInChunks) {
  ScratchDir dir;
  constexpr int64_t kCount = 10'000'000;  // 40 MB: more than one 16 MB chunk
  int calls = 0;
  TensorSource ramp{"ramp", DType::F32, {kCount}, [&](uint64_t first, std::span<std::byte> out) {
                      ++calls;
                      for (std::size_t i = 0; i < out.size() / 4; ++i) {
                        float value = float(first + i);
                        std::memcpy(out.data() + 4 * i, &value, 4);
                      }
                    }};
  write_safetensors(dir / "big.safetensors", {ramp});
  EXPECT_GT(calls, 1);
  Safetensors read = Safetensors::open(dir / "big.safetensors");
  std::vector<float> values = floats_of(read.at("ramp"));
  EXPECT_EQ(values[0], 0.0f);
  EXPECT_EQ(values[5'000'000], 5'000'000.0f);
  EXPECT_EQ(values[kCount - 1], float(kCount - 1));
}

TEST(Safetensors, WriterRejectsBadInput) {
  ScratchDir dir;
  std::vector<float> a = {1, 2};
  auto source = tensor_from_bytes("a", DType::F32, {2}, std::as_bytes(std::span(a)));
  EXPECT_THAT(error_of([&] {
                write_safetensors(dir / "d.safetensors", {source, source});
              }),
              AllOf(HasSubstr("\"a\""), HasSubstr("twice")));
  EXPECT_THAT(error_of([&] { tensor_from_bytes("c", DType::F32, {3}, std::as_bytes(std::span(a))); }),
              AllOf(HasSubstr("\"c\""), HasSubstr("8 bytes")));
}

// --- bad files -----------------------------------------------------------------------------------

struct BadFile {
  std::string what;
  std::string header;
  std::string data;
  std::vector<std::string> message_parts;
};

TEST(Safetensors, RejectsBadHeaders) {
  ScratchDir dir;
  const std::string w16(16, 'x');  // 16 data bytes
  const std::vector<BadFile> cases = {
      {"bad json", "{\"a\": {", w16, {"not valid JSON"}},
      {"not an object", "[1, 2]", w16, {"not a JSON object"}},
      {"unknown dtype",
       R"({"w":{"dtype":"Q4_X","shape":[4],"data_offsets":[0,16]}})",
       w16,
       {"\"w\"", "unknown dtype", "Q4_X"}},
      {"missing dtype", R"({"w":{"shape":[4],"data_offsets":[0,16]}})", w16, {"\"w\"", "\"dtype\""}},
      {"negative dim",
       R"({"w":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}})",
       w16,
       {"\"w\"", "non-negative"}},
      {"offsets past the data",
       R"({"w":{"dtype":"F32","shape":[8],"data_offsets":[0,32]}})",
       w16,
       {"\"w\"", "outside the data section"}},
      {"reversed offsets",
       R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}})",
       w16,
       {"\"w\"", "outside the data section"}},
      {"size mismatch",
       R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})",
       w16,
       {"\"w\"", "span 16 bytes", "needs 12"}},
      {"overlap",
       R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
       w16,
       {"\"b\"", "overlaps", "\"a\""}},
      {"gap",
       R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
       w16,
       {"bytes 4..8", "belong to no tensor", "\"b\""}},
      {"trailing bytes",
       R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
       w16,
       {"16 bytes", "cover only 8"}},
      // Read as int64_t, 2^63 would be negative; with a zero dimension the tensor holds no bytes.
      {"dimension 2^63",
       R"({"w":{"dtype":"F32","shape":[9223372036854775808,0],"data_offsets":[0,0]}})",
       "",
       {"\"w\"", "dimension 9223372036854775808", "2^63 or more"}},
      // 2^62 * 2 elements overflow int64_t in numel() although the zero makes the byte size 0.
      {"element count past 2^63 in an empty tensor",
       R"({"w":{"dtype":"U8","shape":[4611686018427387904,2,0],"data_offsets":[0,0]}})",
       "",
       {"\"w\"", "[4611686018427387904, 2, 0]", "more than 2^63 bytes"}},
      {"byte size past 2^63",
       R"({"w":{"dtype":"F32","shape":[2305843009213693952,4],"data_offsets":[0,16]}})",
       w16,
       {"\"w\"", "more than 2^63 bytes"}},
      {"offsets past the end of the file",
       R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[18446744073709551600,18446744073709551615]}})",
       w16,
       {"\"w\"", "outside the data section of 16 bytes"}},
      {"duplicate name",
       R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
       w16,
       {"\"a\"", "twice"}},
  };
  for (const BadFile& bad : cases) {
    SCOPED_TRACE(bad.what);
    auto path = dir / "bad.safetensors";
    write_raw_safetensors(path, bad.header, bad.data);
    std::string message = error_of([&] { Safetensors::open(path); });
    EXPECT_THAT(message, HasSubstr(path.string()));
    for (const std::string& part : bad.message_parts) EXPECT_THAT(message, HasSubstr(part));
  }
}

TEST(Safetensors, RejectsTruncatedFiles) {
  ScratchDir dir;
  test::write_file(dir / "short.safetensors", "abc");
  EXPECT_THAT(error_of([&] { Safetensors::open(dir / "short.safetensors"); }),
              AllOf(HasSubstr("short.safetensors"), HasSubstr("too short")));
  write_raw_safetensors(dir / "long.safetensors", "{}", "", 1000);
  EXPECT_THAT(error_of([&] { Safetensors::open(dir / "long.safetensors"); }),
              AllOf(HasSubstr("long.safetensors"), HasSubstr("header length 1000 runs past the end")));
  EXPECT_THAT(error_of([&] { Safetensors::open(dir / "absent.safetensors"); }),
              AllOf(HasSubstr("absent.safetensors"), HasSubstr("cannot open")));
  EXPECT_THAT(error_of([&] { Safetensors::open(dir.path()); }), HasSubstr("no model.safetensors"));
}

// --- sharded checkpoints ---------------------------------------------------------------------------

class ShardedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    write_safetensors(dir / "model-00001-of-00002.safetensors",
                      {tensor_from_bytes("a", DType::F32, {2}, std::as_bytes(std::span(a)))});
    write_safetensors(dir / "model-00002-of-00002.safetensors",
                      {tensor_from_bytes("b", DType::F32, {2}, std::as_bytes(std::span(b)))});
  }
  void write_index(const nlohmann::json& weight_map) {
    test::write_json_file(dir / "model.safetensors.index.json",
                          {{"metadata", {{"total_size", 16}}}, {"weight_map", weight_map}});
  }

  ScratchDir dir;
  std::vector<float> a = {1, 2}, b = {3, 4};
};

TEST_F(ShardedTest, OpensThroughTheIndex) {
  write_index({{"a", "model-00001-of-00002.safetensors"}, {"b", "model-00002-of-00002.safetensors"}});
  Safetensors read = Safetensors::open(dir.path());
  EXPECT_EQ(read.files().size(), 2u);
  EXPECT_EQ(read.metadata().at("total_size"), "16");
  EXPECT_EQ(floats_of(read.at("b")), b);
  EXPECT_EQ(read.at("b").file, dir / "model-00002-of-00002.safetensors");
  // The index file can be named directly too.
  EXPECT_EQ(Safetensors::open(dir / "model.safetensors.index.json").names(),
            (std::vector<std::string>{"a", "b"}));
}

TEST_F(ShardedTest, RejectsAMissingShard) {
  write_index({{"a", "model-00001-of-00002.safetensors"}, {"b", "model-00009-of-00002.safetensors"}});
  EXPECT_THAT(error_of([&] { Safetensors::open(dir.path()); }),
              AllOf(HasSubstr("model.safetensors.index.json"), HasSubstr("model-00009-of-00002.safetensors"),
                    HasSubstr("does not exist")));
}

TEST_F(ShardedTest, RejectsATensorAbsentFromItsShard) {
  write_index({{"a", "model-00001-of-00002.safetensors"},
               {"b", "model-00002-of-00002.safetensors"},
               {"c", "model-00002-of-00002.safetensors"}});
  EXPECT_THAT(
      error_of([&] { Safetensors::open(dir.path()); }),
      AllOf(HasSubstr("\"c\""), HasSubstr("model-00002-of-00002.safetensors"), HasSubstr("no such tensor")));
}

TEST_F(ShardedTest, RejectsATensorTheIndexDoesNotList) {
  write_index({{"a", "model-00001-of-00002.safetensors"}, {"b", "model-00001-of-00002.safetensors"}});
  EXPECT_THAT(error_of([&] { Safetensors::open(dir.path()); }),
              AllOf(HasSubstr("\"b\""), HasSubstr("no such tensor")));
  write_index({{"b", "model-00002-of-00002.safetensors"}, {"z", "model-00001-of-00002.safetensors"}});
  EXPECT_THAT(error_of([&] { Safetensors::open(dir.path()); }),
              AllOf(HasSubstr("\"a\""), HasSubstr("is not listed in")));
}

TEST_F(ShardedTest, RejectsABadIndex) {
  test::write_file(dir / "model.safetensors.index.json", "{\"weight_map\": ");
  EXPECT_THAT(error_of([&] { Safetensors::open(dir.path()); }),
              AllOf(HasSubstr("model.safetensors.index.json"), HasSubstr("not valid JSON")));
  test::write_json_file(dir / "model.safetensors.index.json", {{"metadata", {}}});
  EXPECT_THAT(error_of([&] { Safetensors::open(dir.path()); }), HasSubstr("no \"weight_map\""));
}

}  // namespace
}  // namespace gerbil
