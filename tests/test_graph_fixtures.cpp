// Every fixture model (../shared/fixtures) run through the forward graph and compared with the logits
// transformers computed in float64: one prefill of all 20 tokens, the same with the later positions fed
// one at a time through the KV cache, and a 16-token greedy continuation; and decoding past the point where
// attention switches kernels against a prefill of the same tokens.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gerbil/error.h"
#include "graph/model.h"
#include "kernels/model.h"
#include "model/safetensors.h"
#include "model/synth.h"
#include "reference/model.h"
#include "support/logits.h"
#include "support/paths.h"
#include "test_model_support.h"
#include "support/device.h"

namespace gerbil::graph {
namespace {

using test::argmax;
using test::device;
using test::fixtures_dir;
using test::read_f32;
using test::relative_error;

struct FixtureCase {
  std::string name;
  std::string dtype;
};

std::vector<FixtureCase> fixture_models() {
  std::vector<FixtureCase> out;
  auto manifest_path = fixtures_dir() / "manifest.json";
  if (!std::filesystem::exists(manifest_path)) return {{"fixtures-absent", ""}};
  auto manifest = nlohmann::json::parse(test::read_text(manifest_path));
  for (auto& model : manifest["models"]) out.push_back({model["folder"], model["weights_dtype"]});
  return out;
}

constexpr double kF16Bound = 1e-3;
constexpr double kQ8CacheBound = 1.5e-2;

class FixtureModel : public ::testing::TestWithParam<FixtureCase> {
 protected:
  void SetUp() override {
    GERBIL_REQUIRE_FIXTURES();
    dir_ = fixtures_dir() / GetParam().name;
    files_ = std::make_unique<ModelFiles>(ModelFiles::open(dir_));
    model_ = std::make_unique<Model>(device(), *files_, ModelOptions{.context = 64});
    vocab_ = size_t(files_->config().vocab_size);
    // The bounds: 1e-4 for float32 checkpoints, 1e-3 for f16 / bf16 (and GPTQ, whose other tensors are f16).
    bound_ = GetParam().dtype == "float32" ? 1e-4 : kF16Bound;
  }

  std::vector<int32_t> input_ids() {
    auto ids = nlohmann::json::parse(test::read_text(dir_ / "ref" / "input_ids.json"));
    return ids.get<std::vector<int32_t>>();
  }

  void expect_rows_match(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    size_t rows = want.size() / vocab_;
    for (size_t t = 0; t < rows; ++t) {
      std::span<const float> g(got.data() + t * vocab_, vocab_), w(want.data() + t * vocab_, vocab_);
      double err = relative_error(g, w);
      EXPECT_LT(err, bound_) << what << ": position " << t;
      if (argmax_margin_ > 0 && top_margin(w) < argmax_margin_ * rms(w)) continue;
      ++argmax_compared_;
      EXPECT_EQ(argmax(g), argmax(w)) << what << ": argmax at position " << t;
    }
  }

  // The first half of the reference prompt as one prefill, then the rest one decode step at a time.
  void expect_decode_from_middle_matches(Model& model, const char* what) {
    auto want = read_f32(dir_ / "ref" / "logits.f32");
    auto ids = input_ids();
    const size_t split = ids.size() / 2;
    auto got = model.forward(std::span(ids).first(split), true);
    for (size_t t = split; t < ids.size(); ++t) {
      auto row = model.forward(std::span(ids).subspan(t, 1), true);
      got.insert(got.end(), row.begin(), row.end());
    }
    EXPECT_EQ(model.position(), ids.size());
    expect_rows_match(got, want, what);
  }

  static double rms(std::span<const float> row) {
    double sum = 0;
    for (float x : row) sum += double(x) * x;
    return std::sqrt(sum / double(row.size()));
  }
  // The reference's lead of its best logit over the second.
  static double top_margin(std::span<const float> row) {
    std::vector<float> sorted(row.begin(), row.end());
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
    return double(sorted[0]) - sorted[1];
  }

