// The generation loop: prefill the prompt, then sample and decode one token at a time until the model's
// end-of-sequence token, a stop string, the token budget or the context limit — each reported as a
// finish reason. Text is streamed as it becomes final (whole UTF-8 characters, with anything that could
// still turn into a stop string held back). The KV cache is reused across calls for the longest common
// prefix of the previous conversation, so a chat's next turn only prefills what is new.
#pragma once

#include <atomic>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "generate/sampler.h"
#include "graph/model.h"
#include "tokenizer/tokenizer.h"

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

class Generator {
 public:
  // `tokenizer` may be null: then no text is produced (ids only) and stop strings are not allowed.
  Generator(graph::Model& model, const Tokenizer* tokenizer);

  Generation generate(std::span<const int32_t> prompt, const GenerateOptions& options,
                      const TextCallback& on_text = {}, const std::atomic<bool>* cancel = nullptr);

  // Forgets the cached conversation (the next call prefills everything).
  void reset();

 private:
  std::vector<float> prefill(std::span<const int32_t> prompt, GenerationStats& stats);

  graph::Model& model_;
  const Tokenizer* tokenizer_;
  std::vector<int32_t> cached_;  // the tokens whose keys and values are in the model's cache
};

}  // namespace gerbil
