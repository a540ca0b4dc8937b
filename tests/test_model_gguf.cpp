// The GGUF reader: files written from fixture weights read back exactly (metadata of every type, tensor
// shapes and bytes, alignment), and every malformed input gives an error naming the problem.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "gerbil/error.h"
#include "model/config.h"
#include "model/gguf.h"
#include "model/gguf_model.h"
#include "model/quant.h"
#include "model/safetensors.h"
#include "support/gguf_writer.h"
#include "test_model_support.h"

namespace gerbil {
namespace {

using test::bytes_of;
using test::error_of;
using test::GgufBytes;
using test::GgufWriter;
using test::ScratchDir;
using ::testing::AllOf;
using ::testing::HasSubstr;

// A Gguf views the bytes it was parsed from, so they must outlive it: a temporary is refused at compile time.
Gguf parse(const std::string& bytes) { return Gguf::parse(std::as_bytes(std::span(bytes)), "test.gguf"); }
Gguf parse(std::string&&) = delete;

std::string parse_error(const std::string& bytes) {
  return error_of([&] { parse(bytes); });
}

// A header with the given counts, for files built byte by byte.
GgufBytes header(uint64_t tensors, uint64_t keys, uint32_t version = 3) {
  GgufBytes b;
  b.raw("GGUF").u32(version).u64(tensors).u64(keys);
  return b;
}

// A small valid file: metadata of every scalar type and a two-tensor data section.
GgufWriter small_writer() {
  GgufWriter w;
  w.add_string("general.architecture", "llama");
  w.add_u32("llama.block_count", 2);
  w.add_f32("llama.rope.freq_base", 500000.0f);
  w.add_bool("tokenizer.ggml.add_bos_token", true);
  std::vector<float> a(64), b(32);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = float(i) * 0.25f;
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = -float(i);
  w.add_tensor("a", uint32_t(GgmlType::F32), {16, 4}, bytes_of(a));
  w.add_tensor("b", uint32_t(GgmlType::F32), {32}, bytes_of(b));
  return w;
}

TEST(Gguf, FixtureWeightsRoundTrip) {
  GERBIL_REQUIRE_FIXTURES();
  Safetensors st = Safetensors::open(test::fixtures_dir() / "qwen2-tiny");
  GgufWriter w;
  w.add_string("general.architecture", "qwen2");
  w.add_u32("general.alignment", 64);
  w.alignment = 64;
  std::vector<std::vector<float>> originals;
  for (const auto& [name, view] : st.tensors()) {
    std::vector<float> values = test::floats_of(view);
    std::vector<uint64_t> dims(view.shape.rbegin(), view.shape.rend());
    bool quantize_it = view.shape.size() == 2;  // the matrices in Q8_0, the vectors in F32
    GgmlType type = quantize_it ? GgmlType::Q8_0 : GgmlType::F32;
    std::vector<std::byte> bytes = quantize(type, values);
    w.add_tensor(name, uint32_t(type), dims, std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  }
  ScratchDir dir;
  w.write(dir / "model.gguf");
  Gguf gguf = Gguf::open(dir / "model.gguf");
  EXPECT_EQ(gguf.version(), 3u);
  EXPECT_EQ(gguf.alignment(), 64u);
  EXPECT_EQ(gguf.data_offset() % 64, 0u);
  EXPECT_EQ(gguf.require_string("general.architecture"), "qwen2");
  ASSERT_EQ(gguf.tensors().size(), st.tensors().size());
  for (const auto& [name, view] : st.tensors()) {
    const GgufTensor* t = gguf.find_tensor(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->shape(), view.shape) << name;
    EXPECT_EQ(t->offset % 64, 0u) << name;
    std::vector<float> values = test::floats_of(view);
    std::vector<std::byte> expected = quantize(t->type, values);
    ASSERT_EQ(t->bytes.size(), expected.size()) << name;
    EXPECT_EQ(std::memcmp(t->bytes.data(), expected.data(), expected.size()), 0) << name;
  }
}

TEST(Gguf, MetadataOfEveryType) {
  GgufWriter w;
  w.add_raw("u8", test::kU8, GgufBytes().u8(250).data);
  w.add_raw("i8", test::kI8, GgufBytes().u8(0x80).data);
  w.add_raw("u16", test::kU16, GgufBytes().u8(0x34).u8(0x12).data);
  w.add_raw("i16", test::kI16, GgufBytes().u8(0xff).u8(0xff).data);
  w.add_u32("u32", 4000000000u);
  w.add_i32("i32", -7);
  w.add_f32("f32", 0.5f);
  w.add_bool("bool", true);
  w.add_string("string", "héllo");
  w.add_u64("u64", 1ull << 40);
  w.add_raw("i64", test::kI64, GgufBytes().u64(uint64_t(-5)).data);
  w.add_raw("f64", test::kF64, GgufBytes().f64(1e-300).data);
  w.add_strings("strings", {"a", "", "ccc"});
  w.add_f32s("floats", {1.5f, -2.0f});
  w.add_i32s("ints", {3, -4, 5});
  // [[1, 2], [3]] as an array of arrays of uint8, and an empty array.
  w.add_raw("nested", test::kArray,
            GgufBytes().u32(test::kArray).u64(2).u32(test::kU8).u64(2).u8(1).u8(2).u32(test::kU8).u64(1).u8(3).data);
  w.add_raw("empty", test::kArray, GgufBytes().u32(test::kString).u64(0).data);
  std::string bytes = w.bytes();
  Gguf g = parse(bytes);
  EXPECT_EQ(g.get_int("u8"), 250);
  EXPECT_EQ(g.get_int("i8"), -128);
  EXPECT_EQ(g.get_int("u16"), 0x1234);
  EXPECT_EQ(g.get_int("i16"), -1);
  EXPECT_EQ(g.get_int("u32"), 4000000000ll);
  EXPECT_EQ(g.get_int("i32"), -7);
  EXPECT_EQ(g.get_float("f32"), 0.5);
  EXPECT_EQ(g.get_bool("bool"), true);
  EXPECT_EQ(g.get_string("string"), "héllo");
  EXPECT_EQ(g.get_int("u64"), 1ll << 40);
  EXPECT_EQ(g.get_int("i64"), -5);
  EXPECT_EQ(g.get_float("f64"), 1e-300);
  EXPECT_EQ(g.get_float("i32"), -7.0);  // integers read as numbers
  EXPECT_EQ(*g.get_strings("strings"), (std::vector<std::string_view>{"a", "", "ccc"}));
  EXPECT_EQ(*g.get_floats("floats"), (std::vector<double>{1.5, -2.0}));
  EXPECT_EQ(*g.get_ints("ints"), (std::vector<int64_t>{3, -4, 5}));
  EXPECT_TRUE(g.get_strings("empty")->empty());
  const auto& nested = std::get<GgufArray>(g.find("nested")->value);
  ASSERT_EQ(nested.items.size(), 2u);
  EXPECT_EQ(std::get<GgufArray>(nested.items[0].value).count, 2u);
  EXPECT_EQ(std::to_integer<int>(std::get<GgufArray>(nested.items[1].value).packed[0]), 3);
  EXPECT_FALSE(g.get_int("absent").has_value());
  EXPECT_THAT(error_of([&] { g.require_int("absent"); }), HasSubstr("metadata \"absent\" is missing"));
  EXPECT_THAT(error_of([&] { g.get_int("string"); }), HasSubstr("metadata \"string\" holds a string, expected an integer"));
  EXPECT_THAT(error_of([&] { g.get_string("u8"); }), HasSubstr("\"u8\" holds a uint8, expected a string"));
  EXPECT_THAT(error_of([&] { g.get_ints("strings"); }), HasSubstr("metadata \"strings\"[0] holds a string"));
  EXPECT_THAT(error_of([&] { g.get_strings("u32"); }), HasSubstr("expected an array of strings"));
}

TEST(Gguf, SmallFileReadsBack) {
  std::string bytes = small_writer().bytes();
  Gguf g = parse(bytes);
  EXPECT_EQ(g.get_int("llama.block_count"), 2);
  EXPECT_EQ(g.get_float("llama.rope.freq_base"), 500000.0);
  ASSERT_EQ(g.tensors().size(), 2u);
  const GgufTensor& a = g.tensors()[0];
  EXPECT_EQ(a.name, "a");
  EXPECT_EQ(a.dims, (std::vector<int64_t>{16, 4}));
  EXPECT_EQ(a.shape(), (std::vector<int64_t>{4, 16}));
  EXPECT_EQ(a.numel(), 64u);
  float third;
  std::memcpy(&third, a.bytes.data() + 8, 4);
  EXPECT_EQ(third, 0.5f);
  EXPECT_EQ(g.tensors()[1].offset, 256u);  // 64 floats, already a multiple of 32
}

// Every strict prefix of a valid file is an error (never a crash or a read past the end).
TEST(Gguf, EveryTruncationIsAnError) {
  std::string bytes = small_writer().bytes();
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    std::string error = parse_error(bytes.substr(0, n));
    ASSERT_FALSE(error.empty()) << "prefix of " << n << " bytes parsed";
    ASSERT_THAT(error, HasSubstr("test.gguf")) << n;
  }
  EXPECT_THAT(parse_error(bytes.substr(0, 20)), HasSubstr("the metadata count at byte 16 needs 8 bytes but the file ends 4 bytes later"));
  EXPECT_THAT(parse_error(bytes.substr(0, bytes.size() - 1)), AllOf(HasSubstr("tensor \"b\""), HasSubstr("run past the end")));
}

TEST(Gguf, BadMagicAndVersions) {
  EXPECT_THAT(parse_error("GGML" + header(0, 0).data.substr(4)), HasSubstr("not a GGUF file"));
  EXPECT_THAT(parse_error(header(0, 0, 1).data), HasSubstr("GGUF version 1 is not supported"));
  EXPECT_THAT(parse_error(header(0, 0, 4).data), HasSubstr("GGUF version 4 is not supported"));
  EXPECT_THAT(parse_error(header(0, 0, 0x03000000).data), HasSubstr("big-endian"));
  std::string version2 = header(0, 0, 2).data;
  EXPECT_EQ(parse(version2).version(), 2u);
}

TEST(Gguf, LyingCounts) {
  EXPECT_THAT(parse_error(header(1ull << 60, 0).data), HasSubstr("claims 1152921504606846976 tensors"));
  EXPECT_THAT(parse_error(header(0, 1ull << 60).data), HasSubstr("claims 1152921504606846976 metadata entries"));
}

TEST(Gguf, StringsAndArraysPastTheEnd) {
  EXPECT_THAT(parse_error(header(0, 1).u64(1ull << 62).raw("abcdefgh").data),
              AllOf(HasSubstr("metadata entry 0's key"), HasSubstr("string length 4611686018427387904")));
  EXPECT_THAT(parse_error(header(0, 1).str("k").u32(test::kString).u64(100).raw("short").data),
              AllOf(HasSubstr("metadata \"k\""), HasSubstr("string length 100"), HasSubstr("runs past the end")));
  EXPECT_THAT(parse_error(header(0, 1).str("k").u32(test::kArray).u32(test::kU32).u64(1ull << 60).raw("abcd").data),
              AllOf(HasSubstr("metadata \"k\""), HasSubstr("array of 1152921504606846976 uint32 elements")));
  EXPECT_THAT(parse_error(header(0, 1).str("k").u32(test::kArray).u32(test::kString).u64(2).str("abcdefghij").data),
              AllOf(HasSubstr("metadata \"k\"[1]"), HasSubstr("needs 8 bytes")));
}

TEST(Gguf, UnknownValueTypes) {
  EXPECT_THAT(parse_error(header(0, 1).str("k").u32(13).u64(0).data),
              AllOf(HasSubstr("metadata \"k\""), HasSubstr("unknown value type id 13")));
  EXPECT_THAT(parse_error(header(0, 1).str("k").u32(test::kArray).u32(99).u64(0).data),
              AllOf(HasSubstr("metadata \"k\" (array element type)"), HasSubstr("unknown value type id 99")));
}

TEST(Gguf, ArraysNestedTooDeep) {
  GgufBytes value;
  for (int i = 0; i < 20; ++i) value.u32(test::kArray).u64(1);
  value.u32(test::kU8).u64(0);
  EXPECT_THAT(parse_error(header(0, 1).str("deep").u32(test::kArray).raw(value.data).data),
              AllOf(HasSubstr("metadata \"deep\"[0][0]"), HasSubstr("nested more than 8 deep")));
}

TEST(Gguf, DuplicateKeysAndTensors) {
  GgufWriter w = small_writer();
  w.add_u32("llama.block_count", 3);
  EXPECT_THAT(parse_error(w.bytes()), HasSubstr("metadata \"llama.block_count\" appears twice"));
  GgufWriter t = small_writer();
  t.add_tensor("a", uint32_t(GgmlType::F32), {8}, std::string(32, '\0'));
  EXPECT_THAT(parse_error(t.bytes()), HasSubstr("tensor \"a\" appears twice"));
}

TEST(Gguf, BadTensorInfos) {
  auto with_tensor = [](uint32_t type, std::vector<uint64_t> dims, uint64_t bytes, uint64_t offset = UINT64_MAX) {
    GgufWriter w;
    w.add_tensor("blk.0.attn_q.weight", type, std::move(dims), std::string(bytes, '\0'), offset);
    return parse_error(w.bytes());
  };
  EXPECT_THAT(with_tensor(1000, {32}, 32), AllOf(HasSubstr("tensor \"blk.0.attn_q.weight\""), HasSubstr("unknown ggml type id 1000")));
  EXPECT_THAT(with_tensor(4, {32}, 32), HasSubstr("unknown ggml type id 4"));
  EXPECT_THAT(with_tensor(uint32_t(GgmlType::F32), {1ull << 32, 1ull << 32}, 0), HasSubstr("overflows int64"));
  EXPECT_THAT(with_tensor(uint32_t(GgmlType::F32), {1ull << 63}, 0), HasSubstr("beyond int64"));
  EXPECT_THAT(with_tensor(uint32_t(GgmlType::F64), {1ull << 62}, 0), HasSubstr("byte size"));
  EXPECT_THAT(with_tensor(uint32_t(GgmlType::F32), {1, 1, 1, 1, 1}, 4), HasSubstr("has 5 dimensions"));
  EXPECT_THAT(with_tensor(uint32_t(GgmlType::Q4_K), {128, 2}, 144), HasSubstr("row length 128 is not a multiple of Q4_K's block size 256"));
  EXPECT_THAT(with_tensor(uint32_t(GgmlType::Q8_0), {}, 34), HasSubstr("row length 1 is not a multiple of Q8_0's block size 32"));
  EXPECT_THAT(with_tensor(uint32_t(GgmlType::F32), {8}, 32, 4), HasSubstr("data offset 4 is not a multiple of the alignment 32"));
  EXPECT_THAT(with_tensor(uint32_t(GgmlType::F32), {64}, 32), AllOf(HasSubstr("data bytes [0, 256)"), HasSubstr("run past the end")));
  EXPECT_THAT(with_tensor(uint32_t(GgmlType::F32), {8}, 32, 1ull << 62), HasSubstr("run past the end"));
}

TEST(Gguf, OverlappingTensorData) {
  GgufWriter w;
  w.add_tensor("first", uint32_t(GgmlType::F32), {16}, std::string(64, '\0'), 0);
  w.add_tensor("second", uint32_t(GgmlType::F32), {8}, std::string(32, '\0'), 32);
  EXPECT_THAT(parse_error(w.bytes()), HasSubstr("tensor \"second\" (data bytes [32, 64)) overlaps tensor \"first\""));
}

TEST(Gguf, Alignment) {
  GgufWriter w = small_writer();
  w.add_u32("general.alignment", 3);
  EXPECT_THAT(parse_error(w.bytes()), HasSubstr("\"general.alignment\" must be a power of two"));
  GgufWriter zero = small_writer();
  zero.add_u32("general.alignment", 0);
  EXPECT_THAT(parse_error(zero.bytes()), HasSubstr("must be a power of two"));
  GgufWriter text = small_writer();
  text.add_string("general.alignment", "32");
  EXPECT_THAT(parse_error(text.bytes()), HasSubstr("(not an integer)"));
  // With an alignment of 256, a tensor at offset 32 (fine at the default of 32) is misaligned.
  GgufWriter big;
  big.add_u32("general.alignment", 256);
  big.add_tensor("x", uint32_t(GgmlType::F32), {8}, std::string(32, '\1'));
  big.add_tensor("y", uint32_t(GgmlType::F32), {8}, std::string(32, '\2'));
  EXPECT_THAT(parse_error(big.bytes()), HasSubstr("is not a multiple of the alignment 256"));
  big.alignment = 256;
  std::string bytes = big.bytes();
  Gguf g = parse(bytes);
  EXPECT_EQ(g.alignment(), 256u);
  EXPECT_EQ(g.data_offset() % 256, 0u);
  EXPECT_EQ(g.find_tensor("y")->offset, 256u);
  EXPECT_EQ(std::to_integer<int>(g.find_tensor("y")->bytes[0]), 2);
}

TEST(Gguf, MissingFile) {
  EXPECT_THAT(error_of([] { Gguf::open("/nonexistent/model.gguf"); }), HasSubstr("cannot open /nonexistent/model.gguf"));
}

TEST(GgufModel, Summary) {
  GgufWriter w = small_writer();
  w.add_u32("llama.context_length", 4096);
  w.add_string("general.name", "tiny");
  w.add_tensor("q", uint32_t(GgmlType::Q8_0), {32, 2}, std::string(68, '\0'));
  std::string bytes = w.bytes();
  nlohmann::json s = gguf_summary(parse(bytes));
  EXPECT_EQ(s["architecture"], "llama");
  EXPECT_EQ(s["name"], "tiny");
  EXPECT_EQ(s["parameters"], 64 + 32 + 64);
  EXPECT_EQ(s["context_length"], 4096);
  EXPECT_EQ(s["tensors"], 3);
  EXPECT_EQ(s["types"], nlohmann::json({{"F32", 2}, {"Q8_0", 1}}));
  EXPECT_EQ(s["type_bytes"]["Q8_0"], 68);
  EXPECT_EQ(s["type_bytes"]["F32"], 384);
  EXPECT_EQ(s["chat_template"], false);
  EXPECT_TRUE(s["tokenizer"].is_null());
  EXPECT_EQ(s["rope_scaling"], "none");
  w.add_string("llama.rope.scaling.type", "yarn");
  bytes = w.bytes();
  EXPECT_EQ(gguf_summary(parse(bytes))["rope_scaling"], "yarn");
}

// Llama 3.1's rope scaling reaches GGUF as per-frequency factors (rope_freqs.weight); the config recovered
// from them gives the inverse frequencies the Hugging Face rope_parameters give.
TEST(GgufModel, Llama3RopeScalingFromFrequencyFactors) {
  nlohmann::json hf = {{"architectures", {"LlamaForCausalLM"}}, {"hidden_act", "silu"}, {"vocab_size", 32},
                       {"hidden_size", 1024}, {"intermediate_size", 64}, {"num_hidden_layers", 1},
                       {"num_attention_heads", 8}, {"max_position_embeddings", 131072}, {"rms_norm_eps", 1e-5},
                       {"rope_parameters", {{"rope_type", "llama3"}, {"rope_theta", 500000.0}, {"factor", 8.0},
                                            {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                                            {"original_max_position_embeddings", 8192}}}};
  ModelConfig scaled = parse_config(hf, "config.json");
  nlohmann::json plain_doc = hf;
  plain_doc["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 500000.0}};
  ModelConfig plain = parse_config(plain_doc, "config.json");
  std::vector<float> want = rope_inv_freq(scaled, 0), unscaled = rope_inv_freq(plain, 0);
  std::vector<float> factors;
  for (std::size_t i = 0; i < want.size(); ++i) factors.push_back(float(double(unscaled[i]) / double(want[i])));

  GgufWriter w;
  w.add_string("general.architecture", "llama");
  for (auto [key, value] : {std::pair{"block_count", 1}, {"embedding_length", 1024}, {"feed_forward_length", 64},
                            {"context_length", 131072}, {"attention.head_count", 8}, {"rope.dimension_count", 128}})
    w.add_u32(std::string("llama.") + key, uint32_t(value));
  w.add_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.add_f32("llama.rope.freq_base", 500000.0f);
  w.add_tensor("token_embd.weight", uint32_t(GgmlType::F32), {1024, 32}, std::string(1024 * 32 * 4, '\0'));
  w.add_tensor("rope_freqs.weight", uint32_t(GgmlType::F32), {64}, bytes_of(factors));
  std::string bytes = w.bytes();
  Gguf gguf = parse(bytes);
  ModelConfig recovered = parse_config(gguf_config_json(gguf), "model.gguf");
  EXPECT_EQ(recovered.rope_full.type, RopeType::Llama3);
  EXPECT_EQ(recovered.rope_full.factor, 8.0);
  std::vector<float> got = rope_inv_freq(recovered, 0);
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6 * want[i]) << "frequency " << i;
}

}  // namespace
}  // namespace gerbil
