// The tokens a sequence has seen, as the samplers' penalties take them (generate/sampler.h on the host,
// graph::Model::decode_sampled on the GPU).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace gerbil {

// The tokens a sequence has seen, for the penalties: the repetition penalty counts both parts (as transformers
// does), the presence and frequency penalties only the generated tokens (OpenAI's definition: how often a token
// was sampled), so that a long prompt does not push its common words down.
struct SeenTokens {
  std::span<const int32_t> prompt, generated;
  // HISTORY is the prompt's PROMPT_TOKENS tokens, then the generated ones.
  static SeenTokens split(std::span<const int32_t> history, size_t prompt_tokens) {
    return {history.first(prompt_tokens), history.subspan(prompt_tokens)};
  }
};

}  // namespace gerbil
