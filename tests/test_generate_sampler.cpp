// The sampler: greedy and its ties, seeded reproducibility, the distribution it draws from, each
// truncation rule and penalty, and bad parameters.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <set>

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

// Infinities are clamped to the largest finite floats (as on the GPU): +inf is certain, -inf tokens are
// drawn only when every logit is -inf, never NaN.
TEST(Sampler, InfiniteLogitsAreCertainOrImpossible) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    Sampler sampler({.temperature = 1.0f, .top_p = 0.9f, .seed = seed});
    std::vector<float> certain = {1.f, inf, 2.f, -inf, nan};
    EXPECT_EQ(sampler.sample(certain, {}), 1);
    std::vector<float> masked = {-inf, 0.5f, -inf, nan};
    EXPECT_EQ(sampler.sample(masked, {}), 1);
    std::vector<float> all_masked = {-inf, nan, -inf};
    int32_t id = sampler.sample(all_masked, {});
    EXPECT_TRUE(id == 0 || id == 2) << id;
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

// The whole-vocabulary sort the sampler avoids: sort every candidate, then cut and draw as it does.
int32_t full_sort_draw(std::vector<float> logits, const SamplingParams& p, std::mt19937_64& rng) {
  std::vector<std::pair<float, int32_t>> c;
  for (size_t i = 0; i < logits.size(); ++i)
    if (!std::isnan(logits[i])) c.emplace_back(logits[i], int32_t(i));
  std::sort(c.begin(), c.end(), [](auto& a, auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
  if (p.top_k > 0 && size_t(p.top_k) < c.size()) c.resize(size_t(p.top_k));
  float best = c.front().first;
  std::vector<float> w;
  double total = 0;
  for (auto& [logit, id] : c) total += w.emplace_back(std::exp((logit - best) / p.temperature));
  size_t cut = c.size();
  double kept = total;
  if (p.top_p < 1.0f || p.min_p > 0.0f) {
    double cumulative = 0;
    kept = 0;
    for (cut = 0; cut < c.size(); ++cut) {
      double q = w[cut] / total;
      if (cut > 0 && q < p.min_p * (1.0 / total)) break;
      cumulative += q;
      kept += w[cut];
      if (cumulative >= p.top_p) {
        ++cut;
        break;
      }
    }
  }
  double r = std::uniform_real_distribution<double>(0.0, kept)(rng);
  for (size_t i = 0; i < cut; ++i)
    if ((r -= w[i]) <= 0) return c[i].second;
  return c[cut - 1].second;
}

// Ordering only the prefix the cut and the draw reach picks what a full sort picks: a 50,000-token
// vocabulary with repeated logits (ties broken by id) and NaNs, every truncation rule, draws deep into the order.
TEST(Sampler, PartialOrderingDrawsWhatAFullSortDraws) {
  std::mt19937 values(11);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> logits(50000);
  for (float& l : logits) l = std::round(normal(values) * 64.0f) / 64.0f;  // many equal logits
  for (size_t i = 0; i < logits.size(); i += 997) logits[i] = NAN;
  for (SamplingParams p : {SamplingParams{.temperature = 1.0f, .seed = 3}, SamplingParams{.temperature = 3.0f, .seed = 4},
                           SamplingParams{.temperature = 0.7f, .top_p = 0.9f, .seed = 5},
                           SamplingParams{.temperature = 1.5f, .top_p = 0.5f, .min_p = 0.01f, .seed = 6},
                           SamplingParams{.temperature = 0.8f, .top_k = 300, .top_p = 0.95f, .seed = 7},
                           SamplingParams{.temperature = 1.0f, .min_p = 0.2f, .seed = 8}}) {
    Sampler sampler(p);
    std::mt19937_64 rng(p.seed);
    for (int i = 0; i < 40; ++i)
      ASSERT_EQ(draw(sampler, logits), full_sort_draw(logits, p, rng))
          << "draw " << i << " temperature " << p.temperature << " top_k " << p.top_k << " top_p " << p.top_p;
  }
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

// NaN logits are skipped in every mode; a row of nothing but NaN is an error (host greedy used to pick id 0).
TEST(Sampler, NanLogitsAreSkippedAndAllNanIsAnError) {
  using ::testing::HasSubstr;
  using ::testing::ThrowsMessage;
  Sampler greedy({.temperature = 0});
  EXPECT_EQ(draw(greedy, {NAN, 1.0f, 3.0f, NAN, 2.0f}), 2);
  EXPECT_EQ(draw(greedy, {-2.0f, NAN, -1.0f}), 2);
  for (SamplingParams p : {SamplingParams{.temperature = 0}, SamplingParams{.temperature = 1.0f, .seed = 1},
                           SamplingParams{.temperature = 1.0f, .top_k = 2, .seed = 1}}) {
    Sampler sampler(p);
    EXPECT_THAT([&] { draw(sampler, {NAN, NAN, NAN}); }, ThrowsMessage<Error>(HasSubstr("every logit is NaN")));
  }
}

// A padded vocabulary: ids at or above the tokenizer's count are never drawn, though their logits dwarf the
// others and the temperature is high, in every mode; the draws are those of the row without its tail.
TEST(Sampler, PaddedTailIsNeverDrawn) {
  const size_t ids = 200, padded = 256;
  std::mt19937 values(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> logits(padded);
  for (size_t i = 0; i < padded; ++i) logits[i] = i < ids ? normal(values) : 100.0f + float(i);
  const std::vector<float> real(logits.begin(), logits.begin() + std::ptrdiff_t(ids));
  for (SamplingParams p : {SamplingParams{.temperature = 0}, SamplingParams{.temperature = 50.0f, .seed = 2},
                           SamplingParams{.temperature = 20.0f, .top_k = 20, .seed = 3},
                           SamplingParams{.temperature = 20.0f, .top_p = 0.5f, .seed = 4},
                           SamplingParams{.temperature = 20.0f, .min_p = 0.5f, .seed = 5},
                           SamplingParams{.temperature = 20.0f, .repetition_penalty = 1.5f, .seed = 6}}) {
    SCOPED_TRACE(testing::Message() << "temperature " << p.temperature << " top_k " << p.top_k);
    Sampler masked(p, ids), unpadded(p);
    std::vector<int32_t> history = {3, 210, 250};  // seen padded ids are harmless
    std::set<int32_t> drawn;
    for (int i = 0; i < 500; ++i) {
      int32_t id = draw(masked, logits, history);
      ASSERT_LT(id, int32_t(ids));
      EXPECT_EQ(id, draw(unpadded, real, history));
      drawn.insert(id);
    }
    if (!p.greedy()) {
      EXPECT_GT(drawn.size(), 10u);  // a real spread at this temperature, not one stuck id
    }
  }
  // NaN everywhere but the tail: an error, not a padded id.
  std::vector<float> nan_row(padded, NAN);
  nan_row[ids + 3] = 1.0f;
  Sampler greedy({.temperature = 0}, ids);
  EXPECT_THAT([&] { draw(greedy, nan_row); },
              testing::ThrowsMessage<Error>(testing::HasSubstr("every logit is NaN")));
  EXPECT_THAT([] { Sampler({}, 0); }, testing::ThrowsMessage<Error>(testing::HasSubstr("id count 0")));
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
