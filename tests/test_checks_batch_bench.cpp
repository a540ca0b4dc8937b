// bench_batch on a fixture model: one row per sequence count, with throughputs consistent with its timings, the
// slots it used left empty, a profile of each count's batched step on request; and clear errors for settings it
// cannot run. And the batched greedy step it times: ids picked on the GPU for any vocabulary.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "gerbil/error.h"
#include "checks/batch_bench.h"
#include "model/synth.h"
#include "model/weights.h"
#include "support/device.h"
#include "support/paths.h"
#include "test_model_support.h"

namespace gerbil {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

class BatchBench : public ::testing::Test {
 protected:
  void SetUp() override {
    GERBIL_REQUIRE_FIXTURES();
    files_.emplace(ModelFiles::open(test::fixtures_dir() / "qwen2-tiny"));
    model_.emplace(test::device(), *files_, graph::ModelOptions{.context = 16, .slots = 3, .max_chunk = 16});
  }
  std::optional<ModelFiles> files_;
  std::optional<graph::Model> model_;
};

TEST_F(BatchBench, ReportsEachCount) {
  auto results = bench_batch(*model_, {.prompt_tokens = 5, .generated_tokens = 4, .sequences = {1, 3}});
  ASSERT_EQ(results.size(), 2u);
  for (size_t i = 0; i < results.size(); ++i) {
    const BatchBenchResult& r = results[i];
    EXPECT_EQ(r.sequences, i == 0 ? 1u : 3u);
    ASSERT_GT(r.decode_seconds, 0);
    EXPECT_DOUBLE_EQ(r.decode_tokens_per_second, r.sequences * 4 / r.decode_seconds);
    EXPECT_DOUBLE_EQ(r.prefill_tokens_per_second, r.sequences * 5 / r.prefill_seconds);
  }
  for (uint32_t slot = 0; slot < 3; ++slot) EXPECT_EQ(model_->position(slot), 0u);
}

// With profile, each count's decode step is timed dispatch by dispatch: for several sequences the step of the
// batched loop (one attention over the row table per layer, all sequences' ids picked on the GPU by one argmax);
// none without.
TEST_F(BatchBench, ProfilesTheBatchedStep) {
  uint32_t layers = uint32_t(files_->config().num_layers);
  auto results = bench_batch(*model_, {.prompt_tokens = 5, .generated_tokens = 2, .sequences = {1, 3}, .profile = true});
  ASSERT_EQ(results.size(), 2u);
  for (const BatchBenchResult& r : results) {
    ASSERT_TRUE(r.profile.has_value()) << r.sequences;
    uint32_t dispatches = 0;
    for (const ProfileRow& row : r.profile->rows) dispatches += row.dispatches;
    EXPECT_EQ(dispatches, r.profile->dispatches) << r.sequences;
    EXPECT_GT(r.profile->total_microseconds, 0.0) << r.sequences;
    auto kernel = [&](const char* name) {
      return std::find_if(r.profile->rows.begin(), r.profile->rows.end(),
                          [&](const ProfileRow& row) { return row.kernel == name; });
    };
    if (r.sequences == 1) {
      EXPECT_EQ(kernel("attention_rows"), r.profile->rows.end());
      continue;
    }
    ASSERT_NE(kernel("attention_rows"), r.profile->rows.end());
    EXPECT_EQ(kernel("attention_rows")->dispatches, layers);
    // Every sequence's id picked by the same two argmax dispatches ("argmax partials", "argmax final").
    for (const ProfileRow& row : r.profile->rows) {
      if (row.kernel == "argmax") {
        EXPECT_EQ(row.dispatches, 1u) << row.role;
      }
    }
  }
  for (uint32_t slot = 0; slot < 3; ++slot) EXPECT_EQ(model_->position(slot), 0u);
  EXPECT_FALSE(bench_batch(*model_, {.prompt_tokens = 5, .generated_tokens = 2, .sequences = {2}}).front().profile);
}

// profile_batch refuses slots the model lacks and full ones, and leaves the positions alone.
TEST_F(BatchBench, ProfileBatchChecksItsSlots) {
  std::vector<int32_t> prompt(16, 1);
  model_->forward(prompt, false, 1);  // slot 1 full
  EXPECT_THAT([&] { model_->profile_batch(4); }, ThrowsMessage<Error>(HasSubstr("the model has 3")));
  EXPECT_THAT([&] { model_->profile_batch(2); }, ThrowsMessage<Error>(HasSubstr("slot 1 holds 16 tokens")));
  model_->forward(std::span(prompt).first(3), false, 0);
  EXPECT_FALSE(model_->profile_batch(1).empty());
  EXPECT_EQ(model_->position(0), 3u);
  EXPECT_EQ(model_->position(1), 16u);
}

// A batched greedy step picks every sequence's id on the GPU whatever the vocabulary: 509 logits a row (rows not
// at a bindable offset, 2,036 bytes apart) pick what the host's argmax of the same step's logits picks.
TEST(BatchedPicks, AnyVocabularyPicksOnTheGpu) {
  test::ScratchDir dir;
  synth_model(dir.path(), {.preset = "tiny-qwen2", .seed = 4, .vocab = 509});
  ModelFiles files = ModelFiles::open(dir.path());
  graph::Model model(test::device(), files, graph::ModelOptions{.context = 16, .slots = 3, .max_chunk = 16});
  ASSERT_TRUE(model.can_pick_in_batch());
  std::vector<std::vector<int32_t>> prompts = {{5, 9, 300}, {508, 1}, {77, 77, 2, 40}};
  std::vector<graph::Segment> prefill;
  for (uint32_t slot = 0; slot < 3; ++slot) prefill.push_back({slot, prompts[slot]});
  model.forward_batch(prefill);
  std::vector<int32_t> fed = {11, 400, 508};
  std::vector<graph::Segment> step;
  for (uint32_t slot = 0; slot < 3; ++slot) step.push_back({slot, std::span(&fed[slot], 1)});
  auto logits = model.forward_batch(step);
  std::vector<uint32_t> want;
  for (size_t row = 0; row < 3; ++row) {
    auto first = logits.begin() + std::ptrdiff_t(row * 509);
    want.push_back(uint32_t(std::max_element(first, first + 509) - first));
  }
  for (uint32_t slot = 0; slot < 3; ++slot) model.rewind(model.position(slot) - 1, slot);
  EXPECT_EQ(model.forward_batch_pick(step), want);
}

TEST_F(BatchBench, RefusesWhatItCannotRun) {
  auto refuses = [&](BatchBenchOptions options, const char* what) {
    EXPECT_THAT([&] { bench_batch(*model_, options); }, ThrowsMessage<Error>(HasSubstr(what))) << what;
  };
  refuses({.sequences = {}}, "no sequence counts");
  refuses({.prompt_tokens = 4, .generated_tokens = 4, .sequences = {0}}, "a sequence count of 0");
  refuses({.prompt_tokens = 4, .generated_tokens = 4, .sequences = {4}}, "4 sequences need as many KV-cache slots");
  refuses({.prompt_tokens = 0, .generated_tokens = 4, .sequences = {1}}, "--prompt-tokens");
  refuses({.prompt_tokens = 4, .generated_tokens = 0, .sequences = {1}}, "--generated-tokens");
  refuses({.prompt_tokens = 10, .generated_tokens = 7, .sequences = {1}}, "exceed the context of 16");
  refuses({.prompt_tokens = 4, .generated_tokens = 4, .sequences = {1},
           .sampling = graph::Model::GpuSampling{.temperature = 0.0f}},
          "the GPU sampler cannot draw with these settings (--sampling)");
}

// A batched pick refuses masks that are not one a segment, naming them, and changes nothing: the same step then
// runs.
TEST(BatchedPicks, RefusesMisfitMasks) {
  test::ScratchDir dir;
  synth_model(dir.path(), {.preset = "tiny-qwen2", .seed = 4, .vocab = 509});
  ModelFiles files = ModelFiles::open(dir.path());
  graph::Model model(test::device(), files, graph::ModelOptions{.context = 16, .slots = 2, .max_chunk = 16});
  std::vector<int32_t> fed = {11, 400};
  std::vector<graph::Segment> step = {{0, std::span(&fed[0], 1)}, {1, std::span(&fed[1], 1)}};
  std::vector<graph::Model::TokenMask> one_mask(1);
  EXPECT_THAT([&] { model.forward_batch_pick(step, one_mask); },
              ThrowsMessage<Error>(HasSubstr("1 masks for 2 segments")));
  EXPECT_EQ(model.position(0), 0u);
  EXPECT_EQ(model.forward_batch_pick(step).size(), 2u);
  EXPECT_EQ(model.position(1), 1u);
}

}  // namespace
}  // namespace gerbil
