// Batched throughput the way llama.cpp's llama-batched-bench reports it: B sequences, each with its own
// `prompt_tokens`-token prompt prefilled, then `generated_tokens` decode steps that each compute the next token of
// all B sequences together; the aggregate prompt and decode tokens per second, for each B.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "checks/model_bench.h"
#include "graph/model.h"

namespace gerbil {

struct BatchBenchOptions {
  uint32_t prompt_tokens = 128;
  uint32_t generated_tokens = 128;
  std::vector<uint32_t> sequences = {1, 4, 16, 64};
  uint64_t seed = 1;
  // Also time every dispatch of one decode step of each count on its own (at the prompts' end; the model's
  // device needs gpu::request_precise_timestamps() for GPU times).
  bool profile = false;
  // Each sequence's ids drawn on the GPU with these settings (sequence i's seed: seed + i) instead of the argmax,
  // penalties counting each sequence's own prompt and ids.
  std::optional<graph::Model::GpuSampling> sampling;
};

struct BatchBenchResult {
  uint32_t sequences = 0;
  double prefill_seconds = 0, decode_seconds = 0;
  double prefill_tokens_per_second = 0;  // all sequences' prompt tokens / prefill_seconds
  double decode_tokens_per_second = 0;   // sequences * generated_tokens / decode_seconds
  std::optional<StepProfile> profile;    // BatchBenchOptions::profile
};

// Runs the benchmark on `model`, whose slots must number at least the largest count and hold prompt_tokens +
// generated_tokens each; every slot it uses is reset. Each count runs once after a warm-up of the same shape.
// Throws, naming the option, for counts of 0, an empty list, or lengths of 0.
std::vector<BatchBenchResult> bench_batch(graph::Model& model, const BatchBenchOptions& options);

}  // namespace gerbil
