// Sampling on the GPU against the host sampler (generate/sampler.h) where both must agree exactly: greedy
// decoding (top-k 1) after repetition and frequency penalties, which the GPU applies from its own token
// counts, step by step, on a tiny synthetic model on the default adapter; and seeded draws, which must be
// the same token on both (a seeded request's text must not depend on whether it was batched).
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
#include "test_model_support.h"

namespace gerbil {
namespace {

TEST(GpuSampling, PenalisedGreedyDecodingPicksWhatTheHostSamplerPicks) {
  test::ScratchDir dir;
  synth_model(dir.path(), {.preset = "tiny-llama", .seed = 3});
  ModelFiles files = ModelFiles::open(dir.path());
  graph::Model model(test::device(), files, graph::ModelOptions{.context = 64});
  const std::vector<int32_t> prompt = {5, 17, 29, 3, 17};
  constexpr uint32_t kSteps = 24;

  // On the host: the logits read back every step, penalised and argmaxed by Sampler.
  Sampler host({.temperature = 0.0f, .repetition_penalty = 1.8f, .frequency_penalty = 0.4f, .seed = 1});
  std::vector<int32_t> history = prompt;
  auto logits = model.forward(prompt);
  int32_t first = host.sample(logits, history, uint32_t(history.size() - 1));
  std::vector<int32_t> on_host = {first};
  history.push_back(first);
  for (uint32_t t = 0; t < kSteps; ++t) {
    logits = model.forward(std::span(&on_host.back(), 1));
    on_host.push_back(host.sample(logits, history, uint32_t(history.size() - 1)));
    history.push_back(on_host.back());
  }

  // On the GPU: the same first token, then top-k 1 after the same penalties, counts kept on the GPU.
  model.reset();
  model.forward(prompt);
  std::vector<int32_t> seen = prompt, on_gpu = {first};
  seen.push_back(first);
  const graph::Model::GpuSampling penalised{.temperature = 1.0f, .top_k = 1, .seed = 1, .repetition_penalty = 1.8f,
                                            .frequency_penalty = 0.4f};
  model.decode_sampled(first, kSteps, penalised, seen, [&](int32_t id) {
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

// The GPU sampler (kernels::sample) and the host Sampler draw the same tokens from the same logits, token
// counts, seed and position, over random settings: temperature, top-k (off, 1..64, above 64, at or above the
// vocabulary), top-p, min-p, the penalties, peaked and flat rows, rows of many equal logits (more tokens at the
// cut than the GPU gathers: its radix passes over all logits), -inf and NaN, odd vocabularies over several
// chunks. Both use the same integer weights and sums; only exp()'s rounding (the GPU's against the host's) at a
// boundary between two tokens may tell them apart: at most 1 draw in 100. (With the host drawing from its own
// random numbers, most draws differ.)
TEST(GpuSampling, HostAndGpuDrawTheSameTokens) {
  gpu::Device& device = test::device();
  std::mt19937 rng(21);
  auto pick = [&](auto... options) {
    std::array values{options...};
    return values[std::uniform_int_distribution<size_t>(0, values.size() - 1)(rng)];
  };
  constexpr uint32_t kDraws = 12;
  size_t draws = 0, differing = 0;
  std::string differences;
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
    std::vector<int32_t> history;  // the host's view of the same counts
    for (uint32_t i = 1; penalties && i < count; i += 5) {
      seen[i] = 1 + i % 3;
      history.insert(history.end(), seen[i], int32_t(i));
    }
    SCOPED_TRACE(testing::Message() << "count " << count << " temperature " << p.temperature << " top_k " << p.top_k
                                    << " top_p " << p.top_p << " min_p " << p.min_p << " spread " << spread
                                    << (penalties ? " penalties" : "") << (ties ? " ties" : ""));

    auto logits_buffer = device.upload("logits", std::span<const float>(logits));
    auto next = device.upload("next_ids", std::span<const uint32_t>(std::vector<uint32_t>{0xDEADu}));
    auto drawn = device.upload("history", std::span<const uint32_t>(std::vector<uint32_t>(kDraws, 0xDEADu)));
    auto candidates = device.upload(
        "candidates", std::span<const uint32_t>(std::vector<uint32_t>(kernels::sample_candidates_words(count), 0xDEADu)));
    auto counts = device.upload("counts", std::span<const uint32_t>(seen));
    kernels::SampleParams q{count, 0, uint32_t(p.top_k), 0, p.top_p, p.min_p, 1.0f / p.temperature,
                            uint32_t(p.seed), uint32_t(p.seed >> 32), p.repetition_penalty, p.presence_penalty,
                            p.frequency_penalty};
    auto stages = kernels::sample(device, {&logits_buffer}, {&next}, {&drawn}, {&candidates}, {&counts}, q);
    for (size_t s = 0; s + 1 < stages.size(); ++s) kernels::run(device, stages[s]);  // position-free
    for (uint32_t d = 0; d < kDraws; ++d) {
      q.position = q.slot = d;
      device.write(stages.back().params, std::as_bytes(std::span(&q, 1)));
      device.write(counts, std::span<const uint32_t>(seen));  // each draw sees the same counts
      kernels::run(device, stages.back());
    }
    auto on_gpu = device.read_as<uint32_t>(drawn);
    Sampler host(p);
    for (uint32_t d = 0; d < kDraws; ++d) {
      std::vector<float> scratch = logits;
      int32_t id = host.sample(scratch, history, d);
      ++draws;
      if (uint32_t(id) != on_gpu[d]) {
        ++differing;
        differences += fmt::format("\n  count {} top_k {} top_p {} min_p {} position {}: host {}, GPU {}", count,
                                   p.top_k, p.top_p, p.min_p, d, id, on_gpu[d]);
      }
    }
  }
  EXPECT_LE(differing * 100, draws) << differing << " of " << draws << " draws differ:" << differences;
}

}  // namespace
}  // namespace gerbil
