#include "checks/batch_bench.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "generate/generation.h"
#include "gerbil/error.h"

namespace gerbil {
namespace {

using Clock = std::chrono::steady_clock;

void check(const graph::Model& model, const BatchBenchOptions& options) {
  if (options.sequences.empty()) fail("bench batch: no sequence counts (--sequences)");
  if (options.prompt_tokens == 0) fail("bench batch: the prompt length must be positive (--prompt-tokens)");
  if (options.generated_tokens == 0) fail("bench batch: the generated length must be positive (--generated-tokens)");
  for (uint32_t count : options.sequences) {
    if (count == 0) fail("bench batch: a sequence count of 0 (--sequences)");
    if (count > model.slots())
      fail("bench batch: {} sequences need as many KV-cache slots; the model has {} (--parallel)", count, model.slots());
  }
  if (options.sampling && !model.sampling_on_gpu(*options.sampling))
    fail("bench batch: the GPU sampler cannot draw with these settings (--sampling): it needs a positive "
         "temperature and a vocabulary of at most {}",
         kernels::kMaxSampleCount);
  if (options.prompt_tokens + options.generated_tokens > model.context())
    fail("bench batch: {} prompt + {} generated tokens exceed the context of {} per sequence (--ctx)",
         options.prompt_tokens, options.generated_tokens, model.context());
  if (options.prompt_tokens > model.max_chunk())
    fail("bench batch: a {}-token prompt exceeds the {} rows of one step", options.prompt_tokens, model.max_chunk());
}

// The index of the largest of each row's logits.
std::vector<int32_t> argmax_rows(const std::vector<float>& logits, size_t rows) {
  size_t vocab = logits.size() / rows;
  std::vector<int32_t> ids;
  for (size_t r = 0; r < rows; ++r) {
    auto row = logits.begin() + std::ptrdiff_t(r * vocab);
    ids.push_back(int32_t(std::max_element(row, row + std::ptrdiff_t(vocab)) - row));
  }
  return ids;
}

// One run for COUNT sequences: the prompts prefilled in steps of as many whole prompts as a step holds, then the
// decode steps; with `profile`, one decode step profiled in between (untimed).
BatchBenchResult run_once(graph::Model& model, const BatchBenchOptions& options, uint32_t count,
                          const std::vector<std::vector<int32_t>>& prompts, bool profile) {
  for (uint32_t slot = 0; slot < count; ++slot) model.reset(slot);
  BatchBenchResult result{count};
  uint32_t per_step = std::max<uint32_t>(1, model.max_chunk() / options.prompt_tokens);
  std::vector<int32_t> next;
  auto start = Clock::now();
  for (uint32_t first = 0; first < count; first += per_step) {
    std::vector<graph::Segment> segments;
    for (uint32_t slot = first; slot < std::min(count, first + per_step); ++slot) segments.push_back({slot, prompts[slot]});
    auto picked = argmax_rows(model.forward_batch(segments), segments.size());
    next.insert(next.end(), picked.begin(), picked.end());
  }
  result.prefill_seconds = seconds_since(start);
  if (profile) {
    model.profile_batch(count);  // warm-up: the timer's passes
    result.profile = summarise_profile(fmt::format("decode step of {} sequences at depth {}", count,
                                                   options.prompt_tokens),
                                       model.profile_batch(count));
  }
  for (uint32_t slot = 0; slot < count; ++slot) {
    graph::Model::GpuSampling settings = options.sampling.value_or(graph::Model::GpuSampling{.top_k = 1});
    settings.seed += slot;
    model.set_sampling(slot, settings);
    // The penalties count the prompt and the first id (drawn above) on the GPU.
    if (settings.penalized() && model.can_pick_in_batch())
      model.write_token_counts(slot, {prompts[slot], std::span(&next[slot], 1)});
  }
  start = Clock::now();
  for (uint32_t step = 0; step < options.generated_tokens; ++step) {
    std::vector<graph::Segment> segments;
    for (uint32_t slot = 0; slot < count; ++slot) segments.push_back({slot, std::span(&next[slot], 1)});
    if (model.can_pick_in_batch()) {
      auto picked = model.forward_batch_pick(segments);
      std::transform(picked.begin(), picked.end(), next.begin(), [](uint32_t id) { return int32_t(id); });
    } else {
      next = argmax_rows(model.forward_batch(segments), count);
    }
  }
  result.decode_seconds = seconds_since(start);
  result.prefill_tokens_per_second = double(count) * options.prompt_tokens / result.prefill_seconds;
  result.decode_tokens_per_second = double(count) * options.generated_tokens / result.decode_seconds;
  return result;
}

}  // namespace

std::vector<BatchBenchResult> bench_batch(graph::Model& model, const BatchBenchOptions& options) {
  check(model, options);
  std::mt19937_64 rng(options.seed);
  std::uniform_int_distribution<int32_t> token(0, int32_t(model.token_count()) - 1);
  uint32_t most = *std::max_element(options.sequences.begin(), options.sequences.end());
  std::vector<std::vector<int32_t>> prompts(most, std::vector<int32_t>(options.prompt_tokens));
  for (auto& prompt : prompts)
    for (auto& id : prompt) id = token(rng);
  std::vector<BatchBenchResult> results;
  for (uint32_t count : options.sequences) {
    run_once(model, options, count, prompts, false);  // warm-up: pipelines compiled, graphs built
    results.push_back(run_once(model, options, count, prompts, options.profile));
  }
  for (uint32_t slot = 0; slot < most; ++slot) {
    model.reset(slot);
    model.set_sampling(slot, {.top_k = 1});
  }
  return results;
}

}  // namespace gerbil
