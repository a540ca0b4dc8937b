// The sampler: greedy and its ties, seeded reproducibility, the distribution it draws from, each
// truncation rule and penalty, and bad parameters.
#include <cmath>
#include <map>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gerbil/error.h"
#include "generate/sampler.h"

namespace gerbil {
namespace {

int32_t draw(Sampler& sampler, std::vector<float> logits, std::vector<int32_t> history = {}) {
  return sampler.sample(logits, history);
}

TEST(Sampler, GreedyTakesTheFirstMaximum) {
  Sampler greedy({.temperature = 0});
  EXPECT_EQ(draw(greedy, {1, 5, 5, 2}), 1);
  EXPECT_EQ(draw(greedy, {-3, -1, -2}), 1);
}

TEST(Sampler, SameSeedSameTokens) {
  std::vector<float> logits = {0.1f, 0.5f, 0.2f, 0.9f, 0.0f, 0.3f};
  Sampler a({.temperature = 1.0f, .seed = 42}), b({.temperature = 1.0f, .seed = 42}), c({.temperature = 1.0f, .seed = 43});
  std::vector<int32_t> ra, rb, rc;
  for (int i = 0; i < 50; ++i) ra.push_back(draw(a, logits)), rb.push_back(draw(b, logits)), rc.push_back(draw(c, logits));
  EXPECT_EQ(ra, rb);
  EXPECT_NE(ra, rc);
}

TEST(Sampler, DrawsFromTheSoftmaxAtTheTemperature) {
  std::vector<float> logits = {0.0f, 1.0f, 2.0f};
  const float temperature = 0.7f;
  Sampler sampler({.temperature = temperature, .seed = 7});
  std::map<int32_t, int> counts;
  const int n = 40000;
  for (int i = 0; i < n; ++i) ++counts[draw(sampler, logits)];
  double total = 0;
  for (float l : logits) total += std::exp(l / temperature);
  for (int32_t id = 0; id < 3; ++id) {
    double p = std::exp(logits[size_t(id)] / temperature) / total;
    double sigma = std::sqrt(p * (1 - p) / n);
    EXPECT_NEAR(double(counts[id]) / n, p, 5 * sigma) << "token " << id;
  }
}

TEST(Sampler, TopKTopPAndMinPTruncate) {
  std::vector<float> logits = {3.0f, 2.9f, 0.0f, -1.0f, 2.95f};
  Sampler top1({.top_k = 1, .seed = 1});
  for (int i = 0; i < 20; ++i) EXPECT_EQ(draw(top1, logits), 0);
  Sampler top2({.top_k = 2, .seed = 2});
  for (int i = 0; i < 200; ++i) EXPECT_THAT(draw(top2, logits), ::testing::AnyOf(0, 4));
  Sampler nucleus({.top_p = 0.01f, .seed = 3});
  for (int i = 0; i < 20; ++i) EXPECT_EQ(draw(nucleus, logits), 0);
  // min_p 0.5: tokens 2 and 3 have p far below half the best's.
  Sampler min_p({.min_p = 0.5f, .seed = 4});
  for (int i = 0; i < 300; ++i) EXPECT_THAT(draw(min_p, logits), ::testing::AnyOf(0, 1, 4));
}

TEST(Sampler, PenaltiesLowerSeenTokens) {
  Sampler repetition({.temperature = 0, .repetition_penalty = 2.0f});
  EXPECT_EQ(draw(repetition, {4.0f, 3.0f}, {0}), 1);   // 4 / 2 = 2 < 3
  EXPECT_EQ(draw(repetition, {-1.0f, -1.5f}, {0}), 1);  // -1 * 2 = -2 < -1.5
  Sampler presence({.temperature = 0, .presence_penalty = 1.5f});
  EXPECT_EQ(draw(presence, {4.0f, 3.0f}, {0, 0, 0}), 1);  // 4 - 1.5 < 3
  Sampler frequency({.temperature = 0, .frequency_penalty = 0.4f});
  EXPECT_EQ(draw(frequency, {4.0f, 3.0f}, {0, 0}), 0);     // 4 - 0.8 > 3
  EXPECT_EQ(draw(frequency, {4.0f, 3.0f}, {0, 0, 0}), 1);  // 4 - 1.2 < 3
}

TEST(Sampler, BadParametersAreNamed) {
  using ::testing::HasSubstr;
  using ::testing::ThrowsMessage;
  EXPECT_THAT([] { Sampler({.top_p = 0.0f}); }, ThrowsMessage<Error>(HasSubstr("top_p")));
  EXPECT_THAT([] { Sampler({.top_k = -1}); }, ThrowsMessage<Error>(HasSubstr("top_k")));
  EXPECT_THAT([] { Sampler({.min_p = 2.0f}); }, ThrowsMessage<Error>(HasSubstr("min_p")));
  EXPECT_THAT([] { Sampler({.repetition_penalty = 0.0f}); }, ThrowsMessage<Error>(HasSubstr("repetition_penalty")));
  EXPECT_THAT([] { Sampler({.temperature = NAN}); }, ThrowsMessage<Error>(HasSubstr("temperature")));
}

}  // namespace
}  // namespace gerbil
