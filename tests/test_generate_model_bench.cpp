// `gerbil bench model`'s measurements (checks/model_bench.h) on a tiny synthetic model on the default
// adapter: every row it promises is there, measured, and the model is left reset; a context too small for
// the depths asked, and options that measure nothing, are clear errors.
#include <algorithm>
#include <functional>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "checks/model_bench.h"
#include "gerbil/error.h"
#include "graph/model.h"
#include "model/synth.h"
#include "support/device.h"
#include "test_model_support.h"

namespace gerbil {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

TEST(ModelBench, MeasuresEveryRowAtEveryDepth) {
  test::ScratchDir dir;
  synth_model(dir.path(), {.preset = "tiny-qwen2", .seed = 2});
  ModelFiles files = ModelFiles::open(dir.path());
  graph::Model model(test::device(), files, graph::ModelOptions{.context = 128});
  ModelBenchOptions options{.prompt_tokens = 24, .generated_tokens = 6, .depths = {0, 40}, .repeats = 2};
  auto results = bench_model(model, options);

  std::set<std::pair<std::string, uint32_t>> rows;
  for (const auto& r : results) {
    rows.insert({r.test, r.depth});
    EXPECT_EQ(r.seconds.size(), options.repeats) << r.test;
    EXPECT_GT(r.median_seconds, 0) << r.test;
    uint32_t tokens = r.test == "pp24" ? options.prompt_tokens : options.generated_tokens;
    EXPECT_NEAR(r.tokens_per_second, tokens / r.median_seconds, 1e-6 * r.tokens_per_second) << r.test;
  }
  EXPECT_TRUE(rows.contains({"pp24", 0}));
  for (uint32_t depth : options.depths)
    for (const char* test : {"tg6", "tg6 (top-k 20 sampling)", "tg6 (top-p 0.9 sampling)", "tg6 (host sampling)"})
      EXPECT_TRUE(rows.contains({test, depth})) << test << " at depth " << depth;
  EXPECT_EQ(results.size(), 1 + 4 * options.depths.size());
  // Named as llama-bench names them: the depth after the test, before a variant.
  EXPECT_EQ(llama_bench_name({"pp24", 0}), "pp24");
  EXPECT_EQ(llama_bench_name({"tg6", 0}), "tg6");
  EXPECT_EQ(llama_bench_name({"tg6", 40}), "tg6 @ d40");
  EXPECT_EQ(llama_bench_name({"tg6 (host sampling)", 40}), "tg6 @ d40 (host sampling)");
  EXPECT_EQ(model.position(), 0u);

  options.depths = {122};
  EXPECT_THAT([&] { bench_model(model, options); },
              ThrowsMessage<Error>(HasSubstr("needs a context of 129 tokens (depth 122 + 6 generated)")));
  // Counted in 32 bits, 4294967295 + 6 + 1 would wrap round to 6 and pass.
  options.depths = {4294967295u};
  EXPECT_THAT([&] { bench_model(model, options); },
              ThrowsMessage<Error>(HasSubstr("needs a context of 4294967302 tokens")));
  EXPECT_THAT([&] { profile_model(model, options); }, ThrowsMessage<Error>(HasSubstr("needs a context")));
}

// A prompt longer than one step is profiled by its last chunk, after the earlier ones ran (it was one step of
// the whole prompt, past the step's buffers); Model::profile refuses more rows than a step holds.
TEST(ModelBench, ProfilesALongPromptsLastChunk) {
  test::ScratchDir dir;
  synth_model(dir.path(), {.preset = "tiny-qwen2", .seed = 2});
  ModelFiles files = ModelFiles::open(dir.path());
  graph::Model model(test::device(), files, graph::ModelOptions{.context = 128, .max_chunk = 16});
  auto profiles = profile_model(model, {.prompt_tokens = 40, .generated_tokens = 1, .depths = {0}, .repeats = 1});
  ASSERT_EQ(profiles.size(), 2u);
  EXPECT_EQ(profiles[0].step, "prefill of the last 8 tokens of 40 (chunks of 16)");
  EXPECT_GT(profiles[0].total_microseconds, 0);
  EXPECT_EQ(model.position(), 0u);
  EXPECT_THAT([&] { model.profile(17); }, ThrowsMessage<Error>(HasSubstr("17 tokens exceed the 16 rows of one step")));
}

// --sampling: "defaults" takes generation_config.json's settings (Qwen2.5's here), KEY=NUMBER items override
// them or stand alone; the row is measured and named by its settings; a bad item is named.
TEST(ModelBench, SamplingRowTakesTheModelsDefaults) {
  GenerationDefaults qwen{.temperature = 0.7, .top_p = 0.8, .repetition_penalty = 1.05, .top_k = 20};
  auto s = parse_bench_sampling("defaults,top_k=40,min_p=0.05", qwen);
  EXPECT_FLOAT_EQ(s.temperature, 0.7f);
  EXPECT_FLOAT_EQ(s.top_p, 0.8f);
  EXPECT_FLOAT_EQ(s.repetition_penalty, 1.05f);
  EXPECT_EQ(s.top_k, 40u);
  EXPECT_FLOAT_EQ(s.min_p, 0.05f);
  auto flag_only = parse_bench_sampling("defaults,temperature=0.6,top_p=0.9", GenerationDefaults{});
  EXPECT_FLOAT_EQ(flag_only.temperature, 0.6f);
  EXPECT_FLOAT_EQ(flag_only.top_p, 0.9f);
  EXPECT_EQ(flag_only.top_k, 0u);
  EXPECT_THAT([&] { parse_bench_sampling("temp=0.7", qwen); }, ThrowsMessage<Error>(HasSubstr("\"temp=0.7\"")));
  EXPECT_THAT([&] { parse_bench_sampling("top_k=2.5", qwen); }, ThrowsMessage<Error>(HasSubstr("\"top_k=2.5\"")));
  EXPECT_THAT([&] { parse_bench_sampling("top_p=x", qwen); }, ThrowsMessage<Error>(HasSubstr("KEY=NUMBER")));

  test::ScratchDir dir;
  synth_model(dir.path(), {.preset = "tiny-qwen2", .seed = 2});
  ModelFiles files = ModelFiles::open(dir.path());
  graph::Model model(test::device(), files, graph::ModelOptions{.context = 32});
  ModelBenchOptions options{.prompt_tokens = 4, .generated_tokens = 3, .depths = {0}, .repeats = 1,
                            .sampling = "temperature=0.7,top_k=20,repetition_penalty=1.05"};
  auto results = bench_model(model, options);
  EXPECT_TRUE(std::any_of(results.begin(), results.end(), [](const ModelBenchResult& r) {
    return r.test == "tg3 (sampled: temperature=0.7 top_k=20 repetition_penalty=1.05)";
  }));
  options.sampling = "top_k=100";  // any top-k runs on the GPU
  results = bench_model(model, options);
  EXPECT_TRUE(std::any_of(results.begin(), results.end(),
                          [](const ModelBenchResult& r) { return r.test.find("sampled: temperature=1 top_k=100)") != std::string::npos; }));
  options.sampling = "temperature=0";  // greedy: the sampler's row would measure argmax again
  EXPECT_THAT([&] { bench_model(model, options); },
              ThrowsMessage<Error>(AllOf(HasSubstr("temperature=0"), HasSubstr("positive temperature"))));
}

// Options that would measure nothing (or crash: the median of no repeats, the deepest of no depths) are refused
// naming the command's option, by bench_model, profile_model and validate() alike.
TEST(ModelBench, OptionsThatMeasureNothingAreNamed) {
  const ModelBenchOptions good{.prompt_tokens = 8, .generated_tokens = 2, .depths = {0}, .repeats = 1};
  EXPECT_NO_THROW(good.validate());
  const std::pair<std::function<void(ModelBenchOptions&)>, std::string> cases[] = {
      {[](ModelBenchOptions& o) { o.repeats = 0; }, "-r/--repeats must be at least 1"},
      {[](ModelBenchOptions& o) { o.depths.clear(); }, "-d/--depths must list at least one"},
      {[](ModelBenchOptions& o) { o.prompt_tokens = 0; }, "-p/--prompt-tokens must be at least 1"},
      {[](ModelBenchOptions& o) { o.generated_tokens = 0; }, "-g/--generated-tokens must be at least 1"},
  };
  test::ScratchDir dir;
  synth_model(dir.path(), {.preset = "tiny-qwen2", .seed = 2});
  ModelFiles files = ModelFiles::open(dir.path());
  graph::Model model(test::device(), files, graph::ModelOptions{.context = 64});
  for (const auto& [edit, message] : cases) {
    ModelBenchOptions bad = good;
    edit(bad);
    EXPECT_THAT([&] { bad.validate(); }, ThrowsMessage<Error>(HasSubstr(message)));
    EXPECT_THAT([&] { bench_model(model, bad); }, ThrowsMessage<Error>(HasSubstr(message)));
    EXPECT_THAT([&] { profile_model(model, bad); }, ThrowsMessage<Error>(HasSubstr(message)));
  }
}

}  // namespace
}  // namespace gerbil
