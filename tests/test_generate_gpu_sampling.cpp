// Sampling on the GPU against the host sampler (generate/sampler.h) where both must agree exactly: greedy
// decoding (top-k 1) after repetition and frequency penalties, which the GPU applies from its own token
// counts, step by step, on a tiny synthetic model on the default adapter.
#include <span>
#include <vector>

#include <gtest/gtest.h>

#include "generate/sampler.h"
#include "graph/model.h"
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
  int32_t first = host.sample(logits, history);
  std::vector<int32_t> on_host = {first};
  history.push_back(first);
  for (uint32_t t = 0; t < kSteps; ++t) {
    logits = model.forward(std::span(&on_host.back(), 1));
    on_host.push_back(host.sample(logits, history));
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

}  // namespace
}  // namespace gerbil
