// What a generation asks for and what it gives back: options (sampling, token budget, stop conditions), the
// finish reasons, per-run statistics, and the streaming callback. Shared by the scheduler and its clients.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "generate/sampler.h"

namespace gerbil {

enum class FinishReason { EndOfSequence, StopString, MaxTokens, ContextFull, Cancelled };
std::string_view finish_reason_name(FinishReason reason);  // "eos", "stop_string", "max_tokens", ...

struct GenerateOptions {
  SamplingParams sampling;
  uint32_t max_new_tokens = 256;
  std::vector<std::string> stop_strings;  // the text stops before the first occurrence of any of them
  std::vector<int32_t> stop_ids;          // end-of-sequence ids; empty: the model's eos_token_id(s)
  bool ignore_eos = false;                // generate exactly max_new_tokens (benchmarks, reference checks)
};

// Seconds from START to now on the steady clock, the time base of GenerationStats and of every timing gerbil reports.
inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

struct GenerationStats {
  size_t prompt_tokens = 0;   // tokens of the prompt
  size_t prefilled_tokens = 0;  // of which were computed (the rest came from the KV cache)
  size_t generated_tokens = 0;
  double time_to_first_token = 0;  // seconds from the call to the first sampled token
  double prefill_seconds = 0, decode_seconds = 0;
  double prefill_tokens_per_second() const;
  double decode_tokens_per_second() const;
};

struct Generation {
  std::vector<int32_t> tokens;  // generated ids (an end-of-sequence id is not included)
  std::string text;             // their text, cut before a stop string
  FinishReason finish = FinishReason::MaxTokens;
  GenerationStats stats;
  uint64_t seed = 0;
};

// Receives each piece of final text and the id that completed it; returning false stops generation
// (finish reason Cancelled).
using TextCallback = std::function<bool(std::string_view text, int32_t id)>;

}  // namespace gerbil
