// Synthetic models: every preset writes a folder that ModelFiles accepts, with the fixtures' tensor
// names, deterministic values, the requested dtype, and shards plus an index when asked.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "gerbil/error.h"
#include "model/synth.h"
#include "model/weights.h"
#include "test_model_support.h"

namespace gerbil {
namespace {

using test::error_of;
using test::floats_of;

using test::fixtures_dir;
using test::ScratchDir;
using ::testing::HasSubstr;

struct Moments {
  double mean = 0, std = 0;
};
Moments moments(const std::vector<float>& values) {
  Moments m;
  for (float v : values) m.mean += v / double(values.size());
  for (float v : values) m.std += (v - m.mean) * (v - m.mean) / double(values.size());
  m.std = std::sqrt(m.std);
  return m;
}

// Each tiny preset mirrors one fixture family.
const std::vector<std::pair<std::string, std::string>> kTinyPresets = {
    {"tiny-qwen2", "qwen2-tiny"},         {"tiny-qwen3", "qwen3-tiny"}, {"tiny-llama", "llama-tiny"},
    {"tiny-mistral", "mistral-swa-tiny"}, {"tiny-phi3", "phi3-tiny"},   {"tiny-phi", "phi-tiny"},
    {"tiny-gpt2", "gpt2-tiny"},           {"tiny-gemma", "gemma-tiny"}, {"tiny-gemma3", "gemma3-tiny"},
};

TEST(Synth, PresetsCoverEveryArchitecture) {
  std::vector<std::string> presets = synth_presets();
  EXPECT_EQ(presets.size(), kTinyPresets.size() + 2);
  EXPECT_THAT(presets, ::testing::Contains("qwen2.5-0.5b"));
  EXPECT_THAT(presets, ::testing::Contains("llama3-8b"));
  std::set<std::string_view> archs;
  for (const auto& [preset, fixture] : kTinyPresets) {
    EXPECT_THAT(presets, ::testing::Contains(preset));
    archs.insert(parse_config(synth_config({.preset = preset}), "config.json").arch->name);
  }
  EXPECT_EQ(archs.size(), architectures().size());
}

TEST(Synth, TinyPresetsOpenWithTheFixturesTensorNames) {
  GERBIL_REQUIRE_FIXTURES();
  for (const auto& [preset, fixture] : kTinyPresets) {
    SCOPED_TRACE(preset);
    ScratchDir dir;
    SynthResult result = synth_model(dir.path(), {.preset = preset, .seed = 1});
    ModelFiles files = ModelFiles::open(dir.path());
    ModelFiles reference = ModelFiles::open(fixtures_dir() / fixture);
    EXPECT_EQ(files.arch().name, reference.arch().name);
    EXPECT_EQ(files.tensors().names(), reference.tensors().names());
    EXPECT_EQ(files.config().tie_word_embeddings, reference.config().tie_word_embeddings);
    EXPECT_EQ(files.config().layer_types, reference.config().layer_types);
    EXPECT_EQ(files.config().rotary_dim, reference.config().rotary_dim);
    EXPECT_EQ(result.bytes, files.weight_bytes());
    EXPECT_EQ(result.files, std::vector{dir / "model.safetensors"});
    EXPECT_EQ(files.config().eos_token_ids, std::vector<int64_t>{2});
  }
}

TEST(Synth, DeterministicForASeed) {
  ScratchDir a, b, c;
  synth_model(a.path(), {.preset = "tiny-llama", .seed = 7});
  synth_model(b.path(), {.preset = "tiny-llama", .seed = 7});
  synth_model(c.path(), {.preset = "tiny-llama", .seed = 8});
  std::string bytes_a = test::read_text(a / "model.safetensors");
  EXPECT_EQ(bytes_a, test::read_text(b / "model.safetensors"));
  EXPECT_NE(bytes_a, test::read_text(c / "model.safetensors"));
  EXPECT_EQ(test::read_text(a / "config.json"), test::read_text(c / "config.json"));
}

TEST(Synth, ValuesAreScaledLikeTheFixtures) {
  ScratchDir dir;
  synth_model(dir.path(), {.preset = "tiny-qwen2", .seed = 3, .vocab = 4096});
  Safetensors t = Safetensors::open(dir.path());
  EXPECT_EQ(t.at("model.embed_tokens.weight").shape, (std::vector<int64_t>{4096, 64}));
  Moments embed = moments(floats_of(t.at("model.embed_tokens.weight")));
  EXPECT_NEAR(embed.mean, 0.0, 0.01);
  EXPECT_NEAR(embed.std, 0.4, 0.01);
  Moments down = moments(floats_of(t.at("model.layers.0.mlp.down_proj.weight")));  // in = 128
  EXPECT_NEAR(down.std, 1 / std::sqrt(128.0), 0.005);
  Moments norm = moments(floats_of(t.at("model.layers.1.input_layernorm.weight")));
  EXPECT_NEAR(norm.mean, 1.0, 0.05);
  EXPECT_NEAR(norm.std, 0.1, 0.03);
  Moments bias = moments(floats_of(t.at("model.layers.1.self_attn.q_proj.bias")));
  EXPECT_NEAR(bias.std, 0.05, 0.015);
  // Tied model: the final norm is zero-mean so the logits do not just repeat the input token.
  EXPECT_NEAR(moments(floats_of(t.at("model.norm.weight"))).mean, 0.0, 0.35);

  ScratchDir gemma;
  synth_model(gemma.path(), {.preset = "tiny-gemma3", .seed = 3});
  // Gemma stores w for x * (1 + w): layer norms centred on 0.
  EXPECT_NEAR(
      moments(
          floats_of(Safetensors::open(gemma.path()).at("model.layers.0.pre_feedforward_layernorm.weight")))
          .mean,
      0.0, 0.05);
}

TEST(Synth, NormalStreamHasUnitVariance) {
  std::vector<float> values;
  for (uint64_t i = 0; i < 1'000'000; ++i) values.push_back(synth_normal(42, i));
  Moments m = moments(values);
  EXPECT_NEAR(m.mean, 0.0, 0.005);
  EXPECT_NEAR(m.std, 1.0, 0.005);
  EXPECT_NE(synth_normal(42, 0), synth_normal(43, 0));
}

TEST(Synth, HalfPrecisionIsTheRoundedFloat32Model) {
  ScratchDir f32, f16, bf16;
  synth_model(f32.path(), {.preset = "tiny-phi", .dtype = DType::F32, .seed = 5});
  synth_model(f16.path(), {.preset = "tiny-phi", .dtype = DType::F16, .seed = 5});
  synth_model(bf16.path(), {.preset = "tiny-phi", .dtype = DType::BF16, .seed = 5});
  Safetensors full = Safetensors::open(f32.path());
  for (const auto& [dir, dtype] : {std::pair{&f16, DType::F16}, std::pair{&bf16, DType::BF16}}) {
    ModelFiles low = ModelFiles::open(dir->path());
    EXPECT_EQ(low.config().file, dir->path() / "config.json");
    for (const auto& [name, view] : low.tensors().tensors()) {
      ASSERT_EQ(view.dtype, dtype);
      std::vector<std::byte> rounded(view.bytes.size());
      convert_from_f32(dtype, floats_of(full.at(name)), rounded);
      EXPECT_EQ(std::memcmp(rounded.data(), view.bytes.data(), rounded.size()), 0) << name;
    }
  }
  EXPECT_THAT(test::read_text(bf16 / "config.json"), HasSubstr("\"bfloat16\""));
}

TEST(Synth, ShardsLargeModelsWithAnIndex) {
  ScratchDir whole, sharded;
  synth_model(whole.path(), {.preset = "tiny-gemma3", .seed = 9});
  SynthResult result =
      synth_model(sharded.path(), {.preset = "tiny-gemma3", .seed = 9, .max_shard_bytes = 150'000});
  ASSERT_GT(result.files.size(), 1u);
  EXPECT_EQ(result.files[0], sharded / fmt::format("model-00001-of-{:05}.safetensors", result.files.size()));
  EXPECT_TRUE(std::filesystem::exists(sharded / "model.safetensors.index.json"));
  ModelFiles files = ModelFiles::open(sharded.path());
  EXPECT_EQ(files.tensors().files(), result.files);
  Safetensors reference = Safetensors::open(whole.path());
  for (const auto& [name, view] : files.tensors().tensors())
    EXPECT_TRUE(std::equal(view.bytes.begin(), view.bytes.end(), reference.at(name).bytes.begin())) << name;

  // Writing again unsharded into the same folder must not leave the old index or shards behind.
  synth_model(sharded.path(), {.preset = "tiny-gemma3", .seed = 9});
  EXPECT_FALSE(std::filesystem::exists(sharded / "model.safetensors.index.json"));
  EXPECT_FALSE(std::filesystem::exists(result.files[0]));
  EXPECT_EQ(ModelFiles::open(sharded.path()).tensors().files().size(), 1u);
}

// The full-size presets have the published parameter counts (checked without writing 16 GB).
TEST(Synth, FullSizePresetsHaveTheRealShapes) {
  auto parameters = [](const std::string& preset) {
    ModelConfig config = parse_config(synth_config({.preset = preset}), "config.json");
    uint64_t total = 0;
    for (const ExpectedTensor& t : expected_tensors(config)) {
      uint64_t n = 1;
      for (int64_t d : t.shape) n *= uint64_t(d);
      total += n;
    }
    return total;
  };
  EXPECT_EQ(parameters("qwen2.5-0.5b"), 494'032'768u);  // Qwen2.5-0.5B
  EXPECT_EQ(parameters("llama3-8b"), 8'030'261'248u);   // Llama-3.1-8B
  ModelConfig llama = parse_config(synth_config({.preset = "llama3-8b"}), "config.json");
  EXPECT_EQ(llama.rope_full.type, RopeType::Llama3);
  EXPECT_EQ(llama.rope_full.original_max_positions, 8192);
  EXPECT_EQ(llama.head_dim, 128);
  ModelConfig qwen = parse_config(synth_config({.preset = "qwen2.5-0.5b"}), "config.json");
  EXPECT_EQ(qwen.head_dim, 64);
  EXPECT_TRUE(qwen.tie_word_embeddings && qwen.qkv_bias);
}

TEST(Synth, RejectsBadOptions) {
  ScratchDir dir;
  EXPECT_THAT(error_of([&] { synth_model(dir.path(), {.preset = "tiny-bert"}); }),
              AllOf(HasSubstr("tiny-bert"), HasSubstr("tiny-gemma3"), HasSubstr("llama3-8b")));
  EXPECT_THAT(error_of([&] { synth_model(dir.path(), {.preset = "tiny-llama", .dtype = DType::I32}); }),
              HasSubstr("not I32"));
  EXPECT_THAT(error_of([&] { synth_config({.preset = "qwen2.5-0.5b", .vocab = 1000}); }),
              AllOf(HasSubstr("--vocab 1000"), HasSubstr("151643")));
  EXPECT_THAT(error_of([&] { synth_config({.preset = "tiny-llama", .vocab = 0}); }), HasSubstr("--vocab"));
  EXPECT_THAT(error_of([&] { synth_config({.preset = "tiny-llama", .intermediate = -4}); }),
              HasSubstr("--intermediate must be positive, got -4"));
  EXPECT_THAT(error_of([&] { synth_config({.preset = "tiny-gpt2", .intermediate = 256}); }),
              HasSubstr("preset tiny-gpt2 sets no intermediate_size"));
}

TEST(Synth, IntermediateOverrideWidensTheMlp) {
  ScratchDir dir;
  synth_model(dir.path(), {.preset = "tiny-llama", .seed = 2, .intermediate = 200});
  Safetensors t = Safetensors::open(dir.path());
  EXPECT_EQ(t.at("model.layers.0.mlp.down_proj.weight").shape, (std::vector<int64_t>{64, 200}));
  EXPECT_EQ(t.at("model.layers.1.mlp.up_proj.weight").shape, (std::vector<int64_t>{200, 64}));
}

}  // namespace
}  // namespace gerbil
