// `gerbil bench model`'s measurements (checks/model_bench.h) on a tiny synthetic model on the default
// adapter: every row it promises is there, measured, and the model is left reset; a context too small for
// the depths asked is a clear error.
#include <algorithm>
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
  EXPECT_EQ(model.position(), 0u);

  options.depths = {122};
  EXPECT_THAT([&] { bench_model(model, options); },
              ThrowsMessage<Error>(HasSubstr("needs a context of 129 tokens (depth 122 + 6 generated)")));
}

}  // namespace
}  // namespace gerbil
