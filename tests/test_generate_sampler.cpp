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
#include "generate/engine_options.h"
#include "generate/sampler.h"
#include "kernels/model.h"

namespace gerbil {
namespace {

__extension__ typedef unsigned __int128 Uint128;  // a GCC / Clang extension (__extension__: no -Wpedantic note)

// POSITION picks the random number (with the seed): draws that must differ pass different positions.
// HISTORY: generated tokens (the penalties' counts), no prompt.
int32_t draw(Sampler& sampler, std::vector<float> logits, std::vector<int32_t> history = {}, uint32_t position = 0) {
  return sampler.sample(logits, {.generated = history}, position);
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
  for (uint32_t i = 0; i < 50; ++i)
    ra.push_back(draw(a, logits, {}, i)), rb.push_back(draw(b, logits, {}, i)), rc.push_back(draw(c, logits, {}, i));
  EXPECT_EQ(ra, rb);
  EXPECT_NE(ra, rc);
}

TEST(Sampler, DrawsFromTheSoftmaxAtTheTemperature) {
  std::vector<float> logits = {0.0f, 1.0f, 2.0f};
  const float temperature = 0.7f;
  Sampler sampler({.temperature = temperature, .seed = 7});
  std::map<int32_t, int> counts;
  const int n = 40000;
  for (int i = 0; i < n; ++i) ++counts[draw(sampler, logits, {}, uint32_t(i))];
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
    EXPECT_EQ(sampler.sample(certain, {}, 0), 1);
    std::vector<float> masked = {-inf, 0.5f, -inf, nan};
    EXPECT_EQ(sampler.sample(masked, {}, 0), 1);
    std::vector<float> all_masked = {-inf, nan, -inf};
    int32_t id = sampler.sample(all_masked, {}, 0);
    EXPECT_TRUE(id == 0 || id == 2) << id;
  }
}

TEST(Sampler, TopKTopPAndMinPTruncate) {
  std::vector<float> logits = {3.0f, 2.9f, 0.0f, -1.0f, 2.95f};
  Sampler top1({.top_k = 1, .seed = 1});
  for (int i = 0; i < 20; ++i) EXPECT_EQ(draw(top1, logits), 0);
  Sampler top2({.top_k = 2, .seed = 2});
  for (uint32_t i = 0; i < 200; ++i) EXPECT_THAT(draw(top2, logits, {}, i), ::testing::AnyOf(0, 4));
  Sampler nucleus({.top_p = 0.01f, .seed = 3});
  for (int i = 0; i < 20; ++i) EXPECT_EQ(draw(nucleus, logits), 0);
  // min_p 0.5: tokens 2 and 3 have p far below half the best's.
  Sampler min_p({.min_p = 0.5f, .seed = 4});
  for (uint32_t i = 0; i < 300; ++i) EXPECT_THAT(draw(min_p, logits, {}, i), ::testing::AnyOf(0, 1, 4));
}

// The rule of Sampler::sample() (sampler.h) done plainly: sort every candidate, integer weights, the cuts, the
// draw in id order.
int32_t full_sort_draw(std::vector<float> logits, const SamplingParams& p, uint32_t position) {
  std::vector<std::pair<float, int32_t>> c;
  for (size_t i = 0; i < logits.size(); ++i)
    if (!std::isnan(logits[i])) c.emplace_back(logits[i], int32_t(i));
  auto before = [](auto& a, auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
  std::sort(c.begin(), c.end(), before);
  const float best = c.front().first;
  auto weight = [&](float v) -> uint64_t {
    float d = (best - v) * (1.0f / p.temperature);
    return std::min(d * 96.0f, 2047.0f) >= 2047.0f ? 0 : uint64_t(std::exp(-d) * 2147483648.0f);
  };
  size_t cut = c.size();
  if (p.top_k > 0) cut = std::min(cut, size_t(p.top_k));
  Uint128 total = 0;
  for (size_t i = 0; i < cut; ++i) total += weight(c[i].first);
  auto top_p = std::min(uint32_t(p.top_p * 16777216.0f), 1u << 24);
  if (top_p < 1u << 24) {
    auto goal = (total * top_p + (1u << 24) - 1) >> 24;
    Uint128 cumulative = 0;
    for (size_t i = 0; i < cut; ++i)
      if ((cumulative += weight(c[i].first)) >= goal) {
        cut = i + 1;
        break;
      }
  }
  const uint64_t least = std::max(uint64_t(p.min_p * 2147483648.0f), uint64_t(1));
  std::vector<uint64_t> kept(logits.size(), 0);
  uint64_t kept_total = 0;
  for (size_t i = 0; i < cut; ++i)
    if (uint64_t w = weight(c[i].first); w >= least) kept_total += kept[size_t(c[i].second)] = w;
  auto random = uint64_t(kernels::sample_unit(p.seed, position, 0) * 16777216.0);
  auto mark = uint64_t((static_cast<Uint128>(kept_total) * random) >> 24);
  uint64_t through = 0;
  for (size_t i = 0; i < kept.size(); ++i)
    if (kept[i] > 0 && (through += kept[i]) > mark) return int32_t(i);
  return -1;
}

// Ordering only the prefix the cut and the draw reach picks what a full sort picks: a 50,000-token
// vocabulary with repeated logits (ties broken by id) and NaNs, every truncation rule, draws deep into the order
// (with top-k, or cuts among the 64 best: without them the draw is by rejection, below).
TEST(Sampler, PartialOrderingDrawsWhatAFullSortDraws) {
  std::mt19937 values(11);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> logits(50000);
  for (float& l : logits) l = std::round(normal(values) * 64.0f) / 64.0f;  // many equal logits
  for (size_t i = 0; i < logits.size(); i += 997) logits[i] = NAN;
  for (SamplingParams p : {SamplingParams{.temperature = 1.0f, .top_k = 49000, .seed = 3},
                           SamplingParams{.temperature = 3.0f, .top_k = 30000, .seed = 4},
                           SamplingParams{.temperature = 0.7f, .top_k = 20000, .top_p = 0.9f, .seed = 5},
                           SamplingParams{.temperature = 1.5f, .top_k = 45000, .top_p = 0.5f, .min_p = 0.01f, .seed = 6},
                           SamplingParams{.temperature = 0.8f, .top_k = 300, .top_p = 0.95f, .seed = 7},
                           SamplingParams{.temperature = 1.0f, .min_p = 0.2f, .seed = 8}}) {
    Sampler sampler(p);
    for (uint32_t i = 0; i < 40; ++i)
      ASSERT_EQ(draw(sampler, logits, {}, i), full_sort_draw(logits, p, i))
          << "draw " << i << " temperature " << p.temperature << " top_k " << p.top_k << " top_p " << p.top_p;
  }
}

// The draws follow the float64 distribution after the cuts (bins of the kept tokens, most probable first, of at
// least 1/16 of the probability, within 5 sigma), and nothing past the cuts is ever drawn: large kept sets, top-k
// above 64 and at the vocabulary.
TEST(Sampler, DrawsFollowTheDistribution) {
  std::mt19937 values(9);
  std::uniform_real_distribution<float> uniform(-3.0f, 3.0f);
  std::vector<float> logits(700);
  for (float& l : logits) l = uniform(values);
  logits[100] = NAN;
  for (SamplingParams p : {SamplingParams{.temperature = 1.0f, .seed = 3},
                           SamplingParams{.temperature = 0.8f, .top_p = 0.7f, .seed = 4},
                           SamplingParams{.temperature = 1.2f, .top_p = 0.9f, .min_p = 0.05f, .seed = 5},
                           SamplingParams{.temperature = 0.5f, .min_p = 0.01f, .seed = 6},
                           SamplingParams{.temperature = 1.0f, .top_k = 200, .top_p = 0.9f, .seed = 7},
                           SamplingParams{.temperature = 0.7f, .top_k = 699, .seed = 8}}) {
    SCOPED_TRACE(testing::Message() << "temperature " << p.temperature << " top_k " << p.top_k << " top_p " << p.top_p
                                    << " min_p " << p.min_p);
    // The float64 reference: sorted candidates, weights, cuts.
    std::vector<int32_t> order;
    for (int32_t i = 0; i < int32_t(logits.size()); ++i)
      if (!std::isnan(logits[size_t(i)])) order.push_back(i);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[size_t(a)] > logits[size_t(b)]; });
    if (p.top_k > 0 && size_t(p.top_k) < order.size()) order.resize(size_t(p.top_k));
    std::vector<double> weight;
    double total = 0;
    for (int32_t id : order) total += weight.emplace_back(std::exp((double(logits[size_t(id)]) - logits[size_t(order[0])]) / p.temperature));
    size_t kept = 0;
    double cumulative = 0;
    while (kept < order.size() && (kept == 0 || weight[kept] >= p.min_p) && cumulative < p.top_p * total)
      cumulative += weight[kept++];
    ASSERT_GT(kept, size_t(64));  // more than the GPU sampler once kept
    std::map<int32_t, int> counts;
    Sampler sampler(p);
    const int n = 20000;
    for (int i = 0; i < n; ++i) ++counts[draw(sampler, logits, {}, uint32_t(i))];
    std::map<int32_t, size_t> rank;
    for (size_t r = 0; r < order.size(); ++r) rank[order[r]] = r;
    for (auto [id, count] : counts) ASSERT_LT(rank.count(id) ? rank.at(id) : order.size(), kept) << "token " << id << " is past the cuts";
    double bin_p = 0, bin_f = 0;
    for (size_t r = 0; r < kept; ++r) {
      bin_p += weight[r] / cumulative;
      bin_f += double(counts[order[r]]) / n;
      if (bin_p >= 1.0 / 16 || r + 1 == kept) {
        EXPECT_NEAR(bin_f, bin_p, 5 * std::sqrt(bin_p * (1 - bin_p) / n) + 1e-9) << "bin ending at rank " << r;
        bin_p = bin_f = 0;
      }
    }
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

// The prompt's tokens count for the repetition penalty, not for the presence and frequency penalties (OpenAI's:
// how often a token was sampled).
TEST(Sampler, OnlyGeneratedTokensCountForPresenceAndFrequency) {
  const std::vector<int32_t> prompt = {0, 0, 0, 0};
  auto pick = [&](const SamplingParams& params, std::vector<int32_t> generated) {
    std::vector<float> logits = {4.0f, 3.0f};
    return Sampler(params).sample(logits, {prompt, generated}, 0);
  };
  EXPECT_EQ(pick({.temperature = 0, .presence_penalty = 1.5f}, {}), 0);
  EXPECT_EQ(pick({.temperature = 0, .presence_penalty = 1.5f}, {0}), 1);   // 4 - 1.5 < 3
  EXPECT_EQ(pick({.temperature = 0, .frequency_penalty = 0.4f}, {}), 0);
  EXPECT_EQ(pick({.temperature = 0, .frequency_penalty = 0.4f}, {0, 0}), 0);     // 4 - 0.8 > 3
  EXPECT_EQ(pick({.temperature = 0, .frequency_penalty = 0.4f}, {0, 0, 0}), 1);  // 4 - 1.2 < 3
  EXPECT_EQ(pick({.temperature = 0, .repetition_penalty = 2.0f}, {}), 1);        // 4 / 2 < 3
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
      int32_t id = draw(masked, logits, history, uint32_t(i));
      ASSERT_LT(id, int32_t(ids));
      EXPECT_EQ(id, draw(unpadded, real, history, uint32_t(i)));
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
  // A temperature whose inverse overflows (subnormal), or so high that masked ids would get weight.
  EXPECT_THAT([] { Sampler({.temperature = 1e-39f}); }, ThrowsMessage<Error>(HasSubstr("temperature must be 0")));
  EXPECT_THAT([] { Sampler({.temperature = 3e38f}); }, ThrowsMessage<Error>(HasSubstr("temperature must be 0")));
  EXPECT_NO_THROW(Sampler({.temperature = kMinTemperature}));
  EXPECT_NO_THROW(Sampler({.temperature = kMaxTemperature}));
}

// What a request or the CLI leaves out is the model's generation_config.json (Qwen2.5's settings here); a file's
// value no sampler takes leaves the defaults, rather than failing every request.
TEST(RecommendedSampling, TakesTheModelsSettings) {
  SamplingOptions qwen = recommended_sampling({.temperature = 0.7, .top_p = 0.8, .repetition_penalty = 1.05, .top_k = 20});
  EXPECT_FLOAT_EQ(qwen.temperature, 0.7f);
  EXPECT_FLOAT_EQ(qwen.top_p, 0.8f);
  EXPECT_FLOAT_EQ(qwen.repetition_penalty, 1.05f);
  EXPECT_EQ(qwen.top_k, 20);
  EXPECT_FLOAT_EQ(recommended_sampling({.top_p = 0.9}).temperature, 1.0f);  // absent: the default
  SamplingOptions odd = recommended_sampling({.temperature = 0.7, .top_p = 0.0});
  EXPECT_FLOAT_EQ(odd.temperature, 1.0f);
  EXPECT_FLOAT_EQ(odd.top_p, 1.0f);
}

}  // namespace
}  // namespace gerbil
