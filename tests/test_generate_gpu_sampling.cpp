// Sampling on the GPU against the host sampler (generate/sampler.h) where both must agree exactly: greedy
// decoding (top-k 1) after repetition and frequency penalties, which the GPU applies from its own token
// counts, step by step, on a tiny synthetic model on the default adapter; and seeded draws, which must be
// the same token on both (a seeded request's text must not depend on whether it was batched).
#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "generate/sampler.h"
#include "graph/model.h"
#include "kernels/dispatch.h"
#include "kernels/model.h"
#include "model/synth.h"
#include "support/device.h"
#include "support/logits.h"
#include "test_model_support.h"

namespace gerbil {
namespace {

TEST(GpuSampling, PenalisedGreedyDecodingPicksWhatTheHostSamplerPicks) {
  test::ScratchDir dir;
  synth_model(dir.path(), {.preset = "tiny-llama", .seed = 3});
  ModelFiles files = ModelFiles::open(dir.path());
  graph::Model model(test::device(), files, graph::ModelOptions{.context = 64});
  constexpr uint32_t kSteps = 24;
  // A prompt that holds tokens the model goes on to pick: {5, 17, 29, 3} and its first greedy tokens.
  std::vector<int32_t> prompt = {5, 17, 29, 3};
  model.decode_greedy(int32_t(test::argmax(model.forward(prompt))), 6, [&](int32_t id) {
    prompt.push_back(id);
    return true;
  });

  // On the host: the logits read back every step, penalised and argmaxed by Sampler; the prompt's tokens count
  // for the repetition penalty, not for the presence and frequency penalties (PROMPT_COUNTS_AS_GENERATED: as if
  // they did).
  const SamplingParams settings{.temperature = 0.0f, .repetition_penalty = 1.2f, .presence_penalty = 1.5f,
                                .frequency_penalty = 0.4f, .seed = 1};
  auto decode_on_host = [&](bool prompt_counts_as_generated) {
    model.reset();
    Sampler host(settings);
    std::vector<int32_t> history = prompt, tokens;
    auto logits = model.forward(prompt);
    for (uint32_t t = 0; t <= kSteps; ++t) {
      if (t > 0) logits = model.forward(std::span(&tokens.back(), 1));
      auto seen = SeenTokens::split(history, prompt_counts_as_generated ? 0 : prompt.size());
      tokens.push_back(host.sample(logits, seen, uint32_t(history.size() - 1)));
      history.push_back(tokens.back());
    }
    return tokens;
  };
  std::vector<int32_t> on_host = decode_on_host(false);
  EXPECT_NE(decode_on_host(true), on_host);  // the prompt's part in the penalties shows in these tokens
  int32_t first = on_host[0];

  // On the GPU: the same first token, then top-k 1 after the same penalties, counts kept on the GPU.
  model.reset();
  model.forward(prompt);
  std::vector<int32_t> seen = prompt, on_gpu = {first};
  seen.push_back(first);
  const graph::Model::GpuSampling penalised{.temperature = 1.0f, .top_k = 1, .seed = 1, .repetition_penalty = 1.2f,
                                            .presence_penalty = 1.5f, .frequency_penalty = 0.4f};
  model.decode_sampled(first, kSteps, penalised, SeenTokens::split(seen, prompt.size()), [&](int32_t id) {
    on_gpu.push_back(id);
    return true;
  });
  EXPECT_EQ(on_gpu, on_host);

  // ... and the penalties did change the answer.
  model.reset();
  model.forward(prompt);
  std::vector<int32_t> greedy = {first};
  model.decode_greedy(first, kSteps, [&](int32_t id) {
    greedy.push_back(id);
    return true;
  });
  EXPECT_NE(greedy, on_gpu);
}

// Every step graph that samples writes its rows' settings into one buffer before it runs, where the buffer holds
// others: a step run again with the settings it wrote last must write them again if another step wrote the buffer
// in between. A seeded draw on slot 0, a batched step with slot 1's settings in the first row, then the same draw
// again (slot 0's cache rewound): the same token.
TEST(GpuSampling, ADrawAfterAnotherStepsDrawIsTheSame) {
  test::ScratchDir dir;
  synth_model(dir.path(), {.preset = "tiny-llama", .seed = 6});
  ModelFiles files = ModelFiles::open(dir.path());
  graph::Model model(test::device(), files, graph::ModelOptions{.context = 64, .slots = 2});
  model.forward(std::vector<int32_t>{5, 17, 29, 3}, false, 0);
  model.forward(std::vector<int32_t>{8, 2, 40}, false, 1);
  const graph::Model::GpuSampling mine{.temperature = 1.5f, .seed = 11}, other{.temperature = 1.5f, .seed = 99};
  const uint32_t start = model.position(0);
  auto draw_once = [&] {
    model.rewind(start, 0);
    std::vector<int32_t> ids;
    model.decode_sampled(7, 1, mine, {}, [&](int32_t id) {
      ids.push_back(id);
      return true;
    });
    return ids;
  };
  std::vector<int32_t> first = draw_once();
  ASSERT_EQ(first.size(), 1u);
  model.set_sampling(1, other);
  std::vector<int32_t> fed = {9, 7};
  std::vector<graph::Segment> step = {{1, std::span(&fed[0], 1)}, {0, std::span(&fed[1], 1)}};
  model.forward_batch_pick(step);
  for (int again = 0; again < 3; ++again) EXPECT_EQ(draw_once(), first) << "draw " << again;
}

// One row of logits for draw_on_gpu(): its token counts `seen` and its settings.
struct DrawRow {
  std::vector<float> logits;
  std::vector<uint32_t> seen;
  SamplingParams settings;
};

// Draws `draws` tokens from each row with one chain of kernels::sample for all of them, at positions 0, 1, ...:
// the stages before the draw once (they do not depend on the position; of the levels, those the rows' settings
// need, as a model's step records them), then the draw at each position with the same counts. The rows lie one
// after another in one logits buffer and one counts buffer, each after a few poisoned logits (1e30, which would
// win every draw) and counts; every output and the scratch start poisoned. Row r's tokens come back as
// tokens[r].
std::vector<std::vector<uint32_t>> draw_on_gpu(gpu::Device& device, const std::vector<DrawRow>& rows, uint32_t draws) {
  constexpr uint32_t kGap = 5;
  std::vector<float> logits;
  std::vector<uint32_t> counts;
  std::vector<kernels::SampleParams> settings;
  uint32_t count = 0, levels = 1;
  for (const DrawRow& row : rows) {
    const SamplingParams& p = row.settings;
    logits.insert(logits.end(), kGap, 1e30f);
    counts.insert(counts.end(), kGap, 0xDEADu);
    kernels::SampleParams q{.count = uint32_t(row.logits.size()), .slot = 0, .top_k = uint32_t(p.top_k),
                            .position = 0, .top_p = p.top_p, .min_p = p.min_p, .inv_temperature = 1.0f / p.temperature,
                            .seed_lo = uint32_t(p.seed), .seed_hi = uint32_t(p.seed >> 32),
                            .repetition_penalty = p.repetition_penalty, .presence_penalty = p.presence_penalty,
                            .frequency_penalty = p.frequency_penalty, .logits_offset = uint32_t(logits.size()),
                            .counts_offset = uint32_t(counts.size())};
    logits.insert(logits.end(), row.logits.begin(), row.logits.end());
    counts.insert(counts.end(), row.seen.begin(), row.seen.end());
    count = std::max(count, q.count);
    levels = std::max(levels, kernels::sample_levels(q));
    settings.push_back(q);
  }
  const auto poisoned = [&](uint64_t words) { return std::vector<uint32_t>(words, 0xDEADu); };
  auto logits_buffer = device.upload("logits", std::span<const float>(logits));
  auto next = device.upload("next_ids", std::span<const uint32_t>(poisoned(rows.size() * draws)));
  auto drawn = device.upload("history", std::span<const uint32_t>(poisoned(rows.size() * draws)));
  auto candidates = device.upload(
      "candidates", std::span<const uint32_t>(poisoned(rows.size() * kernels::sample_candidates_words(count))));
  auto counts_buffer = device.upload("counts", std::span<const uint32_t>(counts));
  auto settings_buffer = device.upload("rows", std::span<const kernels::SampleParams>(settings));
  const kernels::SampleBuffers buffers{{&logits_buffer}, {&next},          {&drawn},
                                       {&candidates},    {&counts_buffer}, {&settings_buffer}};
  auto stages = kernels::sample(device, buffers, count, uint32_t(rows.size()));
  kernels::run(device, std::span(stages).first(2 + levels));  // position-free
  for (uint32_t d = 0; d < draws; ++d) {
    for (uint32_t r = 0; r < rows.size(); ++r) settings[r].position = d, settings[r].slot = r * draws + d;
    kernels::write_sample_rows(device, buffers, count, settings);
    device.write(counts_buffer, std::span<const uint32_t>(counts));  // each draw sees the same counts
    kernels::run(device, stages.back());
  }
  auto all = device.read_as<uint32_t>(drawn);
  EXPECT_EQ(device.read_as<uint32_t>(next), all) << "next_ids and history differ";
  std::vector<std::vector<uint32_t>> tokens;
  for (uint32_t r = 0; r < rows.size(); ++r) tokens.emplace_back(all.begin() + r * draws, all.begin() + (r + 1) * draws);
  // The last draw counted its id in each row with penalties and left every other count alone (a row without reads
  // none, and its draw may be one that is thrown away).
  std::vector<uint32_t> counted = counts;
  for (uint32_t r = 0; r < rows.size(); ++r)
    if (rows[r].settings.penalized() && draws > 0 && tokens[r].back() < rows[r].logits.size())
      ++counted[settings[r].counts_offset + tokens[r].back()];
  EXPECT_EQ(device.read_as<uint32_t>(counts_buffer), counted) << "the counts after the last draw";
  return tokens;
}
std::vector<uint32_t> draw_on_gpu(gpu::Device& device, const std::vector<float>& logits,
                                  const std::vector<uint32_t>& seen, const SamplingParams& p, uint32_t draws) {
  return draw_on_gpu(device, {{logits, seen, p}}, draws).front();
}

// The host Sampler's tokens for the same row, counts (as a history) and positions.
std::vector<uint32_t> draw_on_host(const std::vector<float>& logits, const std::vector<uint32_t>& seen,
                                   const SamplingParams& p, uint32_t draws) {
  std::vector<int32_t> history;
  for (size_t i = 0; i < seen.size(); ++i) history.insert(history.end(), seen[i], int32_t(i));
  Sampler host(p);
  std::vector<uint32_t> tokens;
  for (uint32_t d = 0; d < draws; ++d) {
    std::vector<float> scratch = logits;
    tokens.push_back(uint32_t(host.sample(scratch, {.generated = history}, d)));
  }
  return tokens;
}

// The GPU sampler (kernels::sample) and the host Sampler draw the same tokens from the same logits, token
// counts, seed and position, over random settings: temperature, top-k (off, 1..64, above 64, at or above the
// vocabulary), top-p, min-p, the penalties, peaked and flat rows, rows of many equal logits (more tokens at the
// cut than the GPU gathers: its refinement levels), -inf and NaN, odd vocabularies over several
// chunks. Both use the same integer weights and sums; only exp()'s rounding (the GPU's against the host's) at a
// boundary between two tokens may tell them apart: at most 1 draw in 100. (With the host drawing from its own
// random numbers, most draws differ.) The cases go to the GPU five at a time, as the rows of one chain with
// settings and vocabularies of their own, as a batched step's sequences do.
TEST(GpuSampling, HostAndGpuDrawTheSameTokens) {
  gpu::Device& device = test::device();
  std::mt19937 rng(21);
  auto pick = [&](auto... options) {
    std::array values{options...};
    return values[std::uniform_int_distribution<size_t>(0, values.size() - 1)(rng)];
  };
  constexpr uint32_t kDraws = 12, kRowsAChain = 5;
  size_t draws = 0, differing = 0;
  std::string differences;
  std::vector<DrawRow> chain;
  for (int c = 0; c < 40; ++c) {
    const uint32_t count = pick(50u, 700u, 2500u, 5001u);
    SamplingParams p{.temperature = pick(0.5f, 1.0f, 1.7f), .top_k = pick(0, 0, 1, 5, 40, 64, 65, 200, 1500, 6000),
                     .top_p = pick(1.0f, 0.9f, 0.5f), .min_p = pick(0.0f, 0.0f, 0.05f), .seed = rng() | 1ull << 40};
    const bool penalties = c % 3 == 0;
    if (penalties) p.repetition_penalty = 1.3f, p.presence_penalty = 0.2f, p.frequency_penalty = 0.1f;
    const float spread = pick(1.0f, 4.0f, 12.0f);  // flat to peaked
    std::uniform_real_distribution<float> uniform(-spread, spread);
    std::vector<float> logits(count);
    const bool ties = c % 4 == 1;  // logits on a grid of 1/4: thousands of equal ones
    for (float& l : logits) l = ties ? std::round(uniform(rng) * 0.25f) * 4.0f / spread : uniform(rng);
    for (uint32_t i = 3; i < count; i += 11) logits[i] = NAN;
    for (uint32_t i = 7; c % 5 == 2 && i < count; i += 3) logits[i] = -INFINITY;
    std::vector<uint32_t> seen(count, 0);
    for (uint32_t i = 1; penalties && i < count; i += 5) seen[i] = 1 + i % 3;
    chain.push_back({logits, seen, p});
    if (chain.size() < kRowsAChain) continue;

    auto on_gpu = draw_on_gpu(device, chain, kDraws);
    for (size_t r = 0; r < chain.size(); ++r) {
      const SamplingParams& s = chain[r].settings;
      auto on_host = draw_on_host(chain[r].logits, chain[r].seen, s, kDraws);
      for (uint32_t d = 0; d < kDraws; ++d) {
        ++draws;
        if (on_host[d] != on_gpu[r][d]) {
          ++differing;
          differences += fmt::format("\n  count {} temperature {} top_k {} top_p {} min_p {}{} position {}: host {}, "
                                     "GPU {}",
                                     chain[r].logits.size(), s.temperature, s.top_k, s.top_p, s.min_p,
                                     s.penalized() ? " penalties" : "", d, on_host[d], on_gpu[r][d]);
        }
      }
    }
    chain.clear();
  }
  EXPECT_EQ(draws, 40u * kDraws);
  EXPECT_LE(differing * 100, draws) << differing << " of " << draws << " draws differ:" << differences;
}

// The settings `gerbil bench model --sampling` is measured with (bench/device: top-k 20, top-p 0.9, temperature
// alone, min-p with a temperature, top-k 100 with top-p and a repetition penalty, and Qwen2.5's
// generation_config.json: temperature 0.7, top-k 20, top-p 0.8, repetition penalty 1.05) on rows of Qwen2.5's
// vocabulary (151,936: 74 whole chunks and one of 384 tokens) and an odd one, from peaked to flat, with a few NaN and
// -inf and tied logits: the GPU draws the host's token (at most 1 draw in 100 apart, as above).
TEST(GpuSampling, BenchSettingsOnAWholeVocabularyDrawTheHostSamplersTokens) {
  gpu::Device& device = test::device();
  std::mt19937 rng(8);
  const std::vector<SamplingParams> settings = {
      {.top_k = 20},
      {.top_p = 0.9f},
      {},
      {.temperature = 0.8f, .min_p = 0.05f},
      {.top_k = 100, .top_p = 0.95f, .repetition_penalty = 1.1f},
      {.temperature = 0.7f, .top_k = 20, .top_p = 0.8f, .repetition_penalty = 1.05f},
  };
  constexpr uint32_t kDraws = 10;
  size_t draws = 0, differing = 0;
  std::string differences;
  for (uint32_t count : {151936u, 100003u}) {
    for (float spread : {1.0f, 3.0f, 8.0f}) {
      std::normal_distribution<float> normal(0.0f, spread);
      std::vector<float> logits(count);
      for (float& l : logits) l = normal(rng);
      for (uint32_t i = 5; i < count; i += 1001) logits[i] = NAN;
      for (uint32_t i = 9; i < count; i += 997) logits[i] = -INFINITY;
      for (uint32_t i = 13; i < count; i += 4099) logits[i] = logits[i - 1];  // ties across the index order
      for (SamplingParams p : settings) {
        p.seed = rng() | 1ull << 35;
        std::vector<uint32_t> seen(count, 0);
        for (uint32_t i = 2; p.penalized() && i < count; i += 13) seen[i] = 1 + i % 3;
        SCOPED_TRACE(testing::Message() << "count " << count << " spread " << spread << " temperature "
                                        << p.temperature << " top_k " << p.top_k << " top_p " << p.top_p
                                        << " min_p " << p.min_p << " repetition_penalty " << p.repetition_penalty);
        auto on_gpu = draw_on_gpu(device, logits, seen, p, kDraws);
        auto on_host = draw_on_host(logits, seen, p, kDraws);
        for (uint32_t d = 0; d < kDraws; ++d, ++draws)
          if (on_host[d] != on_gpu[d]) {
            ++differing;
            differences += fmt::format("\n  count {} spread {} top_k {} top_p {} min_p {} position {}: host {}, GPU {}",
                                       count, spread, p.top_k, p.top_p, p.min_p, d, on_host[d], on_gpu[d]);
          }
      }
    }
  }
  EXPECT_LE(differing * 100, draws) << differing << " of " << draws << " draws differ:" << differences;
}

// Flat rows, where far more tokens than the GPU gathers (kernels::kSampleGathered) lie in the bin of a cut, so
// that its levels narrow the cut down across workgroups: every logit equal, near-equal logits (distinct, all in
// one bin), a vocabulary of 150k whose top-p or top-k cut lands among 50k equal logits, and logits around zero
// (order keys spanning most of 32 bits in one bin), under top-p, top-k, both, min-p and the penalties. Every
// weight here is exact on both sides (or far from a boundary): the GPU must draw the host's token every time.
TEST(GpuSampling, FlatRowsDrawTheHostSamplersTokens) {
  gpu::Device& device = test::device();
  std::mt19937 rng(5);
  struct Row {
    std::string name;
    std::vector<float> logits;
  };
  std::vector<Row> rows;
  rows.push_back({"all equal", std::vector<float>(20000, 0.25f)});
  {
    std::uniform_real_distribution<float> near(1.0f, 1.002f);  // 1/5 of a bin of d
    std::vector<float> logits(20000);
    for (float& v : logits) v = near(rng);
    rows.push_back({"near-equal", logits});
  }
  {
    // 100k logits in [2, 3) weigh 63% of the total over the best, the 50k at 1.0 the rest: top-p 0.95's cut and
    // top-k 120,000's lie among the equal ones.
    std::uniform_real_distribution<float> high(2.0f, 3.0f);
    std::vector<float> logits(150000, 1.0f);
    for (uint32_t i = 0; i < logits.size(); ++i)
      if (i % 3 != 1) logits[i] = high(rng);
    rows.push_back({"150k, 50k tied", logits});
  }
  {
    std::uniform_real_distribution<float> tiny(-1e-3f, 1e-3f);
    std::vector<float> logits(20000);
    for (uint32_t i = 0; i < logits.size(); ++i)
      logits[i] = i % 4 == 0 ? 0.0f : i % 4 == 1 ? -0.0f : i % 8 == 2 ? tiny(rng) * 1e-35f : tiny(rng);
    rows.push_back({"around zero", logits});
  }
  const std::vector<SamplingParams> settings = {
      {.top_p = 0.9f},
      {.top_k = 5000},
      {.top_k = 2048},  // in "all equal", token 2047: the last of its sub-bin (positions of 512 tokens)
      {.top_k = 120000},
      {.top_k = 7000, .top_p = 0.6f},
      {.top_k = 120000, .top_p = 0.97f},
      {.top_p = 0.95f},
      {.top_p = 0.3f, .min_p = 0.5f},
      {.temperature = 0.7f, .top_k = 3000, .top_p = 0.9f, .repetition_penalty = 1.3f, .presence_penalty = 0.2f},
  };
  constexpr uint32_t kDraws = 6;
  for (const Row& row : rows) {
    for (SamplingParams p : settings) {
      p.seed = rng() | 1ull << 33;
      std::vector<uint32_t> seen(row.logits.size(), 0);
      if (p.penalized())
        for (uint32_t i = 0; i < seen.size(); i += 7) seen[i] = 1 + i % 2;
      SCOPED_TRACE(testing::Message() << row.name << ": temperature " << p.temperature << " top_k " << p.top_k
                                      << " top_p " << p.top_p << " min_p " << p.min_p
                                      << (p.penalized() ? " penalties" : ""));
      EXPECT_EQ(draw_on_gpu(device, row.logits, seen, p, kDraws), draw_on_host(row.logits, seen, p, kDraws));
    }
  }
}

// Constrained decoding on the GPU (graph::Model::TokenMask): each step picks only among the ids the mask allows,
// and the mask of each step is asked after the id before it. Here a fifth of the ids, a different fifth after
// each id, so the unconstrained pick is mostly ruled out. Greedy and seeded draws pick what the host picks from
// the same logits read back with the ruled-out ones at -inf (the scheduler's host path).
TEST(GpuSampling, MaskedDecodingPicksWhatTheHostPicksAmongTheAllowedIds) {
  test::ScratchDir dir;
  synth_model(dir.path(), {.preset = "tiny-llama", .seed = 5});
  ModelFiles files = ModelFiles::open(dir.path());
  graph::Model model(test::device(), files, graph::ModelOptions{.context = 64});
  constexpr uint32_t kSteps = 20;
  const std::vector<int32_t> prompt = {5, 17, 29, 3};
  const uint32_t ids = model.token_count();
  auto allowed = [](int32_t last, uint32_t id) { return (id * 7 + uint32_t(last)) % 5 == 0; };

  // GPU: `first` fed, then kSteps masked picks; every mask is asked once, after the id before it.
  auto decode_on_gpu = [&](int32_t first, const graph::Model::GpuSampling* sampling) {
    model.reset();
    model.forward(prompt);
    std::vector<int32_t> tokens = {first};
    size_t masks = 0;
    graph::Model::TokenMask mask = [&](std::span<uint32_t> bits) {
      EXPECT_EQ(masks++, tokens.size() - 1) << "a mask asked before the id it follows came back";
      for (uint32_t id = 0; id < ids; ++id)
        if (allowed(tokens.back(), id)) bits[id / 32] |= 1u << (id % 32);
    };
    auto on_token = [&](int32_t id) {
      tokens.push_back(id);
      return true;
    };
    if (sampling) {
      std::vector<int32_t> seen = prompt;
      seen.push_back(first);
      model.decode_sampled(first, kSteps, *sampling, SeenTokens::split(seen, prompt.size()), on_token, 0, mask);
    } else {
      model.decode_greedy(first, kSteps, on_token, 0, mask);
    }
    return tokens;
  };
  // Host: the logits of every step read back, the ruled-out ids at -inf, then Sampler's pick.
  auto decode_on_host = [&](int32_t first, const SamplingParams& settings) {
    model.reset();
    model.forward(prompt);
    Sampler host(settings);
    std::vector<int32_t> history = prompt, tokens = {first};
    history.push_back(first);
    for (uint32_t t = 0; t < kSteps; ++t) {
      auto logits = model.forward(std::span(&tokens.back(), 1));
      for (uint32_t id = 0; id < logits.size(); ++id)
        if (!allowed(tokens.back(), id)) logits[id] = -INFINITY;
      tokens.push_back(host.sample(logits, SeenTokens::split(history, prompt.size()), uint32_t(history.size() - 1)));
      history.push_back(tokens.back());
    }
    return tokens;
  };
  model.reset();
  const int32_t first = int32_t(test::argmax(model.forward(prompt)));

  auto greedy = decode_on_gpu(first, nullptr);
  EXPECT_EQ(greedy, decode_on_host(first, {.temperature = 0.0f}));
  for (size_t t = 1; t < greedy.size(); ++t) EXPECT_TRUE(allowed(greedy[t - 1], uint32_t(greedy[t]))) << "step " << t;
  std::vector<int32_t> unmasked = {first};
  model.reset();
  model.forward(prompt);
  model.decode_greedy(first, kSteps, [&](int32_t id) {
    unmasked.push_back(id);
    return true;
  });
  EXPECT_NE(unmasked, greedy);  // the mask changed the answer

  // Stopped after 6 ids (the next step's products already queued) and resumed from the last id delivered: the
  // same ids as without the stop.
  {
    model.reset();
    model.forward(prompt);
    std::vector<int32_t> resumed = {first};
    graph::Model::TokenMask mask = [&](std::span<uint32_t> bits) {
      for (uint32_t id = 0; id < ids; ++id)
        if (allowed(resumed.back(), id)) bits[id / 32] |= 1u << (id % 32);
    };
    auto on_token = [&](int32_t id) {
      resumed.push_back(id);
      return resumed.size() != 7;
    };
    model.decode_greedy(first, kSteps, on_token, 0, mask);
    ASSERT_EQ(resumed.size(), 7u);
    EXPECT_EQ(model.position(), prompt.size() + 6);  // `first` and the ids before the last one delivered
    model.decode_greedy(resumed.back(), kSteps - 6, [&](int32_t id) {
      resumed.push_back(id);
      return true;
    }, 0, mask);
    EXPECT_EQ(resumed, greedy);
  }

  const graph::Model::GpuSampling sampling{.temperature = 0.9f, .top_p = 0.95f, .seed = 7};
  auto drawn = decode_on_gpu(first, &sampling);
  EXPECT_EQ(drawn, decode_on_host(first, {.temperature = 0.9f, .top_p = 0.95f, .seed = 7}));
  for (size_t t = 1; t < drawn.size(); ++t) EXPECT_TRUE(allowed(drawn[t - 1], uint32_t(drawn[t]))) << "step " << t;
  EXPECT_NE(drawn, greedy);  // drawn, not the best
}

}  // namespace
}  // namespace gerbil
