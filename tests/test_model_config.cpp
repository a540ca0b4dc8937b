// config.json parsing and RoPE frequencies, against the fixtures' manifest and crafted configs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "gerbil/error.h"
#include "model/architecture.h"
#include "model/config.h"
#include "test_model_support.h"

namespace gerbil {
namespace {

using test::error_of;
using test::floats_of;

using nlohmann::json;
using test::fixtures_dir;
using test::ScratchDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

json fixture_config(const std::string& folder) {
  return json::parse(test::read_text(fixtures_dir() / folder / "config.json"));
}

ModelConfig parse(const json& config) { return parse_config(config, "/models/x/config.json"); }

// The fixtures README's model table.
struct Row {
  std::string folder, architecture;
  int64_t hidden, intermediate, layers, heads, kv_heads, head_dim, vocab;
};
const std::vector<Row> kReadmeTable = {
    {"qwen2-tiny", "Qwen2ForCausalLM", 64, 128, 2, 4, 2, 16, 512},
    {"qwen2-tiny-f16", "Qwen2ForCausalLM", 64, 128, 2, 4, 2, 16, 512},
    {"qwen2-tiny-bf16", "Qwen2ForCausalLM", 64, 128, 2, 4, 2, 16, 512},
    {"qwen2-tiny-gptq-int4", "Qwen2ForCausalLM", 64, 128, 2, 4, 2, 16, 512},
    {"qwen3-tiny", "Qwen3ForCausalLM", 64, 176, 2, 4, 2, 32, 512},
    {"llama-tiny", "LlamaForCausalLM", 64, 128, 2, 4, 2, 16, 512},
    {"llama-tiny-f16", "LlamaForCausalLM", 64, 128, 2, 4, 2, 16, 512},
    {"llama-tiny-bf16", "LlamaForCausalLM", 64, 128, 2, 4, 2, 16, 512},
    {"llama-plain-tiny", "LlamaForCausalLM", 64, 176, 2, 4, 4, 16, 512},
    {"mistral-tiny", "MistralForCausalLM", 64, 176, 2, 4, 1, 16, 512},
    {"mistral-swa-tiny", "MistralForCausalLM", 64, 176, 2, 4, 2, 16, 512},
    {"gpt2-tiny", "GPT2LMHeadModel", 64, 256, 2, 4, 4, 16, 512},
    {"phi-tiny", "PhiForCausalLM", 64, 176, 2, 4, 2, 16, 512},
    {"phi3-tiny", "Phi3ForCausalLM", 64, 176, 2, 4, 2, 16, 512},
    {"gemma-tiny", "GemmaForCausalLM", 64, 176, 2, 4, 1, 16, 512},
    {"gemma3-tiny", "Gemma3ForCausalLM", 64, 176, 2, 4, 2, 16, 512},
};

bool has_feature(const json& model, const std::string& feature) {
  for (const auto& f : model["features"])
    if (f == feature) return true;
  return false;
}

TEST(Config, FixturesMatchTheReadmeTableAndManifest) {
  GERBIL_REQUIRE_FIXTURES();
  ASSERT_EQ(kReadmeTable.size(), test::manifest()["models"].size());
  for (const Row& row : kReadmeTable) {
    SCOPED_TRACE(row.folder);
    ModelConfig c = load_config(fixtures_dir() / row.folder);
    const json& model = test::manifest_model(row.folder);
    const json& mc = model["config"];
    EXPECT_EQ(c.file, fixtures_dir() / row.folder / "config.json");
    EXPECT_EQ(c.arch->name, row.architecture);
    EXPECT_EQ(model["architecture"], row.architecture);
    EXPECT_EQ(c.hidden_size, row.hidden);
    EXPECT_EQ(c.intermediate_size, row.intermediate);
    EXPECT_EQ(c.num_layers, row.layers);
    EXPECT_EQ(c.num_heads, row.heads);
    EXPECT_EQ(c.num_kv_heads, row.kv_heads);
    EXPECT_EQ(c.head_dim, row.head_dim);
    EXPECT_EQ(c.vocab_size, row.vocab);
    EXPECT_EQ(c.max_position_embeddings, 256);
    double eps = mc.value("rms_norm_eps", mc.value("layer_norm_eps", mc.value("layer_norm_epsilon", 0.0)));
    EXPECT_EQ(c.norm_eps, eps);
    EXPECT_EQ(c.tie_word_embeddings, has_feature(model, "tied_embeddings"));
    EXPECT_EQ(c.qkv_bias, has_feature(model, "qkv_bias") || has_feature(model, "biases"));
    EXPECT_EQ(c.lm_head_bias, has_feature(model, "lm_head_bias"));
    EXPECT_EQ(c.activation, has_feature(model, "swiglu") ? Activation::SiLU : Activation::GeluTanh);
    EXPECT_EQ(c.bos_token_id, 1);
    EXPECT_THAT(c.eos_token_ids, ElementsAre(2));
    EXPECT_EQ(c.pad_token_id, 0);
    EXPECT_EQ(c.gptq.has_value(), model["weights_dtype"] == "gptq-int4");
    EXPECT_EQ(c.layer_types.size(), 2u);
    if (c.arch->positions == PositionKind::Rotary) {
      double partial = has_feature(model, "partial_rotary_0.5") ? 0.5 : 1.0;
      EXPECT_EQ(c.partial_rotary_factor, partial);
      EXPECT_EQ(c.rotary_dim, int64_t(double(row.head_dim) * partial));
    }
  }
}

TEST(Config, FamilySpecifics) {
  GERBIL_REQUIRE_FIXTURES();
  ModelConfig gemma3 = load_config(fixtures_dir() / "gemma3-tiny");
  EXPECT_THAT(gemma3.layer_types, ElementsAre(AttentionKind::Sliding, AttentionKind::Full));
  EXPECT_EQ(gemma3.sliding_window, 8);
  EXPECT_DOUBLE_EQ(gemma3.attention_scale, 1.0 / std::sqrt(24.0));
  EXPECT_EQ(gemma3.rope(0).theta, 10000.0);
  EXPECT_EQ(gemma3.rope(1).theta, 1e6);

  ModelConfig swa = load_config(fixtures_dir() / "mistral-swa-tiny");
  EXPECT_THAT(swa.layer_types, ElementsAre(AttentionKind::Sliding, AttentionKind::Sliding));
  EXPECT_EQ(swa.sliding_window, 8);
  ModelConfig mistral = load_config(fixtures_dir() / "mistral-tiny");
  EXPECT_THAT(mistral.layer_types, ElementsAre(AttentionKind::Full, AttentionKind::Full));
  EXPECT_EQ(mistral.sliding_window, 0);
  EXPECT_DOUBLE_EQ(mistral.attention_scale, 0.25);

  ModelConfig llama = load_config(fixtures_dir() / "llama-tiny");
  EXPECT_EQ(llama.rope_full.type, RopeType::Llama3);
  EXPECT_EQ(llama.rope_full.factor, 8.0);
  EXPECT_EQ(llama.rope_full.original_max_positions, 64);

  ModelConfig gpt2 = load_config(fixtures_dir() / "gpt2-tiny");
  EXPECT_EQ(gpt2.intermediate_size, 256);  // n_inner null = 4 * n_embd
  EXPECT_EQ(gpt2.arch->positions, PositionKind::Learned);
  EXPECT_THAT(error_of([&] { rope_inv_freq(gpt2, 0); }), HasSubstr("no rotary embedding"));

  ModelConfig gptq = load_config(fixtures_dir() / "qwen2-tiny-gptq-int4");
  ASSERT_TRUE(gptq.gptq.has_value());
  EXPECT_EQ(gptq.gptq->bits, 4);
  EXPECT_EQ(gptq.gptq->group_size, 32);
  EXPECT_FALSE(gptq.gptq->sym);
}

// manifest.json lists transformers' own inv_freq buffers (float32).
TEST(Config, RopeInvFreqMatchesTheManifest) {
  GERBIL_REQUIRE_FIXTURES();
  int checked = 0;
  for (const auto& model : test::manifest()["models"]) {
    if (!model.contains("rope_inv_freq")) continue;  // the -f16/-bf16/-gptq copies
    ModelConfig c = load_config(fixtures_dir() / model["folder"].get<std::string>());
    for (const auto& [buffer, values] : model["rope_inv_freq"].items()) {
      SCOPED_TRACE(model["folder"].get<std::string>() + " " + buffer);
      auto expected = values.get<std::vector<double>>();
      for (int64_t layer = 0; layer < c.num_layers; ++layer) {
        bool applies = buffer == "model.rotary_emb.inv_freq" ||
                       (buffer.find("sliding") != std::string::npos) == c.sliding(layer);
        if (!applies) continue;
        std::vector<float> ours = rope_inv_freq(c, layer);
        ASSERT_EQ(ours.size(), expected.size());
        for (std::size_t i = 0; i < ours.size(); ++i)
          EXPECT_NEAR(ours[i], expected[i], 5e-7 * expected[i]) << "layer " << layer << " i " << i;
        ++checked;
      }
    }
  }
  // Both layers of the 9 single-buffer rotary models, and gemma3's one sliding and one full layer.
  EXPECT_EQ(checked, 2 * 9 + 2);
}

// Pre-transformers-5 checkpoints spell rope settings as rope_theta + rope_scaling; the frequencies
// must come out the same.
TEST(Config, OlderRopeSpellingsGiveTheSameFrequencies) {
  GERBIL_REQUIRE_FIXTURES();
  json llama = fixture_config("llama-tiny");
  json rope = llama["rope_parameters"];
  llama.erase("rope_parameters");
  llama["rope_theta"] = rope["rope_theta"];
  rope.erase("rope_theta");
  llama["rope_scaling"] = rope;
  EXPECT_EQ(rope_inv_freq(parse(llama), 0), rope_inv_freq(load_config(fixtures_dir() / "llama-tiny"), 0));

  // Old Gemma3: rope_theta for global layers, rope_local_base_freq for sliding ones, a layer pattern.
  json gemma3 = fixture_config("gemma3-tiny");
  gemma3.erase("rope_parameters");
  gemma3.erase("layer_types");
  gemma3["rope_theta"] = 1e6;
  gemma3["rope_local_base_freq"] = 10000.0;
  gemma3["sliding_window_pattern"] = 2;
  ModelConfig old = parse(gemma3);
  ModelConfig now = load_config(fixtures_dir() / "gemma3-tiny");
  EXPECT_EQ(old.layer_types, now.layer_types);
  EXPECT_EQ(rope_inv_freq(old, 0), rope_inv_freq(now, 0));
  EXPECT_EQ(rope_inv_freq(old, 1), rope_inv_freq(now, 1));
  // rope_scaling applies to the global layers only.
  gemma3["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 8.0}};
  ModelConfig scaled = parse(gemma3);
  EXPECT_EQ(rope_inv_freq(scaled, 0), rope_inv_freq(now, 0));
  EXPECT_FLOAT_EQ(rope_inv_freq(scaled, 1)[1], rope_inv_freq(now, 1)[1] / 8);
}

TEST(Config, LinearScalingDividesFrequencies) {
  GERBIL_REQUIRE_FIXTURES();
  json config = fixture_config("llama-plain-tiny");
  config["rope_parameters"] = {{"rope_theta", 10000.0}, {"rope_type", "linear"}, {"factor", 4.0}};
  std::vector<float> freq = rope_inv_freq(parse(config), 0);
  ASSERT_EQ(freq.size(), 8u);
  EXPECT_FLOAT_EQ(freq[0], 0.25f);
  EXPECT_FLOAT_EQ(freq[2], 0.1f / 4);  // 10000^(-4/16) / 4
}

// YaRN (transformers' _compute_yarn_parameters): with rotary_dim 16, base 10000 and an original context of 512,
// frequency index d(n) = 16 ln(512 / (2 pi n)) / (2 ln 10000) turns n times over that context: d(32) = 0.81 and
// d(1) = 3.82, rounded out to 0 and 4. Frequencies 0 and 4 on are kept and divided by the factor, those between
// mix the two linearly; cos and sin are scaled by 0.1 ln(factor) + 1.
TEST(Config, YarnKeepsFastFrequenciesAndStretchesSlowOnes) {
  GERBIL_REQUIRE_FIXTURES();
  json config = fixture_config("llama-plain-tiny");
  config["rope_parameters"] = {{"rope_theta", 10000.0}, {"rope_type", "yarn"}, {"factor", 4.0},
                               {"original_max_position_embeddings", 512}};
  config["max_position_embeddings"] = 512;  // as Qwen2.5's config keeps it when YaRN is added
  ModelConfig parsed = parse(config);
  EXPECT_EQ(context_length(parsed), 2048);  // the default context: the original one stretched 4 times
  std::vector<float> freq = rope_inv_freq(parsed, 0);
  ASSERT_EQ(freq.size(), 8u);
  for (int i = 0; i < 8; ++i) {
    double inv = std::pow(10000.0, -i / 8.0), scaled_share = std::min(i / 4.0, 1.0);
    EXPECT_FLOAT_EQ(freq[i], float(inv * (1 - scaled_share) + inv / 4 * scaled_share)) << "frequency " << i;
  }
  EXPECT_DOUBLE_EQ(parsed.rope_full.attention_factor, 0.1 * std::log(4.0) + 1);
  config["rope_parameters"]["attention_factor"] = 1.5;
  EXPECT_DOUBLE_EQ(parse(config).rope_full.attention_factor, 1.5);
  // Without an original context, the config's own is the original (transformers' fallback).
  config["rope_parameters"].erase("original_max_position_embeddings");
  EXPECT_EQ(parse(config).rope_full.original_max_positions, config["max_position_embeddings"].get<int64_t>());
}

// LongRoPE (Phi-3 128k, Phi-3.5, Phi-4-mini): frequency i divided by short_factor[i], or by long_factor[i] once
// the engine holds more positions than the original context; cos and sin scaled by
// sqrt(1 + ln(max / original) / ln(original)).
TEST(Config, LongRopeTakesItsLongFactorsPastTheOriginalContext) {
  GERBIL_REQUIRE_FIXTURES();
  json config = fixture_config("phi3-tiny");  // head_dim 16, rope_theta 10000
  std::vector<double> short_factors = {1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5}, long_factors = {2, 4, 6, 8, 10, 12, 14, 16};
  config["max_position_embeddings"] = 2048;
  config["original_max_position_embeddings"] = 256;  // at the top level, as Phi-3's configs keep it
  config["rope_parameters"] = {{"rope_theta", 10000.0}, {"rope_type", "longrope"},
                               {"short_factor", short_factors}, {"long_factor", long_factors}};
  ModelConfig parsed = parse(config);
  EXPECT_EQ(context_length(parsed), 2048);  // max_position_embeddings, already the stretched context
  std::vector<float> within = rope_inv_freq(parsed, 0, 256), beyond = rope_inv_freq(parsed, 0, 257);
  ASSERT_EQ(within.size(), 8u);
  ASSERT_EQ(beyond.size(), 8u);
  for (int i = 0; i < 8; ++i) {
    EXPECT_FLOAT_EQ(within[i], float(std::pow(10000.0, -i / 8.0) / short_factors[i])) << "frequency " << i;
    EXPECT_FLOAT_EQ(beyond[i], float(std::pow(10000.0, -i / 8.0) / long_factors[i])) << "frequency " << i;
  }
  EXPECT_DOUBLE_EQ(parsed.rope_full.attention_factor, std::sqrt(1 + std::log(8.0) / std::log(256.0)));
  // The older spelling: rope_scaling of type "su".
  config.erase("rope_parameters");
  config["rope_theta"] = 10000.0;
  config["rope_scaling"] = {{"type", "su"}, {"short_factor", short_factors}, {"long_factor", long_factors}};
  EXPECT_EQ(rope_inv_freq(parse(config), 0, 4096), beyond);
}

TEST(Config, SlidingLayersFromQwenSettings) {
  GERBIL_REQUIRE_FIXTURES();
  json qwen = fixture_config("qwen2-tiny");
  qwen.erase("layer_types");
  EXPECT_THAT(parse(qwen).layer_types, ElementsAre(AttentionKind::Full, AttentionKind::Full));
  qwen["use_sliding_window"] = true;
  qwen["sliding_window"] = 4;
  qwen["max_window_layers"] = 1;
  ModelConfig c = parse(qwen);
  EXPECT_THAT(c.layer_types, ElementsAre(AttentionKind::Full, AttentionKind::Sliding));
  EXPECT_EQ(c.sliding_window, 4);
}

TEST(Config, SpecialTokensMergeGenerationConfig) {
  GERBIL_REQUIRE_FIXTURES();
  json config = fixture_config("llama-tiny");
  config["eos_token_id"] = json::array({2, 7});
  json generation = {{"eos_token_id", {9, 2}},
                     {"bos_token_id", 5},
                     {"temperature", 0.6},
                     {"top_p", 0.9},
                     {"do_sample", true}};
  ModelConfig c = parse_config(config, "/m/config.json", &generation);
  EXPECT_THAT(c.eos_token_ids, ElementsAre(9, 2, 7));
  EXPECT_EQ(c.bos_token_id, 5);
  EXPECT_EQ(c.generation.temperature, 0.6);
  EXPECT_EQ(c.generation.top_p, 0.9);
  EXPECT_EQ(c.generation.do_sample, true);
  EXPECT_FALSE(c.generation.top_k.has_value());
}

TEST(Config, QuantizeConfigJsonIsAFallback) {
  GERBIL_REQUIRE_FIXTURES();
  ScratchDir dir;
  json config = fixture_config("qwen2-tiny-gptq-int4");
  config.erase("quantization_config");
  test::write_json_file(dir / "config.json", config);
  test::write_file(dir / "quantize_config.json",
                   test::read_text(fixtures_dir() / "qwen2-tiny-gptq-int4" / "quantize_config.json"));
  ModelConfig c = load_config(dir.path());
  ASSERT_TRUE(c.gptq.has_value());
  EXPECT_EQ(c.gptq->group_size, 32);
}

// --- bad configs ---------------------------------------------------------------------------------

struct BadConfig {
  std::string what;
  std::string fixture;
  std::function<void(json&)> edit;
  std::vector<std::string> message_parts;
};

// Each case's edit of its fixture's config.json must be refused with an error naming the file and parts.
void expect_refused(const std::vector<BadConfig>& cases) {
  for (const BadConfig& bad : cases) {
    SCOPED_TRACE(bad.what);
    json config = fixture_config(bad.fixture);
    bad.edit(config);
    std::string message = error_of([&] { parse(config); });
    EXPECT_THAT(message, HasSubstr("/models/x/config.json"));
    for (const std::string& part : bad.message_parts) EXPECT_THAT(message, HasSubstr(part));
  }
}

TEST(Config, RejectsImpossibleOrUnsupportedConfigs) {
  GERBIL_REQUIRE_FIXTURES();
  const std::vector<BadConfig> cases = {
      {"heads do not divide hidden",
       "qwen2-tiny",
       [](json& c) { c["num_attention_heads"] = 6; },
       {"\"num_attention_heads\"", "does not divide hidden_size"}},
      {"zero layers",
       "qwen2-tiny",
       [](json& c) { c["num_hidden_layers"] = 0; },
       {"\"num_hidden_layers\"", "positive"}},
      {"negative hidden",
       "llama-tiny",
       [](json& c) { c["hidden_size"] = -64; },
       {"\"hidden_size\"", "positive"}},
      {"gpt2 spelling", "gpt2-tiny", [](json& c) { c["n_head"] = 0; }, {"\"n_head\"", "positive"}},
      {"kv heads do not divide heads",
       "qwen2-tiny",
       [](json& c) { c["num_key_value_heads"] = 3; },
       {"\"num_key_value_heads\"", "does not divide"}},
      {"missing vocab", "llama-tiny", [](json& c) { c.erase("vocab_size"); }, {"\"vocab_size\"", "missing"}},
      {"fractional size",
       "llama-tiny",
       [](json& c) { c["intermediate_size"] = 12.5; },
       {"\"intermediate_size\"", "integer"}},
      {"missing eps",
       "llama-tiny",
       [](json& c) { c.erase("rms_norm_eps"); },
       {"\"rms_norm_eps\"", "missing"}},
      {"unsupported architecture",
       "llama-tiny",
       [](json& c) { c["architectures"] = {"MambaForCausalLM"}; },
       {"\"architectures\"", "MambaForCausalLM", "supported:", "Qwen2ForCausalLM", "GPT2LMHeadModel"}},
      {"no architectures",
       "llama-tiny",
       [](json& c) { c.erase("architectures"); },
       {"\"architectures\"", "missing"}},
      {"unsupported activation",
       "llama-tiny",
       [](json& c) { c["hidden_act"] = "relu"; },
       {"\"hidden_act\"", "relu"}},
      {"unsupported rope type",
       "llama-tiny",
       [](json& c) { c["rope_parameters"]["rope_type"] = "dynamic"; },
       {"\"rope_parameters.rope_type\"", "dynamic", "default, linear, llama3, yarn, longrope"}},
      {"a yarn attention factor that divides by zero",
       "llama-tiny",
       [](json& c) {
         c["rope_parameters"] = {{"rope_type", "yarn"}, {"rope_theta", 10000.0}, {"factor", std::exp(1.0)},
                                 {"mscale", 1.0}, {"mscale_all_dim", -10.0}};
       },
       {"\"rope_parameters.mscale_all_dim\"", "attention factor of inf"}},
      {"yarn rope without its factor",
       "llama-tiny",
       [](json& c) { c["rope_parameters"] = {{"rope_type", "yarn"}, {"rope_theta", 10000.0}}; },
       {"\"rope_parameters.factor\"", "missing"}},
      {"longrope factors that do not fit the rotary dimension",
       "phi3-tiny",
       [](json& c) {
         c["rope_parameters"] = {{"rope_type", "longrope"}, {"rope_theta", 10000.0},
                                 {"short_factor", json::array({1.0, 1.0})}, {"long_factor", json::array({1.0, 2.0})}};
       },
       {"\"rope_parameters.short_factor\"", "holds 2 factors", "8 frequencies"}},
      {"a longrope factor that is not positive",
       "phi3-tiny",
       [](json& c) {
         c["rope_parameters"] = {{"rope_type", "longrope"}, {"rope_theta", 10000.0},
                                 {"short_factor", std::vector<double>(8, 1.0)}, {"long_factor", std::vector<double>(8, 0.0)}};
       },
       {"\"rope_parameters.long_factor\"", "positive numbers", "index 0"}},
      {"llama3 rope without its factors",
       "llama-tiny",
       [](json& c) { c["rope_parameters"].erase("low_freq_factor"); },
       {"\"rope_parameters.low_freq_factor\"", "missing"}},
      {"old rope_scaling type",
       "llama-plain-tiny",
       [](json& c) {
         c.erase("rope_parameters");
         c["rope_scaling"] = {{"type", "dynamic"}, {"factor", 2.0}};
       },
       {"\"rope_scaling.type\"", "dynamic"}},
      {"negative rope theta",
       "llama-plain-tiny",
       [](json& c) { c["rope_parameters"]["rope_theta"] = -1.0; },
       {"\"rope_parameters.rope_theta\"", "positive"}},
      {"odd rotary dimension",
       "phi-tiny",
       [](json& c) { c["rope_parameters"]["partial_rotary_factor"] = 0.2; },
       {"\"partial_rotary_factor\"", "rotary dimension"}},
      {"layer_types of the wrong length",
       "gemma3-tiny",
       [](json& c) { c["layer_types"] = {"full_attention"}; },
       {"\"layer_types\"", "must list 2"}},
      {"unknown layer type",
       "gemma3-tiny",
       [](json& c) {
         c["layer_types"] = {"full_attention", "chunked_attention"};
       },
       {"\"layer_types\"", "chunked_attention"}},
      {"sliding layer without a window",
       "gemma3-tiny",
       [](json& c) { c["sliding_window"] = nullptr; },
       {"\"sliding_window\"", "missing"}},
      {"bad eos",
       "llama-tiny",
       [](json& c) { c["eos_token_id"] = "</s>"; },
       {"\"eos_token_id\"", "token id"}},
      {"8-bit gptq",
       "qwen2-tiny-gptq-int4",
       [](json& c) { c["quantization_config"]["bits"] = 8; },
       {"\"quantization_config.bits\"", "only 4-bit"}},
      {"bitsandbytes",
       "qwen2-tiny-gptq-int4",
       [](json& c) { c["quantization_config"]["quant_method"] = "bitsandbytes"; },
       {"\"quantization_config.quant_method\"", "bitsandbytes", "supported: gptq, awq"}},
      {"gptq v2 layout",
       "qwen2-tiny-gptq-int4",
       [](json& c) { c["quantization_config"]["checkpoint_format"] = "gptq_v2"; },
       {"\"quantization_config.checkpoint_format\"", "gptq_v2"}},
      {"zero group size",
       "qwen2-tiny-gptq-int4",
       [](json& c) { c["quantization_config"]["group_size"] = 0; },
       {"\"quantization_config.group_size\"", "positive or -1"}},
      {"phi qk layernorm", "phi-tiny", [](json& c) { c["qk_layernorm"] = true; }, {"\"qk_layernorm\""}},
  };
  expect_refused(cases);
}

// Sizes beyond the bounds in config.h, and numbers that would wrap when read as int64_t or int32_t.
TEST(Config, RejectsSizesBeyondItsBounds) {
  GERBIL_REQUIRE_FIXTURES();
  const std::string above = "more than the";
  const std::vector<BadConfig> cases = {
      {"layers", "qwen2-tiny", [](json& c) { c["num_hidden_layers"] = kMaxLayers + 1; },
       {"\"num_hidden_layers\"", above, "1024"}},
      {"heads", "llama-plain-tiny",
       [](json& c) {
         c["num_attention_heads"] = 2048;
         c["num_key_value_heads"] = 2048;
         c["head_dim"] = 16;
       },
       {"\"num_attention_heads\"", above}},
      {"kv heads", "qwen2-tiny", [](json& c) { c["num_key_value_heads"] = kMaxHeads * 4; },
       {"\"num_key_value_heads\"", above}},
      {"head_dim", "qwen3-tiny", [](json& c) { c["head_dim"] = kMaxHeadDim + 2; }, {"\"head_dim\"", above}},
      {"head_dim from hidden", "llama-plain-tiny",
       [](json& c) {
         c["hidden_size"] = 8192 * 4;
         c["num_attention_heads"] = 4;
         c.erase("head_dim");
       },
       {"\"num_attention_heads\"", "head_dim 8192", above}},
      {"hidden", "llama-tiny", [](json& c) { c["hidden_size"] = kMaxHidden * 2; }, {"\"hidden_size\"", above}},
      {"gpt2 hidden", "gpt2-tiny", [](json& c) { c["n_embd"] = int64_t(1) << 40; }, {"\"n_embd\"", above}},
      {"intermediate", "llama-tiny", [](json& c) { c["intermediate_size"] = kMaxIntermediate + 1; },
       {"\"intermediate_size\"", above}},
      {"vocab", "gemma3-tiny", [](json& c) { c["vocab_size"] = kMaxVocab + 1; }, {"\"vocab_size\"", above}},
      // 2^32 + 256 would become 256 in the uint32_t the GPU graph takes.
      {"positions", "llama-tiny", [](json& c) { c["max_position_embeddings"] = (int64_t(1) << 32) + 256; },
       {"\"max_position_embeddings\"", above}},
      {"window", "mistral-swa-tiny", [](json& c) { c["sliding_window"] = (int64_t(1) << 32) + 8; },
       {"\"sliding_window\"", above}},
      {"llama3 rope context", "llama-tiny",
       [](json& c) { c["rope_parameters"]["original_max_position_embeddings"] = int64_t(1) << 40; },
       {"\"rope_parameters.original_max_position_embeddings\"", above}},
      // Read as int64_t, 2^64 - 1 would be -1.
      {"2^64 - 1", "llama-tiny", [](json& c) { c["vocab_size"] = std::numeric_limits<uint64_t>::max(); },
       {"\"vocab_size\"", "18446744073709551615", "too large"}},
      // Read as int32_t (the generator's stop ids), 2^32 + 2 would be 2.
      {"eos beyond int32", "llama-tiny", [](json& c) { c["eos_token_id"] = (int64_t(1) << 32) + 2; },
       {"\"eos_token_id\"", "token id"}},
      {"gptq group", "qwen2-tiny-gptq-int4",
       [](json& c) { c["quantization_config"]["group_size"] = int64_t(1) << 33; },
       {"\"quantization_config.group_size\"", above}},
      {"bos 2^63", "llama-tiny", [](json& c) { c["bos_token_id"] = uint64_t(1) << 63; },
       {"\"bos_token_id\"", "token id"}},
  };
  expect_refused(cases);
}

// Fields transformers applies and gerbil does not are refused unless they change nothing.
TEST(Config, RefusesFieldsThatChangeTheMathUnapplied) {
  GERBIL_REQUIRE_FIXTURES();
  const std::vector<BadConfig> cases = {
      {"attention soft-capping (Gemma 2)", "gemma3-tiny", [](json& c) { c["attn_logit_softcapping"] = 50.0; },
       {"\"attn_logit_softcapping\"", "50.0", "soft-capping"}},
      {"final soft-capping", "gemma3-tiny", [](json& c) { c["final_logit_softcapping"] = 30.0; },
       {"\"final_logit_softcapping\"", "soft-capping of the logits"}},
      {"soft-capping on another family", "llama-tiny", [](json& c) { c["final_logit_softcapping"] = 30.0; },
       {"\"final_logit_softcapping\""}},
      {"bidirectional attention", "gemma3-tiny", [](json& c) { c["use_bidirectional_attention"] = true; },
       {"\"use_bidirectional_attention\"", "causal mask"}},
      {"gpt2 unscaled attention", "gpt2-tiny", [](json& c) { c["scale_attn_weights"] = false; },
       {"\"scale_attn_weights\""}},
      {"gpt2 attention scaled by layer", "gpt2-tiny", [](json& c) { c["scale_attn_by_inverse_layer_idx"] = true; },
       {"\"scale_attn_by_inverse_layer_idx\""}},
      {"attention bias on Mistral", "mistral-tiny", [](json& c) { c["attention_bias"] = true; },
       {"\"attention_bias\"", "MistralForCausalLM has no attention biases"}},
      {"mlp bias on Qwen2", "qwen2-tiny", [](json& c) { c["mlp_bias"] = true; },
       {"\"mlp_bias\"", "Qwen2ForCausalLM has no MLP biases"}},
      {"query_pre_attn_scalar outside Gemma3", "llama-tiny", [](json& c) { c["query_pre_attn_scalar"] = 64; },
       {"\"query_pre_attn_scalar\"", "LlamaForCausalLM"}},
      {"Gemma3 without query_pre_attn_scalar", "gemma3-tiny", [](json& c) { c.erase("query_pre_attn_scalar"); },
       {"\"query_pre_attn_scalar\"", "missing"}},
      {"rope_scaling beside rope_parameters", "llama-tiny",
       [](json& c) { c["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}}; },
       {"\"rope_scaling\"", "rope_parameters"}},
  };
  expect_refused(cases);
  // The neutral values are accepted: null soft-capping (Gemma3's config.json), flags that ask for nothing.
  json gemma3 = fixture_config("gemma3-tiny");
  gemma3["final_logit_softcapping"] = nullptr;
  gemma3["use_bidirectional_attention"] = false;
  EXPECT_NO_THROW(parse(gemma3));
  json mistral = fixture_config("mistral-tiny");
  mistral["attention_bias"] = false;
  mistral["mlp_bias"] = false;
  EXPECT_NO_THROW(parse(mistral));
}

TEST(Config, RejectsUnreadableFiles) {
  ScratchDir dir;
  EXPECT_THAT(error_of([&] { load_config(dir.path()); }), HasSubstr("no config.json"));
  test::write_file(dir / "config.json", "{\"vocab_size\": 5,");
  EXPECT_THAT(error_of([&] { load_config(dir.path()); }),
              AllOf(HasSubstr((dir / "config.json").string()), HasSubstr("not valid JSON")));
  test::write_file(dir / "config.json", "{\"vocab_size\": 5, \"vocab_size\": 6}");
  EXPECT_THAT(error_of([&] { load_config(dir.path()); }),
              AllOf(HasSubstr("\"vocab_size\""), HasSubstr("twice")));
}

TEST(Architecture, TableIsConsistent) {
  EXPECT_EQ(architectures().size(), 9u);
  for (const ArchitectureSpec& spec : architectures()) {
    SCOPED_TRACE(std::string(spec.name));
    EXPECT_EQ(find_architecture(spec.name), &spec);
    EXPECT_TRUE(spec.has(Role::Embed) && spec.has(Role::FinalNorm) && spec.has(Role::LmHead));
    EXPECT_TRUE(spec.has(Role::AttnNorm) && spec.has(Role::O) && spec.has(Role::Down));
    EXPECT_NE(spec.has(Role::Qkv), spec.has(Role::Q));  // fused or separate, never both
    EXPECT_EQ(spec.has(Role::Q), spec.has(Role::K));
    EXPECT_EQ(spec.has(Role::QNorm), spec.has(Role::KNorm));
    EXPECT_EQ(spec.has(Role::PosEmbed), spec.positions == PositionKind::Learned);
    EXPECT_EQ(spec.has(Role::MlpNorm), !spec.parallel_block);  // a parallel block shares one norm
    EXPECT_TRUE(spec.has(Role::Up) || spec.has(Role::GateUp));
  }
  EXPECT_EQ(find_architecture("BertModel"), nullptr);
  const ArchitectureSpec& gpt2 = *find_architecture("GPT2LMHeadModel");
  EXPECT_EQ(gpt2.tensor_name(Role::Qkv, 1, "bias"), "transformer.h.1.attn.c_attn.bias");
  EXPECT_EQ(gpt2.tensor_name(Role::PosEmbed, -1, "weight"), "transformer.wpe.weight");
  EXPECT_FALSE(gpt2.gated_mlp());
  const ArchitectureSpec& gemma3 = *find_architecture("Gemma3ForCausalLM");
  EXPECT_EQ(gemma3.tensor_name(Role::MlpNorm, 0, "weight"),
            "model.layers.0.pre_feedforward_layernorm.weight");
  EXPECT_EQ(gemma3.tensor_name(Role::AttnPostNorm, 0, "weight"),
            "model.layers.0.post_attention_layernorm.weight");
  EXPECT_TRUE(gemma3.sandwich_norms() && gemma3.qk_norm() && gemma3.embed_scale_sqrt_hidden);
  EXPECT_THAT(error_of([&] { gpt2.tensor_name(Role::Gate, 0, "weight"); }), HasSubstr("no gate tensor"));
}

}  // namespace
}  // namespace gerbil
