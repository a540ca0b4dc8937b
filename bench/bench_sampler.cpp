// Host-side sampling throughput (`build/bench/bench_sampler`): one token drawn from a row of logits the size of
// Qwen2.5's vocabulary (151,936), at the settings models ship with: top-k with top-p (Qwen), top-p alone
// (Llama 3), plain temperature. This is the host's share of every non-greedy decode step.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "generate/sampler.h"

namespace {

std::vector<float> random_logits() {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(151936);
  for (float& l : logits) l = normal(rng);
  return logits;
}

void sample(benchmark::State& state, gerbil::SamplingParams params) {
  const std::vector<float> logits = random_logits();
  std::vector<float> scratch(logits.size());
  std::vector<int32_t> history = {1, 2, 3};
  gerbil::Sampler sampler(params);
  for (auto _ : state) {
    std::copy(logits.begin(), logits.end(), scratch.begin());
    benchmark::DoNotOptimize(sampler.sample(scratch, {.generated = history}, /*position=*/7));
  }
}

BENCHMARK_CAPTURE(sample, top_k20_top_p0.8_t0.7, gerbil::SamplingParams{.temperature = 0.7f, .top_k = 20, .top_p = 0.8f, .seed = 1});
BENCHMARK_CAPTURE(sample, top_p0.9_t0.6, gerbil::SamplingParams{.temperature = 0.6f, .top_p = 0.9f, .seed = 1});
BENCHMARK_CAPTURE(sample, t1.0, gerbil::SamplingParams{.temperature = 1.0f, .seed = 1});

}  // namespace

BENCHMARK_MAIN();
