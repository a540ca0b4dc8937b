// Model throughput the way llama-bench reports it: pp512 (prefill of a 512-token prompt), tg128 (128
// generated tokens) at context depth 0 and 2048, time to first token, and GPU memory for weights and the
// KV cache. Each figure is the median of several repeats after a warm-up run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/model.h"

namespace gerbil {

struct ModelBenchOptions {
  uint32_t prompt_tokens = 512;     // pp
  uint32_t generated_tokens = 128;  // tg
  std::vector<uint32_t> depths = {0, 2048};
  uint32_t repeats = 5;
  uint64_t seed = 1;
  // --sampling: one more decode row, drawn on the GPU with these settings: "defaults" (the model's
  // generation_config.json, where it has one), then or instead comma-separated overrides, e.g.
  // "defaults,top_k=40" or "temperature=0.7,top_p=0.8,top_k=20,repetition_penalty=1.05" (also min_p,
  // presence_penalty, frequency_penalty). Empty: no such row.
  std::string sampling;

  // Throws gerbil::Error naming the `gerbil bench model` option of a field that measures nothing: no
  // prompt or generated tokens, no depth, no repeat.
  void validate() const;
};

struct ModelBenchResult {
  std::string test;  // "pp512", "tg128", "tg128 (host sampling)", "tg128 (sampled: temperature=0.7 ...)"
  uint32_t depth = 0;
  double median_seconds = 0;
  double tokens_per_second = 0;
  std::vector<double> seconds;  // every repeat
};

// The row's name as llama-bench writes it: "tg128", "tg128 @ d8192" at a depth, the variant after it
// ("tg128 @ d8192 (host sampling)").
std::string llama_bench_name(const ModelBenchResult& result);

// The GPU sampling settings of a --sampling spec (see ModelBenchOptions::sampling) for a model with these
// generation defaults; throws naming a bad key or value.
graph::Model::GpuSampling parse_bench_sampling(const std::string& spec, const GenerationDefaults& defaults);

// Runs the benchmarks on `model` (its cache is reset). Throws if the options are invalid or the context is too
// small for the depths.
std::vector<ModelBenchResult> bench_model(graph::Model& model, const ModelBenchOptions& options);

// Where one step's GPU time goes: its dispatches timed one by one and grouped by role ("qkv", "attention",
// ...: the label without its "layer N" prefix) and kernel, largest first.
struct ProfileRow {
  std::string role, kernel;
  uint32_t dispatches = 0;
  double microseconds = 0;  // all dispatches of the row together
};
struct StepProfile {
  std::string step;  // "decode at depth 0", "prefill of 512 tokens"
  double total_microseconds = 0;
  uint32_t dispatches = 0;
  std::vector<ProfileRow> rows;
};

// The timings of one profiled step (graph::Model::profile) grouped into a StepProfile named `step`.
StepProfile summarise_profile(std::string step, const std::vector<gpu::Timing>& timings);

// Profiles a decode step at each depth and a prefill of `prompt_tokens` tokens (the cache is reset). Throws as
// bench_model() does.
std::vector<StepProfile> profile_model(graph::Model& model, const ModelBenchOptions& options);

}  // namespace gerbil