  std::filesystem::path dir_;
  // Argmax is compared only at positions whose reference leads by argmax_margin_ x its logits' RMS (0: all).
  double argmax_margin_ = 0;
  size_t argmax_compared_ = 0;
  std::unique_ptr<ModelFiles> files_;
  std::unique_ptr<Model> model_;
  size_t vocab_ = 0;
  double bound_ = 0;
};

TEST_P(FixtureModel, PrefillLogitsMatchTransformers) {
  auto want = read_f32(dir_ / "ref" / "logits.f32");
  auto got = model_->forward(input_ids(), /*all_logits=*/true);
  expect_rows_match(got, want, "prefill");
}

TEST_P(FixtureModel, DecodeThroughTheKvCacheMatches) { expect_decode_from_middle_matches(*model_, "decode-from-middle"); }

// Both ways of normalising a decode step's product inputs, whichever the adapter's tuning picks for the
// fixtures' hidden sizes (kernels::prepared_norm_min_hidden: an H200's rule leaves them out, lavapipe's takes
// them): the prepared norms (products writing x * the next norm's weight for the one after) and the fused ones.
TEST_P(FixtureModel, DecodeWithPreparedNormsMatches) {
  Model model(device(), *files_, ModelOptions{.context = 64, .prepared_norms = PreparedNorms::Always});
  expect_decode_from_middle_matches(model, "decode-from-middle, prepared norms");
}
TEST_P(FixtureModel, DecodeWithoutPreparedNormsMatches) {
  Model model(device(), *files_, ModelOptions{.context = 64, .prepared_norms = PreparedNorms::Never});
  expect_decode_from_middle_matches(model, "decode-from-middle, norms not prepared");
}

// f32 and bf16 weights converted to f16 as they upload (--weights f16) keep the logits within the bound of
// the f16 checkpoints, prefill and decoding.
TEST_P(FixtureModel, F16WeightsMatchWithinTheF16Bound) {
  Model model(device(), *files_, ModelOptions{.context = 64, .weights = WeightPolicy::F16});
  bound_ = std::max(bound_, kF16Bound);
  expect_decode_from_middle_matches(model, "decode-from-middle, f16 weights");
}

// An f16 KV cache (--kv-cache f16, the default for 16-bit checkpoints) rounds every stored key and value to f16
// (2^-11 relative), which moves the logits by about as much as f16 weights do, so the f16 checkpoints' bound
// holds for every fixture, float32 ones included: prefill (the block attention reads the rounded cache of its own
// chunk) and decoding (the per-query kernels). A cache written or read in the wrong layout is off by O(1).
TEST_P(FixtureModel, F16KvCacheMatchesWithinTheF16Bound) {
  Model model(device(), *files_, ModelOptions{.context = 64, .kv_cache = KvCache::F16});
  ASSERT_EQ(model.kv_type(), kernels::KvType::F16);
  bound_ = std::max(bound_, kF16Bound);
  expect_decode_from_middle_matches(model, "decode-from-middle, f16 KV cache");
}

// The cache's type by default: f16 for 16-bit checkpoints (GPTQ's other tensors are f16), f32 for float32 ones,
// which thereby keep their 1e-4 bound; either is taken when asked for, and an f16 cache takes half the bytes.
TEST_P(FixtureModel, KvCacheFollowsTheCheckpointUnlessAskedFor) {
  bool float32 = GetParam().dtype == "float32";
  EXPECT_EQ(model_->kv_type(), float32 ? kernels::KvType::F32 : kernels::KvType::F16);
  Model f16_cache(device(), *files_, ModelOptions{.context = 64, .kv_cache = KvCache::F16});
  Model f32_cache(device(), *files_, ModelOptions{.context = 64, .kv_cache = KvCache::F32});
  EXPECT_EQ(f16_cache.kv_type(), kernels::KvType::F16);
  EXPECT_EQ(f32_cache.kv_type(), kernels::KvType::F32);
  EXPECT_EQ(f16_cache.kv_cache_bytes(), f32_cache.kv_cache_bytes() / 2);
}

// The 16-bit checkpoints with the f32 cache they no longer get by default, within their bound (the float32
// ones decode through it in every other test).
TEST_P(FixtureModel, F32KvCacheMatches) {
  if (GetParam().dtype == "float32") GTEST_SKIP() << "the default model already has an f32 cache";
  Model model(device(), *files_, ModelOptions{.context = 64, .kv_cache = KvCache::F32});
  ASSERT_EQ(model.kv_type(), kernels::KvType::F32);
  expect_decode_from_middle_matches(model, "decode-from-middle, f32 KV cache");
}

// A q8 KV cache (--kv-cache q8) keeps each key and value row as int8 codes with scale absmax / 127: every value
// moves by up to 1/254 of its row's largest, ~30x an f16 cache's rounding, and the logits move accordingly
// (lavapipe, 2026-12-02: 4e-3 to 7.5e-3 per position over the fixtures). The bound is 1.5e-2, twice that; a cache
// written or read in the wrong layout, or a scale left out, is off by O(1). The argmax must match wherever the
// reference's best logit leads the second by more than 10 bound x its logits' RMS (9 to 16 of the 20 positions
// of each fixture; closer calls may flip within the bound, though none did).
TEST_P(FixtureModel, Q8KvCacheMatchesWithinItsBound) {
  Model model(device(), *files_, ModelOptions{.context = 64, .kv_cache = KvCache::Q8});
  ASSERT_EQ(model.kv_type(), kernels::KvType::Q8);
  bound_ = kQ8CacheBound;
  argmax_margin_ = 10 * bound_;
  expect_decode_from_middle_matches(model, "decode-from-middle, q8 KV cache");
  EXPECT_GT(argmax_compared_, 0u) << "no position's margin allowed an argmax comparison";
}

// A q8 cache takes a byte per element and a 4-byte scale per (token, kv head): (head_dim + 4) / (4 head_dim) of
// f32's bytes.
TEST_P(FixtureModel, Q8KvCacheTakesAQuarterOfTheBytesPlusScales) {
  Model q8_cache(device(), *files_, ModelOptions{.context = 64, .kv_cache = KvCache::Q8});
  Model f32_cache(device(), *files_, ModelOptions{.context = 64, .kv_cache = KvCache::F32});
  uint64_t head_dim = uint64_t(files_->config().head_dim);
  EXPECT_EQ(q8_cache.kv_cache_bytes() * 4 * head_dim, f32_cache.kv_cache_bytes() * (head_dim + 4));
}

// Prompt products in f16 arithmetic (--arithmetic f16, on adapters with shader-f16): x rounded to f16 in every
// product of every layer, not only the weights, and 8 products at a time summed in f16, so the bound is
// looser than the f16 checkpoints' (lavapipe: 1.0-1.5e-3 per position; an unwritten or misplaced sum is O(1)).
TEST_P(FixtureModel, F16ArithmeticPrefillMatchesWithinItsBound) {
  if (!device().features().shader_f16) GTEST_SKIP() << "the adapter lacks shader-f16";
  Model model(device(), *files_, ModelOptions{.context = 64, .arithmetic = kernels::Arithmetic::F16});
  bound_ = 4e-3;
  expect_rows_match(model.forward(input_ids(), true), read_f32(dir_ / "ref" / "logits.f32"), "prefill, f16 arithmetic");
}

TEST_P(FixtureModel, GreedyContinuationMatches) {
  auto greedy = nlohmann::json::parse(test::read_text(dir_ / "ref" / "greedy.json"));
  auto prompt = greedy["prompt_ids"].get<std::vector<int32_t>>();
  auto expected = greedy["new_ids"].get<std::vector<int32_t>>();
  auto want_logits = read_f32(dir_ / "ref" / "greedy_logits.f32");
  std::vector<float> got_logits;
  std::vector<int32_t> generated;
  auto logits = model_->forward(prompt);
  for (size_t i = 0; i < expected.size(); ++i) {
    got_logits.insert(got_logits.end(), logits.begin(), logits.end());
    generated.push_back(int32_t(argmax(logits)));
    if (i + 1 < expected.size()) logits = model_->forward(std::span(generated).last(1));
  }
  EXPECT_EQ(generated, expected);
  expect_rows_match(got_logits, want_logits, "greedy");
}

// Decode steps switch attention kernels as the cache grows (one dispatch up to one key chunk, split-KV past
// it): the rows decoded one at a time on either side of the switch must match one prefill of them all.
TEST_P(FixtureModel, DecodeAcrossTheSplitAttentionSwitchMatchesPrefill) {
  constexpr uint32_t kPrompt = 120, kTotal = 160;
  if (files_->config().max_position_embeddings < kTotal) GTEST_SKIP() << "the model's context is below " << kTotal;
  Model model(device(), *files_, ModelOptions{.context = kTotal});
  ASSERT_EQ(kernels::flash_attention_splits(kPrompt), 1u);
  ASSERT_GT(kernels::flash_attention_splits(kTotal), 1u);
  std::vector<int32_t> ids(kTotal);
  for (uint32_t i = 0; i < kTotal; ++i) ids[i] = int32_t((i * 7919u + 13u) % vocab_);
  auto want = model.forward(ids, /*all_logits=*/true);
  model.reset();
  model.forward(std::span(ids).first(kPrompt));
  std::vector<float> got;
  auto combines = [&] {
    auto entries = model.describe(1);
    return std::count_if(entries.begin(), entries.end(), [](auto& e) { return e.kernel == "flash_attention_combine"; });
  };
  for (uint32_t t = kPrompt; t < kTotal; ++t) {
    // The step holding t + 1 keys: one attention dispatch per layer up to one chunk, two past it.
    EXPECT_EQ(combines(), kernels::flash_attention_splits(t + 1) > 1 ? files_->config().num_layers : 0) << "at " << t;
    auto row = model.forward(std::span(ids).subspan(t, 1));
    got.insert(got.end(), row.begin(), row.end());
  }
  expect_rows_match(got, std::vector<float>(want.begin() + ptrdiff_t(kPrompt * vocab_), want.end()),
                    "decode across the split switch");
}

// A profile times the dispatches a real step records, one timing each, and leaves the cache position alone.
TEST_P(FixtureModel, ProfileTimesEveryDispatchOfTheStep) {
  auto ids = input_ids();
  model_->forward(std::span(ids).first(5));
  for (uint32_t tokens : {1u, 7u}) {
    auto entries = model_->describe(tokens);
    std::erase_if(entries, [](const StepEntry& e) { return e.kernel == "copy"; });
    auto timings = model_->profile(tokens);
    EXPECT_EQ(model_->position(), 5u);
    ASSERT_EQ(timings.size(), entries.size() + (tokens == 1 ? 2 : 0)) << tokens;  // + the greedy argmax pair
    for (size_t i = 0; i < entries.size(); ++i)
      EXPECT_EQ(timings[i].label, entries[i].label + "|" + entries[i].kernel) << tokens;
    double total = 0;
    for (const auto& t : timings) total += t.ns;
    EXPECT_GT(total, 0.0) << tokens;  // real GPU time was measured
  }
  EXPECT_THROW(model_->profile(64), Error);  // past the context of 64 from position 5
}

INSTANTIATE_TEST_SUITE_P(Fixtures, FixtureModel, ::testing::ValuesIn(fixture_models()),
                         [](const auto& info) {
                           std::string name = info.param.name;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// Decoding a Llama-style layer takes five dispatches where the adapter has subgroups: the RMSNorms ride in
// the projections after them and the gate activation in the gate|up projection.
TEST(DecodeGraph, FusesNormsAndGateIntoTheProjections) {
  GERBIL_REQUIRE_FIXTURES();
  ModelFiles files = ModelFiles::open(fixtures_dir() / "llama-tiny");
  if (!kernels::linear_can_fuse(device(), 1, uint32_t(files.config().hidden_size),
                                   kernels::WeightType::F32))
    GTEST_SKIP() << "the adapter lacks subgroups";
  Model model(device(), files, ModelOptions{.context = 32});
  auto entries = model.describe(1);
  for (const char* separate : {"rmsnorm_vec4", "gated_act", "gated_act_vec4", "qkv_rope_store"})
    EXPECT_EQ(std::count_if(entries.begin(), entries.end(), [&](auto& e) { return e.kernel == separate; }), 0)
        << separate;
  // embed, 5 per layer, argmax is not in a logits step: embed + 5 * layers + lm_head.
  EXPECT_EQ(entries.size(), 2 + 5 * size_t(files.config().num_layers));
}

// A step of a few rows (a batched decode step, or as here a short prompt) runs its gate|up projection in
// linear_rows.wgsl, which applies the gate activation itself: no gated_act dispatch follows it.
TEST(BatchedGraph, GatesInTheGateUpProjection) {
  GERBIL_REQUIRE_FIXTURES();
  ModelFiles files = ModelFiles::open(fixtures_dir() / "llama-tiny");
  Model model(device(), files, ModelOptions{.context = 32});
  auto entries = model.describe(kernels::kLinearRowsMax);
  auto count = [&](auto matches) { return std::count_if(entries.begin(), entries.end(), matches); };
  EXPECT_EQ(count([](auto& e) { return e.kernel.starts_with("gated_act"); }), 0);
  EXPECT_EQ(count([](auto& e) { return e.label.ends_with("gate_up") && e.kernel == "linear_rows"; }),
            files.config().num_layers);
}

// Pipelines created at load (ModelOptions::pipelines_at_load, as gerbil::Engine and the CLI load models) are the
// ones the steps then use: the same logits as a model that creates each pipeline on first use, also where the
// context is shorter than a prompt chunk (the traced prompt lengths stop at the context; they once ran past it and
// the load failed).
TEST(Pipelines, CreatedAtLoadServeTheStepsWithAContextShorterThanAChunk) {
  GERBIL_REQUIRE_FIXTURES();
  ModelFiles files = ModelFiles::open(fixtures_dir() / "qwen2-tiny");
  std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6, 7};
  // Two slots: a step's rows (max_chunk) then exceed one slot's context.
  Model lazy(device(), files, ModelOptions{.context = 12, .slots = 2});
  std::vector<float> want = lazy.forward(prompt, /*all_logits=*/true);
  Model at_load(device(), files, ModelOptions{.context = 12, .slots = 2, .pipelines_at_load = true});
  EXPECT_EQ(at_load.forward(prompt, /*all_logits=*/true), want);
  std::vector<float> next = at_load.forward(std::vector<int32_t>{8});
  lazy.reset();
  lazy.forward(prompt);
  EXPECT_EQ(next, lazy.forward(std::vector<int32_t>{8}));
}

// Sampled decoding keeps the token on the GPU like greedy decoding: every drawn token must be among the
// top_k best logits of its position (checked against one prefill of the whole sequence), the same seed must
// give the same tokens, and top_k 1 must give the greedy tokens.
TEST(GpuSampling, DrawsFromTheTopKRepeatsWithItsSeedAndTopOneIsGreedy) {
  test::ScratchDir dir;
  synth_model(dir.path(), {.preset = "tiny-llama", .seed = 3});
  ModelFiles files = ModelFiles::open(dir.path());
  Model model(device(), files, ModelOptions{.context = 64});
  const std::vector<int32_t> prompt = {5, 17, 29, 3};
  constexpr uint32_t kSteps = 24;
  auto decode = [&](const Model::GpuSampling& sampling, bool greedy = false) {
    model.reset();
    auto logits = model.forward(prompt);
    std::vector<int32_t> tokens = {int32_t(argmax(logits))};
    auto keep = [&](int32_t id) {
      tokens.push_back(id);
      return true;
    };
    std::vector<int32_t> seen = prompt;  // for the penalties: the prompt and the first token
    seen.push_back(tokens[0]);
    uint32_t produced = greedy ? model.decode_greedy(tokens[0], kSteps, keep)
                               : model.decode_sampled(tokens[0], kSteps, sampling, SeenTokens::split(seen, prompt.size()), keep);
    EXPECT_EQ(produced, kSteps);
    return tokens;
  };
  const Model::GpuSampling three{.temperature = 1.5f, .top_k = 3, .seed = 9};
  auto sampled = decode(three);
  ASSERT_EQ(sampled.size(), kSteps + 1);
  EXPECT_EQ(decode(three), sampled);
  EXPECT_NE(decode({.temperature = 1.5f, .top_k = 3, .seed = 10}), sampled);
  EXPECT_EQ(decode({.temperature = 1.0f, .top_k = 1, .seed = 9}), decode({}, /*greedy=*/true));

  // Row r of the prefill of prompt + sampled[0..kSteps) holds the logits that sampled[r - prompt + 1] was
  // drawn from.
  std::vector<int32_t> sequence = prompt;
  sequence.insert(sequence.end(), sampled.begin(), sampled.end() - 1);
  model.reset();
  auto rows = model.forward(sequence, /*all_logits=*/true);
  size_t vocab = size_t(files.config().vocab_size);
  std::set<int32_t> distinct;
  for (uint32_t t = 1; t <= kSteps; ++t) {
    std::span<const float> row(rows.data() + (prompt.size() + t - 1) * vocab, vocab);
    std::vector<float> sorted(row.begin(), row.end());
    std::nth_element(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
    EXPECT_GE(row[size_t(sampled[t])], sorted[2]) << "token " << t << " is not among the 3 best";
    distinct.insert(sampled[t]);
  }
  EXPECT_GT(distinct.size(), 1u);  // it did sample, not always take the best

  // Top-k off: the random model's flat logits put the top-p cut past the 64 best (a large kept set, drawn
  // without sorting it); every token must still lie inside the reference's nucleus.
  const Model::GpuSampling nucleus{.temperature = 1.0f, .top_k = 0, .top_p = 0.6f, .seed = 4};
  auto drawn = decode(nucleus);
  sequence = prompt;
  sequence.insert(sequence.end(), drawn.begin(), drawn.end() - 1);
  model.reset();
  rows = model.forward(sequence, /*all_logits=*/true);
  size_t kept_sizes = 0;
  for (uint32_t t = 1; t <= kSteps; ++t) {
    std::span<const float> row(rows.data() + (prompt.size() + t - 1) * vocab, vocab);
    std::vector<double> logits(row.begin(), row.end());
    auto p = reference::sampling_probabilities(logits, 1.0, 0, 0.6, 0.0);
    EXPECT_GT(p[size_t(drawn[t])], 0.0) << "token " << t << " lies outside the top-p 0.6 nucleus";
    kept_sizes += size_t(std::count_if(p.begin(), p.end(), [](double q) { return q > 0; }));
  }
  EXPECT_GT(kept_sizes / kSteps, size_t(64)) << "the nucleus should exceed the 64 best";

  // Top-k above 64 (once drawn on the host): every token among the reference's 100 best.
  drawn = decode({.temperature = 1.0f, .top_k = 100, .seed = 5});
  sequence = prompt;
  sequence.insert(sequence.end(), drawn.begin(), drawn.end() - 1);
  model.reset();
  rows = model.forward(sequence, /*all_logits=*/true);
  for (uint32_t t = 1; t <= kSteps; ++t) {
    std::span<const float> row(rows.data() + (prompt.size() + t - 1) * vocab, vocab);
    std::vector<double> logits(row.begin(), row.end());
    auto p = reference::sampling_probabilities(logits, 1.0, 100, 1.0, 0.0);
    EXPECT_GT(p[size_t(drawn[t])], 0.0) << "token " << t << " lies outside the 100 best";
  }
  EXPECT_THAT([&] { decode({.temperature = 1.0f, .top_k = 5, .top_p = 0.0f, .seed = 1}); },
              testing::ThrowsMessage<Error>(testing::HasSubstr("top_p must be in (0, 1], got 0")));
}

// A model whose logits are all NaN (its final norm weight is NaN): decoding on the GPU, greedy or sampled,
// stops with an error naming the step's position instead of feeding a made-up token onward.
TEST(GpuDecoding, AllNanLogitsStopWithAnErrorNamingThePosition) {
  test::ScratchDir dir;
  synth_model(dir.path(), {.preset = "tiny-llama", .seed = 3});
  std::filesystem::path file = dir.path() / "model.safetensors", rewritten = dir.path() / "rewritten.tmp";
  {
    Safetensors tensors = Safetensors::open(file);
    std::vector<float> nan(size_t(tensors.at("model.norm.weight").numel()), std::numeric_limits<float>::quiet_NaN());
    std::vector<TensorSource> sources;
    for (const auto& [name, view] : tensors.tensors())
      sources.push_back(tensor_from_bytes(name, view.dtype, view.shape,
                                          name == "model.norm.weight" ? std::as_bytes(std::span(nan)) : view.bytes));
    write_safetensors(rewritten, sources);
  }
  std::filesystem::rename(rewritten, file);
  ModelFiles files = ModelFiles::open(dir.path());
  Model model(device(), files, ModelOptions{.context = 32});
  auto never = [](int32_t) { return true; };
  model.forward(std::vector<int32_t>{1, 2, 3});
  EXPECT_THAT([&] { model.decode_greedy(4, 5, never); },
              testing::ThrowsMessage<Error>(testing::HasSubstr("every logit of the step at position 3 is NaN")));
  EXPECT_EQ(model.position(), 3u);
  EXPECT_THAT([&] { model.decode_sampled(4, 5, {.temperature = 1.0f, .top_k = 0, .top_p = 0.9f, .seed = 1}, {}, never); },
              testing::ThrowsMessage<Error>(testing::HasSubstr("every logit of the step at position 3 is NaN")));
  EXPECT_EQ(model.position(), 3u);
}

// A prompt whose down projection is shared out (a 1024-wide MLP has 128 slabs: 4 shares of 32 for 24 rows of 64
// columns, one tile) against the same tokens decoded one at a time, which never split.
TEST(SplitPrefill, MatchesTokenByTokenDecoding) {
  test::ScratchDir dir;
  synth_model(dir.path(), {.preset = "tiny-llama", .seed = 5, .intermediate = 1024});
  ModelFiles files = ModelFiles::open(dir.path());
  device().set_tuning({.resident_workgroups = 1056, .resident_tiles = 264});  // an H200's: the split is taken
  Model model(device(), files, ModelOptions{.context = 32});
  constexpr uint32_t kTokens = 24;
  ASSERT_EQ(kernels::linear_split_workers(device(), {kTokens, 1024, 64, 64, 0, 0, 1}), 4u);
  auto entries = model.describe(kTokens);
  EXPECT_EQ(std::count_if(entries.begin(), entries.end(), [](auto& e) { return e.kernel == "linear_split_sum"; }),
            files.config().num_layers);
  size_t vocab = size_t(files.config().vocab_size);
  std::vector<int32_t> ids(kTokens);
  for (uint32_t i = 0; i < kTokens; ++i) ids[i] = int32_t((i * 131u + 7u) % vocab);
  auto want = model.forward(ids, /*all_logits=*/true);
  model.reset();
  for (uint32_t t = 0; t < kTokens; ++t) {
    auto row = model.forward(std::span(ids).subspan(t, 1));
    std::span<const float> expected(want.data() + t * vocab, vocab);
    EXPECT_LT(relative_error(row, expected), 1e-5) << "position " << t;
    EXPECT_EQ(argmax(row), argmax(expected)) << "position " << t;
  }
}

// f16 arithmetic on an adapter without shader-f16 is refused when the model loads, naming the feature.
TEST(ModelErrors, F16ArithmeticWithoutShaderF16) {
  GERBIL_REQUIRE_FIXTURES();
  auto files = ModelFiles::open(fixtures_dir() / "qwen2-tiny");
  gpu::Device plain({.allow_shader_f16 = false});
  try {
    Model model(plain, files, ModelOptions{.context = 8, .arithmetic = kernels::Arithmetic::F16});
    FAIL() << "expected the model to refuse f16 arithmetic";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("shader-f16"), std::string::npos) << e.what();
  }
}

// A q8 cache stores head dims four to a word: GPT-2's fixture with 32 heads of 2 dims (its weights do not depend
// on the head count) is refused at load with --kv-cache q8, naming the option and the head_dim, and loads with f16.
TEST(ModelErrors, Q8CacheNeedsAHeadDimMultipleOf4) {
  GERBIL_REQUIRE_FIXTURES();
  test::ScratchDir dir;
  for (const char* name : {"model.safetensors", "generation_config.json"})
    std::filesystem::copy_file(fixtures_dir() / "gpt2-tiny" / name, dir.path() / name);
  auto config = nlohmann::json::parse(test::read_text(fixtures_dir() / "gpt2-tiny" / "config.json"));
  config["n_head"] = 32;
  std::ofstream(dir.path() / "config.json") << config.dump();
  auto files = ModelFiles::open(dir.path());
  EXPECT_THAT([&] { Model model(device(), files, ModelOptions{.context = 8, .kv_cache = KvCache::Q8}); },
              testing::ThrowsMessage<Error>(testing::AllOf(testing::HasSubstr("q8 KV cache"),
                                                           testing::HasSubstr("head_dim 2"),
                                                           testing::HasSubstr("--kv-cache"))));
  EXPECT_NO_THROW(Model(device(), files, ModelOptions{.context = 8, .kv_cache = KvCache::F16}));
}

TEST(ModelErrors, TokenOutOfRangeAndContextOverflow) {
  GERBIL_REQUIRE_FIXTURES();
  auto files = ModelFiles::open(fixtures_dir() / "qwen2-tiny");
  Model model(device(), files, ModelOptions{.context = 8});
  std::vector<int32_t> bad = {1, 2, 512};
  EXPECT_THROW(model.forward(bad), Error);
  try {
    model.forward(bad);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("512"), std::string::npos) << e.what();
  }
  EXPECT_EQ(model.position(), 0u);
  std::vector<int32_t> nine(9, 3);
  try {
    model.forward(nine);
    FAIL() << "expected context overflow";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("context full"), std::string::npos) << e.what();
  }
  std::vector<int32_t> eight(8, 3);
  EXPECT_NO_THROW(model.forward(eight));
  EXPECT_THROW(model.forward(std::span(eight).first(1)), Error);
  EXPECT_EQ(model.position(), 8u);
}

// An f16 cache holds head dims in pairs: an f16 checkpoint with an odd head_dim (a GPT-2 of 4 heads of 15 dims)
// keeps an f32 cache by default, and asking for f16 is refused, naming the option to use.
TEST(KvCacheChoice, OddHeadDimsKeepAnF32CacheByDefault) {
  test::ScratchDir dir;
  nlohmann::json config = synth_config({.preset = "tiny-gpt2", .dtype = DType::F16});
  config["n_embd"] = 60;
  config["n_head"] = 4;
  std::ofstream(dir.path() / "config.json") << config.dump();
  std::vector<TensorSource> tensors;
  for (const ExpectedTensor& t : expected_tensors(parse_config(config, dir.path() / "config.json")))
    tensors.push_back({t.name, DType::F16, t.shape, [](uint64_t, std::span<std::byte> out) {
                         std::fill(out.begin(), out.end(), std::byte{0});
                       }});
  write_safetensors(dir.path() / "model.safetensors", tensors);
  ModelFiles files = ModelFiles::open(dir.path());
  ASSERT_EQ(files.config().head_dim, 15);
  EXPECT_EQ(Model(device(), files, ModelOptions{.context = 16}).kv_type(), kernels::KvType::F32);
  EXPECT_THAT([&] { Model(device(), files, ModelOptions{.context = 16, .kv_cache = KvCache::F16}); },
              testing::ThrowsMessage<Error>(testing::HasSubstr("head_dim 15 is odd: use an f32 cache (--kv-cache f32)")));
}

}  // namespace
}  // namespace gerbil::graph
