// bench_batch on a fixture model: one row per sequence count, with throughputs consistent with its timings, the
// slots it used left empty; and clear errors for settings it cannot run.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gerbil/error.h"
#include "checks/batch_bench.h"
#include "model/weights.h"
#include "support/device.h"
#include "support/paths.h"

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
}

}  // namespace
}  // namespace gerbil
