// Picks the next token from a row of logits: greedy, or temperature / top-k / top-p / min-p sampling,
// after repetition, presence and frequency penalties over the tokens seen so far. Seeded: the same
// seed, logits, history and position give the same token, and the same token as the GPU sampler
// (kernels/wgsl/sample.wgsl, which a sequence decoding alone uses): the same random numbers, hashed from
// (seed, position, round), the same order of candidates and the same draws, so that a seeded request's
// text does not depend on whether it was batched with others (only float rounding at a boundary between
// two tokens can tell the two apart). NaN logits are never drawn; a row of nothing but NaN is an
// error. A padded vocabulary (Qwen2.5: 151,936 logits for 151,665 tokenizer ids) gives the sampler the
// tokenizer's id count, and the padded tail is never drawn, whatever its logits.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <unordered_map>
#include <vector>

#include "graph/seen_tokens.h"

namespace gerbil {

constexpr float kMinTemperature = 1e-4f, kMaxTemperature = 100.0f;

struct SamplingParams {
  float temperature = 1.0f;  // <= 0: greedy (argmax); else within [kMinTemperature, kMaxTemperature]
  int32_t top_k = 0;         // 0: off
  float top_p = 1.0f;        // 1: off
  float min_p = 0.0f;        // 0: off; keeps tokens with p >= min_p * p(best)
  float repetition_penalty = 1.0f;  // Hugging Face style: divides positive logits of seen tokens, multiplies negative
  float presence_penalty = 0.0f;    // OpenAI style: subtracted once from the logit of every generated token
  float frequency_penalty = 0.0f;   // OpenAI style: subtracted per time generated (the prompt's do not count)
  uint64_t seed = 0;                // 0: a fresh random seed

  bool greedy() const { return temperature <= 0.0f; }
  bool penalized() const { return repetition_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f; }
  void validate() const;  // throws gerbil::Error naming the bad parameter
};


class Sampler {
 public:
  // Ids at or above ID_COUNT (the tokenizer's vocabulary size) are never drawn, in every mode.
  explicit Sampler(const SamplingParams& params, size_t id_count = std::numeric_limits<size_t>::max());

  // `logits` is scratch: it is modified. SEEN is every token so far (prompt and generated). POSITION is
  // that of the token whose logits these are (the step's input, as the GPU sampler's): with the seed, it
  // picks the random number.
  //
  // The rule, sample.wgsl's to the bit but for exp()'s rounding: each token (NaN skipped, infinities clamped)
  // weighs floor(exp(-d) 2^31), d = (best logit - logit) / temperature, or 0 from d >= 2047 / 96 on
  // (bin_weight()); top-k keeps the k first in sampling order (higher logit first, lower id first on ties);
  // top-p the shortest prefix of those whose weight reaches ceil(top_p 2^24 (their total) / 2^24) (top_p 2^24
  // truncated); min-p the tokens whose weight reaches floor(min_p 2^31). The token drawn is the kept one at
  // mark floor(u (kept total)) in id order, u the 24-bit kernels::sample_unit(seed, position, 0).
  int32_t sample(std::span<float> logits, const SeenTokens& seen, uint32_t position);
  uint64_t seed() const { return seed_; }

 private:
  void apply_penalties(std::span<float> logits, const SeenTokens& seen) const;
  // Puts candidates_[0, count) in sampling order (they and more may already be).
  void order_through(size_t count);
  // The integer weight of logit V relative to the best, BEST (see sample()).
  uint32_t weight(float v, float best) const;

  SamplingParams params_;
  size_t id_count_;
  uint64_t seed_;
  float inv_temperature_;
  std::vector<std::pair<float, int32_t>> candidates_;  // (logit, id), reused between calls
  size_t ordered_ = 0;                                   // candidates_[0, ordered_) is in sampling order
};

}  // namespace gerbil
